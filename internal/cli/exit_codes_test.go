package cli_test

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/cli"
)

// fastBackoff retries quickly, for tests.
func fastBackoff(o *cli.Options) {
	o.Backoff = wait.Backoff{Duration: 20 * time.Millisecond, Factor: 2, Steps: 6}
}

// flaky answers the first requests whose path contains match with the
// failures, one each, in order; then it passes every request through.
type flaky struct {
	next  http.RoundTripper
	match string

	mu       sync.Mutex
	failures []int // an HTTP status, or 0 for a refused connection
	failed   int
}

func (f *flaky) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	var code int
	fail := strings.Contains(req.URL.Path, f.match) && len(f.failures) > 0
	if fail {
		code, f.failures = f.failures[0], f.failures[1:]
		f.failed++
	}
	f.mu.Unlock()
	if !fail {
		return f.next.RoundTrip(req)
	}
	if code == 0 {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	return &http.Response{StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/plain"}}, Body: io.NopCloser(strings.NewReader("injected failure")), Request: req}, nil
}

// withFlaky makes the command's requests to paths containing match fail
// transiently first: throttled, unavailable, a conflict, a bad gateway and
// a refused connection.
func withFlaky(match string) (*flaky, func(*cli.Options)) {
	f := &flaky{match: match, failures: []int{http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusConflict, http.StatusBadGateway, 0}}
	return f, func(o *cli.Options) {
		fastBackoff(o)
		o.ConfigFlags.WrapConfigFn = func(c *rest.Config) *rest.Config {
			c.Wrap(func(rt http.RoundTripper) http.RoundTripper { f.next = rt; return f })
			return c
		}
	}
}

// TestWaitingVerbsRetry: status -w, rollout run and restart-unmanaged ride
// out transient API errors with back-off instead of failing.
func TestWaitingVerbsRetry(t *testing.T) {
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.CreatePods(2, nil, nil)
	f.complete(2)
	for _, args := range [][]string{
		{"status", f.Set, "-w"},
		{"rollout", "run", f.Set, "--steps", "0"},
		{"restart-unmanaged", f.Set},
	} {
		t.Run(args[0], func(t *testing.T) {
			fl, configure := withFlaky("/sidecarsets/" + f.Set)
			r := executeWith(t, false, "", configure, args...)
			if r.err != nil {
				t.Fatalf("transient errors were fatal: %v", r.err)
			}
			if fl.failed != 5 {
				t.Errorf("%d requests failed, want 5", fl.failed)
			}
			if n := strings.Count(r.errOut, "; retrying"); n != 5 {
				t.Errorf("%d retries reported on stderr, want 5:\n%s", n, r.errOut)
			}
		})
	}
}

// TestExitCodes: each exit code, from the verbs that give it.
func TestExitCodes(t *testing.T) {
	f := newFixture(t)
	// A readiness probe, which a never-ready image never passes on either
	// node kind.
	f.CreateSet(f.SidecarSet("exporter:v1", 1))
	f.CreatePods(2, nil, nil)
	f.complete(2)

	code := func(t *testing.T, want int, r result, msg string) {
		t.Helper()
		if got := cli.ExitCode(r.err); got != want || (msg != "" && (r.err == nil || !strings.Contains(r.err.Error(), msg))) {
			t.Errorf("exit %d (%v), want %d with %q", got, r.err, want, msg)
		}
	}
	t.Run("0 complete", func(t *testing.T) {
		code(t, 0, kubectl(t, false, "status", f.Set, "-w"), "")
	})
	t.Run("1 no such set", func(t *testing.T) {
		code(t, 1, kubectl(t, false, "status", f.Set+"-typo", "-w"), "SidecarSet "+f.Set+"-typo not found")
	})
	t.Run("2 usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"status", "--no-such-flag"},
			{"no-such-verb"},
			{"rollout", "no-such-verb"},
			{"rollout", "run"},
			{"rollout", "run", f.Set, "--steps", "120%"},
			{"restart-unmanaged", f.Set, "--timeout", "0s"},
			{"status", f.Set, "--timeout", "1s"},
		} {
			code(t, 2, kubectl(t, false, args...), "")
		}
	})
	t.Run("4 timeout", func(t *testing.T) {
		f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter-never-ready:v2" })
		code(t, 4, kubectl(t, false, "status", f.Set, "-w", "--timeout", "2s"), "not complete within --timeout 2s")
		code(t, 4, kubectl(t, false, "rollout", "run", f.Set, "--steps", "0", "--wait-ready", "2s"), "not done within 2s (--wait-ready)")
	})
	t.Run("3 paused", func(t *testing.T) {
		ok(t, "rollout", "pause", f.Set)
		code(t, 3, kubectl(t, false, "status", f.Set, "-w"), "spec.updateStrategy.paused is true")
		code(t, 3, kubectl(t, false, "rollout", "run", f.Set, "--steps", "0"), "spec.updateStrategy.paused is true")
		ok(t, "rollout", "resume", f.Set)
		f.UpdateSet(func(s *v1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.Type = v1alpha1.NotUpdateStrategy
			s.Spec.Containers[0].Image = "exporter:v1"
		})
		code(t, 3, kubectl(t, false, "status", f.Set, "-w"), "spec.updateStrategy.type is NotUpdate")
	})
	t.Run("5 unreachable", func(t *testing.T) {
		// A port nothing listens on.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		cfg := regexp.MustCompile(`server: \S+`).ReplaceAllString(string(env.KubeConfig), "server: https://"+addr)
		closed := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(closed, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		// With --timeout too: a cluster down from the start is unreachable,
		// not a rollout that ran out of time.
		for _, args := range [][]string{{"status"}, {"status", f.Set, "-w"}, {"status", f.Set, "-w", "--timeout", "10m"}, {"restart-unmanaged", f.Set}} {
			r := executeWith(t, false, "", fastBackoff, append(args, "--kubeconfig", closed)...)
			code(t, 5, r, "connection refused")
		}
		r := kubectl(t, false, "status", "--kubeconfig", filepath.Join(t.TempDir(), "missing"))
		code(t, 5, r, "load the kubeconfig")
	})
}

