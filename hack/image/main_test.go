package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// TestSourceRevision builds a repository and checks the revision the image
// is labelled with at each state of its work tree.
func TestSourceRevision(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("init", "-q")
	write(".gitignore", "bin/\n")
	write("main.go", "package main\n")
	run("add", ".")
	run("-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "-q", "-m", "first")
	sha := regexp.MustCompile(`^[0-9a-f]{40}$`)

	clean, err := sourceRevision(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !sha.MatchString(clean) {
		t.Fatalf("clean work tree: revision %q, want the commit's 40 hex digits", clean)
	}
	for _, tc := range []struct {
		name   string
		change func()
		undo   func()
		want   string
	}{
		{"an ignored file (the build's output)", func() {
			if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			write("bin/sidecarset-manager", "binary")
		}, func() {}, clean},
		{"a changed file", func() { write("main.go", "package main\n\nfunc main() {}\n") }, func() { run("checkout", "-q", "main.go") }, clean + "-dirty"},
		{"a staged change", func() { write("main.go", "package main // staged\n"); run("add", "main.go") }, func() { run("reset", "-q", "--hard") }, clean + "-dirty"},
		{"an untracked file", func() { write("new.go", "package main\n") }, func() { _ = os.Remove(filepath.Join(dir, "new.go")) }, clean + "-dirty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.change()
			defer tc.undo()
			got, err := sourceRevision(t.Context(), dir)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("revision %q, want %q", got, tc.want)
			}
		})
	}
}
