// Command sidecarset-playground runs a local all-in-one environment: a real
// kube-apiserver, etcd and kube-controller-manager on loopback, simulated
// nodes, and the sidecarset manager with its webhooks, plus a guided demo.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"go.uber.org/zap/zapcore"

	"github.com/sidecarset/sidecarset/internal/playground"
)

const usage = `sidecarset-playground starts a local Kubernetes control plane with simulated
nodes and the sidecarset manager, writes a kubeconfig for it, and runs a demo.

It needs the control-plane binaries in $KUBEBUILDER_ASSETS; 'make playground'
builds them (once, several minutes) and sets it.

Examples:
  make playground
  KUBEBUILDER_ASSETS=$(hack/control-plane.sh) bin/sidecarset-playground --demo=false --kubeconfig /tmp/pg.kubeconfig
  kubectl --kubeconfig /tmp/pg.kubeconfig get sidecarsets

Flags:
`

func main() {
	opts := playground.Options{Out: os.Stdout}
	// Its own flag set: controller-runtime registers a global --kubeconfig
	// meaning the cluster to connect to, not the file to write.
	fs := flag.NewFlagSet("sidecarset-playground", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&opts.KubeConfig, "kubeconfig", "playground.kubeconfig", "where to write the kubeconfig once everything answers (removed on exit)")
	fs.IntVar(&opts.Nodes, "nodes", 3, "how many simulated nodes to run")
	fs.BoolVar(&opts.Demo, "demo", true, "run the guided demo once the environment is up")
	verbose := fs.Bool("verbose", false, "show the control plane's and the manager's logs")
	_ = fs.Parse(os.Args[1:])
	if opts.Nodes < 1 {
		fmt.Fprintln(os.Stderr, "--nodes must be at least 1")
		os.Exit(2)
	}
	if abs, err := filepath.Abs(opts.KubeConfig); err == nil {
		opts.KubeConfig = abs
	}
	// make playground builds kubectl-sidecarset (and links kubectl) next to
	// this binary.
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		if _, err := os.Stat(filepath.Join(dir, "kubectl-sidecarset")); err == nil {
			opts.BinDir = dir
		}
	}

	level := zap.Level(zapLevel(*verbose))
	if *verbose {
		opts.Log = os.Stderr
	}
	logger := zap.New(zap.WriteTo(os.Stderr), level)
	ctrl.SetLogger(logger)
	// The simulated nodes log through klog.
	klog.SetLogger(logger)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := playground.Run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "sidecarset-playground:", err)
		os.Exit(1)
	}
}

// zapLevel keeps the manager quiet unless asked: the demo's output is what
// the user reads.
func zapLevel(verbose bool) zapcore.Level {
	if verbose {
		return zapcore.InfoLevel
	}
	return zapcore.FatalLevel
}
