// Package krew checks plugins/sidecarset.yaml and what `make dist` writes
// with krew v0.4.3's own commands: validate-krew-manifest, which krew-index
// runs on every manifest submitted to it, and `krew install`.
package krew

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repo is the repository's top, from this package's folder.
const repo = "../.."

// platforms are those of a release (internal/dist.Platforms), as krew names
// them in KREW_OS and KREW_ARCH.
var platforms = []struct{ os, arch string }{
	{"linux", "amd64"}, {"linux", "arm64"},
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"windows", "amd64"}, {"windows", "arm64"},
}

// goTool runs `go tool NAME args...` in this module and returns its output.
func goTool(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", name}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// validate runs validate-krew-manifest on manifest, without its install step,
// which needs kubectl with krew on PATH (TestDistInstalls installs with krew
// itself).
func validate(t *testing.T, manifest string) {
	t.Helper()
	if out, err := goTool(t, nil, "validate-krew-manifest", "-skip-install", "-manifest", manifest); err != nil {
		t.Errorf("validate-krew-manifest %s: %v\n%s", manifest, err, out)
	}
}

// TestCheckedInManifest: plugins/sidecarset.yaml passes krew-index's
// validation: apiVersion and kind, the plugin named as its file, a semver
// version, and one platform per os/arch, each with a selector, uri, sha256
// and bin, no two selecting the same os/arch.
func TestCheckedInManifest(t *testing.T) {
	validate(t, filepath.Join(repo, "plugins", "sidecarset.yaml"))
}

// TestDistInstalls: hack/dist, given a stand-in binary per platform, writes
// archives and a manifest that krew validates and installs from on every
// platform of a release: the archive's sha256 matches the manifest's, and
// the binary and the LICENSE land where the manifest's files and bin say. An archive that
// differs from the one the manifest names is refused. The stand-ins keep the
// test short: `make dist` cross-builds the real command six times, minutes
// on a small machine, into the same archives.
func TestDistInstalls(t *testing.T) {
	bins, out := t.TempDir(), t.TempDir()
	for _, p := range platforms {
		name := "kubectl-sidecarset"
		if p.os == "windows" {
			name += ".exe"
		}
		dir := filepath.Join(bins, p.os+"_"+p.arch)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\necho "+p.os+"/"+p.arch+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "run", "./hack/dist", "-version", "v0.1.0", "-binaries", bins, "-out", out)
	cmd.Dir = repo
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/dist: %v\n%s", err, b)
	}
	manifest := filepath.Join(out, "sidecarset.yaml")
	validate(t, manifest)
	checksums, err := os.ReadFile(filepath.Join(out, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(checksums), "\n"); n != len(platforms) {
		t.Errorf("checksums.txt lists %d archives, want %d:\n%s", n, len(platforms), checksums)
	}

	for _, p := range platforms {
		archive := filepath.Join(out, "kubectl-sidecarset_v0.1.0_"+p.os+"_"+p.arch+".tar.gz")
		root := t.TempDir()
		env := []string{"KREW_ROOT=" + root, "KREW_OS=" + p.os, "KREW_ARCH=" + p.arch, "KREW_NO_UPGRADE_CHECK=1"}
		if b, err := goTool(t, env, "krew", "install", "--manifest", manifest, "--archive", archive); err != nil {
			t.Errorf("%s/%s: krew install: %v\n%s", p.os, p.arch, err, b)
			continue
		}
		installed := filepath.Join(root, "store", "sidecarset", "v0.1.0", "kubectl-sidecarset")
		if p.os == "windows" {
			installed += ".exe"
		}
		got, err := os.ReadFile(installed)
		if err != nil {
			t.Errorf("%s/%s: krew installed no binary where the manifest says: %v", p.os, p.arch, err)
		} else if want := "echo " + p.os + "/" + p.arch; !strings.Contains(string(got), want) {
			t.Errorf("%s/%s: krew installed %q, want the binary of that platform", p.os, p.arch, got)
		}
		license, err := os.ReadFile(filepath.Join(root, "store", "sidecarset", "v0.1.0", "LICENSE"))
		if err != nil || !strings.Contains(string(license), "Apache License") {
			t.Errorf("%s/%s: krew installed no LICENSE beside the binary (%v), which krew-index asks for", p.os, p.arch, err)
		}
	}

	// Another platform's archive under linux/amd64's entry: its sha256
	// differs from the manifest's.
	env := []string{"KREW_ROOT=" + t.TempDir(), "KREW_OS=linux", "KREW_ARCH=amd64", "KREW_NO_UPGRADE_CHECK=1"}
	wrong := filepath.Join(out, "kubectl-sidecarset_v0.1.0_linux_arm64.tar.gz")
	b, err := goTool(t, env, "krew", "install", "--manifest", manifest, "--archive", wrong)
	if err == nil {
		t.Errorf("krew installed linux/amd64 from linux/arm64's archive, whose sha256 the manifest does not give:\n%s", b)
	} else if !strings.Contains(b, "checksum") && !strings.Contains(b, "sha256") {
		t.Errorf("krew refused the wrong archive for another reason than its sha256: %v\n%s", err, b)
	}
}
