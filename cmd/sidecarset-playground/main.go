// Command sidecarset-playground runs a local all-in-one environment: a real
// kube-apiserver, etcd and kube-controller-manager on loopback, simulated
// nodes or one real node, and the sidecarset manager with its webhooks, plus
// a guided demo.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/term"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"go.uber.org/zap/zapcore"

	"github.com/sidecarset/sidecarset/internal/playground"
)

const usage = `sidecarset-playground starts a local Kubernetes control plane with simulated
nodes (or one real node) and the sidecarset manager, writes a kubeconfig for
it, and runs a demo: a guided one on a terminal, which waits for Enter
before each step (--demo=auto runs it through).

It needs the control-plane binaries in $KUBEBUILDER_ASSETS; 'make playground'
builds them (once, several minutes) and sets it.

--node-kind=simulated (the default) needs no privileges, starts in seconds,
runs any number of nodes, and fails images on purpose by their names: an
image whose repository or tag contains pull-fails never pulls, crashes
exits 1 after it starts, never-ready never passes readiness, turns-unready
fails readiness after a while, completes exits 0 (fluent-bit:crashes,
example/proxy-pull-fails:v2).
--node-kind=real runs one real node: the kubelet ('hack/control-plane.sh
kubelet' builds it), containerd and runc from Debian, real containers of
locally built images; it needs root.

Ctrl-C, SIGTERM, SIGHUP, or the end of what reads its output stop everything
it started; a second Ctrl-C kills it all at once. Its processes die with it
however it ends.

Examples:
  make playground
  make playground PLAYGROUND_FLAGS=--node-kind=real
  KUBEBUILDER_ASSETS=$(hack/control-plane.sh) bin/sidecarset-playground --demo=false --kubeconfig /tmp/pg.kubeconfig
  kubectl --kubeconfig /tmp/pg.kubeconfig get sidecarsets

Flags:
`

func main() {
	opts, f, err := parseFlags(os.Args[1:], os.Geteuid(), os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sidecarset-playground:", err)
		os.Exit(2)
	}
	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	switch {
	case f.demo == demoGuided, f.demo == demoOn && term.IsTerminal(int(os.Stdin.Fd())):
		opts.DemoPace = os.Stdin
	}
	verbose := f.verbose
	stdout := &outputWriter{f: os.Stdout, gone: stop}
	stderr := &outputWriter{f: os.Stderr, gone: stop}
	opts.Out = stdout
	// make playground builds kubectl-sidecarset (and links kubectl) next to
	// this binary.
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		if _, err := os.Stat(filepath.Join(dir, "kubectl-sidecarset")); err == nil {
			opts.BinDir = dir
		}
	}

	level := zap.Level(zapLevel(verbose))
	if verbose {
		// Not the file itself: the children would write to it directly,
		// and die of SIGPIPE on their own once nobody reads it.
		opts.Log = stderr
	}
	logger := zap.New(zap.WriteTo(stderr), level)
	ctrl.SetLogger(logger)
	// The simulated nodes log through klog.
	klog.SetLogger(logger)

	stopOnSignals(ctx, stop, stopGrace(opts.NodeKind), opts.KubeConfig, stderr)
	if err := playground.Run(ctx, opts); err != nil {
		fmt.Fprintln(stderr, "sidecarset-playground:", err)
		os.Exit(1)
	}
	if cause := context.Cause(ctx); errors.Is(cause, syscall.EPIPE) {
		fmt.Fprintln(stderr, "sidecarset-playground: stopped:", cause)
		os.Exit(1)
	}
}

// cmdFlags are the flags parseFlags reads besides the playground's options.
type cmdFlags struct {
	verbose bool
	demo    demoMode
}

// demoMode is --demo: guided stops before each step until Enter; true does
// so when standard input is a terminal (else runs through, as auto does);
// false runs no demo. --demo alone is true.
type demoMode string

const (
	demoOn     demoMode = "true"
	demoGuided demoMode = "guided"
	demoAuto   demoMode = "auto"
	demoOff    demoMode = "false"
)

func (m *demoMode) String() string { return string(*m) }

func (m *demoMode) Set(s string) error {
	switch v := demoMode(strings.ToLower(s)); v {
	case demoOn, demoGuided, demoAuto, demoOff:
		*m = v
		return nil
	}
	return fmt.Errorf("want true, guided, auto or false")
}

// IsBoolFlag lets --demo stand alone for --demo=true.
func (m *demoMode) IsBoolFlag() bool { return true }

// parseFlags reads the command line of a process whose effective user ID is
// euid, and checks it (playground.Options.Check). Usage and parse errors go
// to errOut.
func parseFlags(args []string, euid int, errOut io.Writer) (_ playground.Options, f cmdFlags, _ error) {
	var opts playground.Options
	// Its own flag set: controller-runtime registers a global --kubeconfig
	// meaning the cluster to connect to, not the file to write.
	fs := flag.NewFlagSet("sidecarset-playground", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&opts.KubeConfig, "kubeconfig", "playground.kubeconfig", "where to write the kubeconfig once everything answers (removed on exit)")
	kind := fs.String("node-kind", string(playground.Simulated), "what runs the pods: simulated nodes, or one real node (needs root)")
	fs.IntVar(&opts.Nodes, "nodes", 3, "how many simulated nodes to run (a real node is one)")
	fs.DurationVar(&opts.SimDelay, "sim-delay", 0, "make simulated nodes take time as real ones do: an image pull takes this long, a container start and the reaction to a pod's change half of it (2s makes a rollout slow enough to watch, pause and resume)")
	f.demo = demoOn
	fs.Var(&f.demo, "demo", "run the demo once the environment is up: guided (wait for Enter before each step), auto (run it through), true (guided when standard input is a terminal, else auto) or false")
	fs.BoolVar(&opts.ExitAfterDemo, "exit-after-demo", false, "stop everything once the demo is done; exit 1 if a step failed")
	fs.BoolVar(&f.verbose, "verbose", false, "show the control plane's, the nodes' and the manager's logs")
	if err := fs.Parse(args); err != nil {
		return opts, f, err
	}
	if fs.NArg() > 0 {
		return opts, f, fmt.Errorf("unexpected argument %q: every option is a flag (see --help)", fs.Arg(0))
	}
	opts.Demo = f.demo != demoOff
	opts.NodeKind = playground.NodeKind(*kind)
	nodesSet := false
	fs.Visit(func(f *flag.Flag) { nodesSet = nodesSet || f.Name == "nodes" })
	if opts.NodeKind == playground.Real && !nodesSet {
		opts.Nodes = 1
	}
	if err := opts.Check(euid); err != nil {
		return opts, f, err
	}
	if abs, err := filepath.Abs(opts.KubeConfig); err == nil {
		opts.KubeConfig = abs
	}
	return opts, f, nil
}

// zapLevel keeps the manager quiet unless asked: the demo's output is what
// the user reads.
func zapLevel(verbose bool) zapcore.Level {
	if verbose {
		return zapcore.InfoLevel
	}
	return zapcore.FatalLevel
}
