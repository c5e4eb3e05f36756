package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sidecarset/sidecarset/internal/cli"
)

// TestCompletion: the verbs that take a SidecarSet's NAME complete the
// names in the cluster, with their counts, and only as their first
// argument; the others complete none.
func TestCompletion(t *testing.T) {
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	prefix := f.Set[:len(f.Set)-1]
	for _, verb := range [][]string{
		{"status"}, {"pods"}, {"restart"}, {"restart-unmanaged"},
		{"rollout", "promote"}, {"rollout", "pause"}, {"rollout", "resume"}, {"rollout", "undo"}, {"rollout", "run"},
	} {
		r := ok(t, append(append([]string{"__complete"}, verb...), prefix)...)
		if got := completions(r.out); !slices.Equal(got, []string{f.Set + "\t0 matched, 0 updated"}) {
			t.Errorf("%v %q: completes %q, want only %s with its counts", verb, prefix, got, f.Set)
		}
		mustContain(t, r.out, ":4\n")
	}
	for _, args := range [][]string{
		{"__complete", "pods", f.Set, ""},
		{"__complete", "inject", ""},
		{"__complete", "rollout", "pause", "no-such-"},
	} {
		if got := completions(ok(t, args...).out); len(got) != 0 {
			t.Errorf("%v: completes %q, want nothing", args, got)
		}
	}
	mustContain(t, ok(t, "completion", "bash").out, "__start_kubectl-sidecarset")
}

// completions returns the choices `__complete` printed, without its last
// line (the directive).
func completions(out string) []string {
	ls := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	return ls[:len(ls)-1]
}

// TestArgs: started under the shim's name, with or without a folder or
// .exe, the binary completes; under any other name it runs as asked.
func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		argv0 string
		want  []string
	}{
		{"kubectl_complete-sidecarset", []string{"__complete", "rollout", ""}},
		{"/home/me/.krew/bin/kubectl_complete-sidecarset", []string{"__complete", "rollout", ""}},
		{"kubectl_complete-sidecarset.exe", []string{"__complete", "rollout", ""}},
		{"/usr/local/bin/kubectl-sidecarset", []string{"rollout", ""}},
		{"kubectl_complete-other", []string{"rollout", ""}},
	} {
		if got := cli.Args(tc.argv0, []string{"rollout", ""}); !slices.Equal(got, tc.want) {
			t.Errorf("Args(%q): %q, want %q", tc.argv0, got, tc.want)
		}
	}
}

// TestCompletionThroughKubectl: kubectl completes `kubectl sidecarset
// rollout pause <TAB>` through a link named kubectl_complete-sidecarset to
// the built binary, both on the PATH, as the root command's help says.
func TestCompletionThroughKubectl(t *testing.T) {
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "kubectl-sidecarset"), "../../cmd/kubectl-sidecarset")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.Symlink("kubectl-sidecarset", filepath.Join(bin, cli.ShimName)); err != nil {
		t.Fatal(err)
	}
	kubectl := exec.Command(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"), "__complete", "sidecarset", "rollout", "pause", "")
	kubectl.Env = append(os.Environ(), "PATH="+bin, "KUBECONFIG="+kubeconfig)
	out, err := kubectl.Output()
	if err != nil {
		t.Fatalf("kubectl __complete: %v\n%s", err, out)
	}
	if !slices.Contains(completions(string(out)), f.Set+"\t0 matched, 0 updated") {
		t.Errorf("kubectl completes %q, want %s among them", out, f.Set)
	}
}
