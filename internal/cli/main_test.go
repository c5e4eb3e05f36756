package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/cli"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/stack"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

// The suite runs every verb against one real kube-apiserver, etcd and
// kube-controller-manager and the sidecarset manager serving its webhooks,
// on the nodes internal/fixture starts: simulated ones by default, a real
// node with SIDECARSET_NODES=real.
var (
	cluster    *fixture.Cluster
	env        *testenv.Env
	sys        *stack.Stack
	kubeconfig string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	testenv.SetLogger()
	var err error
	cluster, err = fixture.Start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop:", err)
		}
	}()
	env, sys = cluster.Env, cluster.Stack
	dir, err := os.MkdirTemp("", "kubectl-sidecarset-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return cluster.Report(os.Stderr, m.Run())
}

// result is what one run of the command printed and returned.
type result struct {
	out, errOut string
	err         error
}

// kubectl runs `kubectl sidecarset ARGS` against the test cluster through
// the real root command and flags, with a fast poll. terminal says whether
// stdout counts as a terminal.
func kubectl(t *testing.T, terminal bool, args ...string) result {
	t.Helper()
	return execute(t, terminal, "", args...)
}

// execute runs the command with stdin.
func execute(t *testing.T, terminal bool, stdin string, args ...string) result {
	t.Helper()
	return executeWith(t, terminal, stdin, nil, args...)
}

// executeWith runs the command with stdin and the options as configure
// changes them.
func executeWith(t *testing.T, terminal bool, stdin string, configure func(*cli.Options), args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	o := cli.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	o.IsTerminal = func(io.Writer) bool { return terminal }
	o.PollInterval = 100 * time.Millisecond
	if configure != nil {
		configure(o)
	}
	cmd := cli.NewCmdRoot(o)
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	err := cmd.ExecuteContext(t.Context())
	r := result{out: out.String(), errOut: errOut.String(), err: err}
	t.Logf("kubectl sidecarset %s\n--- stdout:\n%s--- stderr:\n%s--- error: %v", strings.Join(args, " "), r.out, r.errOut, err)
	return r
}

// ok runs the command and fails the test if it returns an error.
func ok(t *testing.T, args ...string) result {
	t.Helper()
	r := kubectl(t, false, args...)
	if r.err != nil {
		t.Fatalf("kubectl sidecarset %s: %v", strings.Join(args, " "), r.err)
	}
	return r
}

// testFixture is the shared fixture with this suite's own helpers.
type testFixture struct{ *fixture.F }

func newFixture(t *testing.T) *testFixture {
	t.Helper()
	return &testFixture{fixture.New(t, cluster)}
}

// complete waits until the set's current spec is Complete with want pods
// updated and ready. The commands under test change the set outside the
// fixture, so its current generation counts as the test's last write.
func (f *testFixture) complete(want int32) v1alpha1.SidecarSetStatus {
	f.T.Helper()
	f.SyncGen()
	return f.WaitComplete(want)
}

func partition(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}

// lines splits output into trimmed, non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// row finds the table line that starts with first and splits it into
// cells.
func row(t *testing.T, out, first string) []string {
	t.Helper()
	for _, l := range lines(out) {
		if f := strings.Fields(l); len(f) > 0 && f[0] == first {
			return f
		}
	}
	t.Fatalf("no line starting with %q in:\n%s", first, out)
	return nil
}

func mustContain(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("output lacks %q:\n%s", sub, s)
		}
	}
}
