// Package playground runs the local all-in-one environment: a real
// kube-apiserver, etcd and kube-controller-manager on loopback, simulated
// nodes, and the sidecarset manager with its webhooks registered against
// that apiserver.
package playground

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sidecarset/sidecarset/internal/kubeletsim"
	"github.com/sidecarset/sidecarset/internal/stack"
)

// Options configure the playground.
type Options struct {
	// KubeConfig is where the administrator kubeconfig is written once
	// everything answers; it is removed on exit.
	KubeConfig string
	// Nodes is how many simulated nodes run.
	Nodes int
	// Demo runs the guided demo once the environment is up.
	Demo bool
	// BinDir, when set, holds kubectl and kubectl-sidecarset for the user
	// (make playground puts them there).
	BinDir string
	// Out receives what the user reads; Log the components' logs (nil
	// discards them).
	Out io.Writer
	Log io.Writer
}

// Run starts everything, writes the kubeconfig, runs the demo if asked, and
// keeps running until ctx is done; then it stops everything it started.
func Run(ctx context.Context, opts Options) (err error) {
	step := newStepper(opts.Out)
	step.start(fmt.Sprintf("starting etcd, kube-apiserver, kube-controller-manager, %d simulated nodes "+
		"and sidecarset-manager with its webhooks (TLS, generated certificates) on loopback", opts.Nodes))
	sys, err := stack.Start(ctx, stack.Options{
		ControllerManager: true,
		Sim:               kubeletsim.Options{Nodes: opts.Nodes},
		Output:            opts.Log,
	})
	if err != nil {
		return err
	}
	defer func() {
		step.start("stopping everything")
		err = errors.Join(err, sys.Stop())
		step.done()
	}()
	step.done()
	env := sys.Env

	if err := os.WriteFile(opts.KubeConfig, env.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	defer os.Remove(opts.KubeConfig)
	path := ""
	if opts.BinDir != "" {
		path = fmt.Sprintf("  export PATH=%s:$PATH   # kubectl and kubectl-sidecarset\n", opts.BinDir)
	}
	fmt.Fprintf(opts.Out, `
The playground is up. In another terminal:

  export KUBECONFIG=%s
%s  kubectl get nodes
  kubectl sidecarset status

Press Ctrl-C to stop everything.
`, opts.KubeConfig, path)

	if opts.Demo {
		if err := runDemo(ctx, env, opts.Out, opts.KubeConfig); err != nil && ctx.Err() == nil {
			fmt.Fprintf(opts.Out, "\nThe demo stopped: %v\nThe playground keeps running.\n", err)
		}
	}
	<-ctx.Done()
	fmt.Fprintln(opts.Out, "\nStopping.")
	return nil
}

// stepper prints each startup step and how long it took, so a slow start
// never looks stuck.
type stepper struct {
	out   io.Writer
	began time.Time
}

func newStepper(out io.Writer) *stepper { return &stepper{out: out} }

func (s *stepper) start(what string) {
	s.began = time.Now()
	fmt.Fprintf(s.out, "==> %s ...\n", what)
}

func (s *stepper) done() {
	fmt.Fprintf(s.out, "    done in %.1fs\n", time.Since(s.began).Seconds())
}