// TestKubeconfigFromEnv: a $KUBECONFIG that names no file that exists is
// reported as clearly as a missing --kubeconfig, rather than as a refused
// connection to localhost:8080, which client-go falls back to. A list that
// names one file that exists works, as with kubectl.
func TestKubeconfigFromEnv(t *testing.T) {
	run := func(t *testing.T, env string) result {
		t.Helper()
		t.Setenv("KUBECONFIG", env)
		var out, errOut bytes.Buffer
		cmd := cli.NewCmdRoot(cli.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}))
		cmd.SetArgs([]string{"status"})
		err := cmd.ExecuteContext(t.Context())
		return result{out: out.String(), errOut: errOut.String(), err: err}
	}
	dir := t.TempDir()
	missing, other := filepath.Join(dir, "missing"), filepath.Join(dir, "other")
	list := strings.Join([]string{missing, other}, string(filepath.ListSeparator))
	for _, tc := range []struct{ env, want string }{
		{missing, "cluster unreachable: load the kubeconfig: $KUBECONFIG names " + missing + ", which does not exist"},
		{list, "cluster unreachable: load the kubeconfig: $KUBECONFIG names " + missing + ", " + other + ", none of which exists"},
	} {
		r := run(t, tc.env)
		if got := cli.ExitCode(r.err); got != 5 || r.err == nil || r.err.Error() != tc.want {
			t.Errorf("KUBECONFIG=%s: exit %d, error %v; want exit 5 and %q", tc.env, got, r.err, tc.want)
		}
	}
	if r := run(t, strings.Join([]string{missing, kubeconfig}, string(filepath.ListSeparator))); r.err != nil {
		t.Errorf("KUBECONFIG naming a missing file and the test cluster's: %v", r.err)
	}
}

// TestExitCodesDocumented: the README lists the same codes as the root's
// --help.
func TestExitCodesDocumented(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	codes := helpExitCodes(t, kubectl(t, false, "--help").out)
	if len(codes) != 6 {
		t.Fatalf("the root's --help lists %d exit codes, want all 6: %v", len(codes), codes)
	}
	for code, meaning := range codes {
		if !strings.Contains(string(readme), "| "+code+" | "+meaning+" |") {
			t.Errorf("README lacks the row | %s | %s |", code, meaning)
		}
	}
}

// TestExitCodesPerVerb: each verb's --help lists the exit codes it can
// return, and no other: inject and convert steer no rollout, convert
// reaches no cluster. Every verb is listed here, so a new one needs its
// codes.
func TestExitCodesPerVerb(t *testing.T) {
	want := map[string]string{
		"status":            "012345",
		"pods":              "0125",
		"rollout":           "012345", // its verbs' together
		"rollout promote":   "0125",
		"rollout pause":     "0125",
		"rollout resume":    "0125",
		"rollout undo":      "0125",
		"rollout run":       "012345",
		"rollout history":   "0125",
		"preflight":         "0125",
		"inject":            "0125",
		"convert":           "012",
		"restart":           "012345",
		"restart-unmanaged": "012345",
		"version":           "0125",
	}
	var verbs []string
	var walk func(c *cobra.Command, path string)
	walk = func(c *cobra.Command, path string) {
		for _, sub := range c.Commands() {
			verbs = append(verbs, strings.TrimSpace(path+" "+sub.Name()))
			walk(sub, path+" "+sub.Name())
		}
	}
	walk(cli.NewCmdRoot(cli.NewOptions(genericiooptions.NewTestIOStreamsDiscard())), "")
	for _, verb := range verbs {
		codes := helpExitCodes(t, kubectl(t, false, append(strings.Fields(verb), "--help")...).out)
		got := slices.Sorted(maps.Keys(codes))
		if w, ok := want[verb]; !ok || strings.Join(got, "") != w {
			t.Errorf("%s --help lists exit codes %v, want %s", verb, got, w)
		}
	}
	// The promise the issue found in inject's help.
	if codes := helpExitCodes(t, kubectl(t, false, "inject", "--help").out); strings.Contains(codes["0"], "rollout") {
		t.Errorf("inject --help says of exit 0: %s", codes["0"])
	}
}

// helpExitCodes reads the exit codes a --help lists: code to meaning.
func helpExitCodes(t *testing.T, help string) map[string]string {
	t.Helper()
	i := strings.Index(help, "Exit codes")
	if i < 0 {
		t.Fatalf("no exit codes in:\n%s", help)
	}
	codes := map[string]string{}
	for _, line := range lines(help[i:])[1:] {
		if !regexp.MustCompile(`^\d  `).MatchString(line) {
			break
		}
		code, meaning, _ := strings.Cut(line, "  ")
		codes[code] = meaning
	}
	return codes
}
