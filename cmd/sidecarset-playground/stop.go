package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sidecarset/sidecarset/internal/playground"
)

// The playground stops what it started however it is told to stop: on
// SIGINT, SIGTERM or SIGHUP, and once nobody reads its output (the `tee`
// of `make playground 2>&1 | tee log`, which a Ctrl-C may stop first). A
// stop that outlasts its grace, or a second signal, ends the process at
// once; so does SIGKILL. The kernel then kills every child, as each has
// SIGKILL as its parent-death signal (internal/childproc), and the
// simulated nodes and the manager run in this process.

// stopGrace is how long a stop may take before the process ends: a
// simulated playground stops in a few seconds; a real node's pods are
// deleted through the apiserver first.
func stopGrace(kind playground.NodeKind) time.Duration {
	if kind == playground.Real {
		return 2 * time.Minute
	}
	return 15 * time.Second
}

// stopOnSignals cancels the playground's context (stop) on SIGINT, SIGTERM
// or SIGHUP. Once the context is done, whatever cancelled it, a second
// signal or the grace running out removes the kubeconfig and exits.
func stopOnSignals(ctx context.Context, stop context.CancelCauseFunc, grace time.Duration, kubeconfig string, errOut io.Writer) {
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	// Received and left unread: unhandled, SIGPIPE ends a Go program on a
	// write to a closed stdout or stderr (os/signal, "SIGPIPE"), before it
	// has stopped anything; handled, the write fails with EPIPE, which
	// outputWriter turns into a stop.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	go func() {
		select {
		case sig := <-signals:
			stop(fmt.Errorf("%v", sig))
		case <-ctx.Done():
		}
		select {
		case sig := <-signals:
			fmt.Fprintf(errOut, "sidecarset-playground: %v while stopping: killing everything now\n", sig)
		case <-time.After(grace):
			fmt.Fprintf(errOut, "sidecarset-playground: still stopping after %v: killing everything now\n", grace)
		}
		_ = os.Remove(kubeconfig)
		os.Exit(1)
	}()
}

// outputWriter writes to f (the playground's stdout or stderr). Once a
// write fails with EPIPE, nobody reads f any more: it stops the
// playground (gone) and from then on discards what it is given, without
// an error, so that a child whose output it copies never blocks on a
// full pipe while the playground stops it.
type outputWriter struct {
	f      *os.File
	gone   context.CancelCauseFunc
	closed atomic.Bool
}

func (w *outputWriter) Write(p []byte) (int, error) {
	if w.closed.Load() {
		return len(p), nil
	}
	n, err := w.f.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		w.closed.Store(true)
		w.gone(fmt.Errorf("nobody reads the output any more: %w", err))
		return len(p), nil
	}
	return n, err
}
