// Package cli implements kubectl-sidecarset, also run as `kubectl sidecarset`:
// one file per verb. Each verb's NewCmdX parses flags with cobra and calls an
// exported function that takes a client and an io.Writer, so tests run the
// verbs against a real apiserver and read what they printed.
//
// The verbs decide nothing the manager decides differently: per-pod states
// come from rollout.Classify, matching from inject.Matches, injection from
// inject.Inject, defaults and validation from internal/validation.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sidecarscheme "github.com/sidecarset/sidecarset/internal/scheme"
)

// DefaultManagerNamespace is where the manager runs and keeps revisions
// unless told otherwise.
const DefaultManagerNamespace = "sidecarset-system"

// Options is what every verb shares: how to reach the cluster, where to
// write, and how to wait.
type Options struct {
	// ConfigFlags are kubectl's --kubeconfig, --context, -n and friends.
	ConfigFlags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams

	// ManagerNamespace is the manager's namespace: where revisions are kept,
	// and never injected.
	ManagerNamespace string
	// IsTerminal reports whether w is a terminal, which status -w draws a
	// progress bar on. Tests replace it to draw the bar into a buffer.
	IsTerminal func(w io.Writer) bool
	// PollInterval is how often the waiting verbs read the cluster.
	PollInterval time.Duration
	// Backoff is how the waiting verbs retry a call that failed
	// transiently (see transient).
	Backoff wait.Backoff
}

// NewOptions returns the options of a real run on streams.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{
		ConfigFlags:      genericclioptions.NewConfigFlags(true),
		IOStreams:        streams,
		ManagerNamespace: DefaultManagerNamespace,
		IsTerminal:       isTerminal,
		PollInterval:     time.Second,
		Backoff:          DefaultBackoff,
	}
}

// isTerminal holds for an *os.File on a terminal; anything else (a pipe, a
// file, a buffer) gets plain lines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Client returns a client for the cluster the kubeconfig flags point at.
func (o *Options) Client() (client.Client, error) {
	if err := o.missingKubeconfig(); err != nil {
		return nil, fmt.Errorf("%w: load the kubeconfig: %w", ErrUnreachable, err)
	}
	cfg, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: load the kubeconfig (see --kubeconfig, --context): %w", ErrUnreachable, err)
	}
	cfg.UserAgent = "kubectl-sidecarset"
	cfg.WarningHandlerWithContext = warningHandler{out: o.ErrOut}
	// client-go's default of 5 requests a second makes the waiting verbs
	// and restart-unmanaged's listings crawl.
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	c, err := client.New(cfg, client.Options{Scheme: sidecarscheme.New()})
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	return c, nil
}

// missingKubeconfig refuses to go on when no kubeconfig file was given and
// none of the files looked for exists: those of $KUBECONFIG, else
// ~/.kube/config. client-go skips such files silently and, with none
// left, talks to http://localhost:8080, so the user would read a refused
// connection to a server they never named, where a missing --kubeconfig
// FILE is reported as missing. --server needs no file, and inside a pod
// client-go rightly falls back to the pod's service account.
func (o *Options) missingKubeconfig() error {
	f := o.ConfigFlags
	if (f.KubeConfig != nil && *f.KubeConfig != "") || (f.APIServer != nil && *f.APIServer != "") ||
		(os.Getenv("KUBERNETES_SERVICE_HOST") != "" && os.Getenv("KUBERNETES_SERVICE_PORT") != "") {
		return nil
	}
	env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	paths := []string{clientcmd.RecommendedHomeFile}
	if env != "" {
		paths = filepath.SplitList(env)
	}
	for _, p := range paths {
		if _, err := os.Stat(p); p != "" && !os.IsNotExist(err) {
			// Exists, or cannot be read: client-go says why.
			return nil
		}
	}
	switch {
	case env == "":
		return fmt.Errorf("$%s is not set and %s does not exist; give --kubeconfig FILE",
			clientcmd.RecommendedConfigPathEnvVar, clientcmd.RecommendedHomeFile)
	case len(paths) == 1:
		return fmt.Errorf("$%s names %s, which does not exist", clientcmd.RecommendedConfigPathEnvVar, env)
	}
	return fmt.Errorf("$%s names %s, none of which exists", clientcmd.RecommendedConfigPathEnvVar, strings.Join(paths, ", "))
}

// warningHandler prints the apiserver's warnings (admission warnings among
// them) as kubectl does, unless the call's context collects them
// (withWarnings).
type warningHandler struct{ out io.Writer }

type warningsKey struct{}

// withWarnings returns a context whose calls collect their warnings into
// the returned slice rather than printing them.
func withWarnings(ctx context.Context) (context.Context, *[]string) {
	w := &[]string{}
	return context.WithValue(ctx, warningsKey{}, w), w
}

func (h warningHandler) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, text string) {
	// 299 is the only code warnings are sent with.
	if code != 299 || text == "" {
		return
	}
	if w, ok := ctx.Value(warningsKey{}).(*[]string); ok {
		*w = append(*w, text)
		return
	}
	fmt.Fprintf(h.out, "Warning: %s\n", text)
}

// RetryingClient is Client for the waiting verbs (status -w, rollout run,
// restart-unmanaged): a call that fails transiently is retried with
// o.Backoff, saying so on standard error, rather than ending a wait that
// may have run for minutes.
func (o *Options) RetryingClient() (client.Client, error) {
	c, err := o.Client()
	if err != nil {
		return nil, err
	}
	return &retryingClient{Client: c, backoff: o.Backoff, warn: o.ErrOut}, nil
}

// Namespace returns the namespace given with -n, or "" when none was: the
// verbs that take one decide what no -n means (all namespaces, "default"),
// rather than falling back to the kubeconfig context's namespace.
func (o *Options) Namespace() string {
	if o.ConfigFlags.Namespace == nil {
		return ""
	}
	return *o.ConfigFlags.Namespace
}
