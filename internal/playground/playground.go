// Package playground runs the local all-in-one environment: a real
// kube-apiserver, etcd and kube-controller-manager on loopback, simulated
// nodes or one real node, and the sidecarset manager with its webhooks
// registered against that apiserver.
package playground

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sidecarset/sidecarset/internal/kubeletsim"
	"github.com/sidecarset/sidecarset/internal/realnode"
	"github.com/sidecarset/sidecarset/internal/stack"
)

// NodeKind says what runs the playground's pods.
type NodeKind string

const (
	// Simulated nodes (internal/kubeletsim) play the kubelet's part: they
	// start in a second, need no privileges, and images whose names say so
	// fail on purpose.
	Simulated NodeKind = "simulated"
	// Real is one real node (internal/realnode): the kubelet, containerd
	// and runc running real containers of locally built images. It needs
	// root on Debian.
	Real NodeKind = "real"
)

// Options configure the playground.
type Options struct {
	// KubeConfig is where the administrator kubeconfig is written once
	// everything answers; it is removed on exit.
	KubeConfig string
	// NodeKind says what runs the pods; empty means Simulated.
	NodeKind NodeKind
	// Nodes is how many nodes run: any number of simulated ones, one real.
	Nodes int
	// SimDelay makes simulated nodes take time as real ones do: an image
	// pull takes SimDelay, a container start and the node's reaction to a
	// pod's change half of it. Zero: they act at once.
	SimDelay time.Duration
	// Demo runs the guided demo once the environment is up.
	Demo bool
	// DemoPace, when set, holds the demo before each step until it gives
	// a line (Enter), as a guided tour; "a" or its end runs the rest. Nil
	// runs the demo through.
	DemoPace io.Reader
	// ExitAfterDemo stops everything once the demo is done, instead of
	// running until interrupted; Run then fails if a demo step failed.
	ExitAfterDemo bool
	// BinDir, when set, holds kubectl and kubectl-sidecarset for the user
	// (make playground puts them there).
	BinDir string
	// Out receives what the user reads; Log the components' logs (nil
	// discards them).
	Out io.Writer
	Log io.Writer
}

// Check says what is wrong with opts, named by the command's flags, for a
// process whose effective user ID is euid.
func (o Options) Check(euid int) error {
	switch o.NodeKind {
	case "", Simulated:
		if o.Nodes < 1 {
			return fmt.Errorf("--nodes %d: must be at least 1", o.Nodes)
		}
		if o.SimDelay < 0 || o.SimDelay > 10*time.Second {
			return fmt.Errorf("--sim-delay %v: must be between 0 and 10s (longer outlasts the demo's waits)", o.SimDelay)
		}
	case Real:
		if o.SimDelay != 0 {
			return fmt.Errorf("--sim-delay %v: a real node takes the time it takes; the flag is for --node-kind=simulated", o.SimDelay)
		}
		if o.Nodes != 1 {
			return fmt.Errorf("--nodes %d: --node-kind=real runs one node", o.Nodes)
		}
		if euid != 0 {
			return errors.New("--node-kind=real runs a real kubelet, containerd and runc, which need root " +
				"(mounts, cgroups, network namespaces): run it as root, or use --node-kind=simulated")
		}
	default:
		return fmt.Errorf("--node-kind=%s: want %s or %s", o.NodeKind, Simulated, Real)
	}
	if o.ExitAfterDemo && !o.Demo {
		return errors.New("--exit-after-demo needs the demo: leave out --demo=false")
	}
	return nil
}

// Run starts everything, writes the kubeconfig, runs the demo if asked, and
// keeps running until ctx is done (or the demo is, with ExitAfterDemo); then
// it stops everything it started, a real node before the control plane.
func Run(ctx context.Context, opts Options) (err error) {
	if err := opts.Check(os.Geteuid()); err != nil {
		return err
	}
	realNode := opts.NodeKind == Real
	nodes := fmt.Sprintf("%d simulated nodes", opts.Nodes)
	where := "on loopback"
	stackOpts := stack.Options{
		ControllerManager: true,
		Sim: kubeletsim.Options{Nodes: opts.Nodes,
			PullDelay: opts.SimDelay, StartDelay: opts.SimDelay / 2, SyncDelay: opts.SimDelay / 2},
		Output: opts.Log,
	}
	if realNode {
		nodes = "a real node (kubelet, containerd and runc; images built locally)"
		where = "on the node's bridge address " + realnode.APIServerAddress
		stackOpts.Sim = kubeletsim.Options{}
		stackOpts.RealNode, stackOpts.RealImages = true, realImages()
	}
	step := newStepper(opts.Out)
	step.start(fmt.Sprintf("starting etcd, kube-apiserver, kube-controller-manager, %s "+
		"and sidecarset-manager with its webhooks (TLS, generated certificates) %s", nodes, where))
	sys, err := stack.Start(ctx, stackOpts)
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
%s
Press Ctrl-C to stop everything.
`, opts.KubeConfig, path, realNodeNote(realNode))

	if opts.Demo {
		err := runDemo(ctx, env, opts.Out, opts.KubeConfig, realNode, opts.DemoPace)
		switch {
		case ctx.Err() != nil:
		case opts.ExitAfterDemo:
			if err != nil {
				return fmt.Errorf("the demo stopped: %w", err)
			}
			fmt.Fprintln(opts.Out, "\nStopping (--exit-after-demo).")
			return nil
		case err != nil:
			fmt.Fprintf(opts.Out, "\nThe demo stopped: %v\nThe playground keeps running.\n", err)
		}
	}
	<-ctx.Done()
	fmt.Fprintln(opts.Out, "\nStopping.")
	return nil
}

// realNodeNote tells how a user's own pods run on the real node.
func realNodeNote(realNode bool) string {
	if !realNode {
		return ""
	}
	var refs []string
	for _, im := range realImages() {
		refs = append(refs, im.Ref)
	}
	return fmt.Sprintf(`
Pods run on the real node %q. No scheduler runs and nothing is pulled: give
your pods spec.nodeName: %s, imagePullPolicy: Never and one of the node's
images (%s; busybox with /version holding the tag, the exporters serving on
port 9104).
`, realnode.NodeName, realnode.NodeName, strings.Join(refs, ", "))
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
