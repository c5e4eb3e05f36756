// Command dist builds the release archives of kubectl-sidecarset, one per
// platform, and the krew manifest that installs them (internal/dist): what
// `make dist` runs. Into -out it writes the archives, checksums.txt in
// sha256sum's format, and sidecarset.yaml, the manifest to submit to
// krew-index once the archives are the release's assets. With
// -placeholders FILE it writes only the manifest, with placeholder sums:
// plugins/sidecarset.yaml.
//
// The archives are reproducible: the binary is built with -trimpath and no
// VCS stamp, and every date in an archive is SOURCE_DATE_EPOCH (seconds
// since 1970; the Makefile passes the commit time of HEAD). The same source,
// Go version and epoch give the same sha256.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sidecarset/sidecarset/internal/dist"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(1)
	}
}

func run() error {
	version := flag.String("version", "", "release version, e.g. v0.1.0 (required)")
	out := flag.String("out", "bin/dist", "folder to write the archives, checksums.txt and sidecarset.yaml into")
	platforms := flag.String("platforms", "", "comma-separated os/arch to build (default: all of a release); the manifest gets placeholder sums for the others")
	binaries := flag.String("binaries", "", "take the binaries from DIR/<os>_<arch>/ instead of building them")
	pkg := flag.String("package", "./cmd/kubectl-sidecarset", "package to build")
	placeholders := flag.String("placeholders", "", "only write the manifest, with placeholder sums, to FILE (plugins/sidecarset.yaml)")
	licenseFile := flag.String("license", "LICENSE", "the license file every archive carries")
	flag.Parse()
	if *version == "" || !strings.HasPrefix(*version, "v") {
		return fmt.Errorf("-version=%q: give the release's version, v and semver (v0.1.0)", *version)
	}
	sums := map[dist.Platform]string{}
	for _, p := range dist.Platforms {
		sums[p] = dist.PlaceholderSum
	}
	if *placeholders != "" {
		manifest, err := dist.Manifest(*version, sums)
		if err != nil {
			return err
		}
		return os.WriteFile(*placeholders, manifest, 0o644)
	}
	mtime, err := epoch()
	if err != nil {
		return err
	}
	build := dist.Platforms
	if *platforms != "" {
		build = nil
		for _, s := range strings.Split(*platforms, ",") {
			p, err := dist.ParsePlatform(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("-platforms: %w", err)
			}
			build = append(build, p)
		}
	}
	license, err := os.ReadFile(*licenseFile)
	if err != nil {
		return fmt.Errorf("-license: %w", err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	var checksums strings.Builder
	for _, p := range build {
		began := time.Now()
		bin, err := binary(p, *binaries, *pkg, *version)
		if err != nil {
			return err
		}
		name := dist.ArchiveName(*version, p)
		f, err := os.Create(filepath.Join(*out, name))
		if err != nil {
			return err
		}
		err = dist.WriteArchive(f, p, bin, license, mtime)
		if err = errors.Join(err, f.Close()); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		data, err := os.ReadFile(filepath.Join(*out, name))
		if err != nil {
			return err
		}
		sums[p] = dist.Sum(data)
		fmt.Fprintf(&checksums, "%s  %s\n", sums[p], name)
		fmt.Fprintf(os.Stderr, "%s  %s (%d bytes, %v)\n", sums[p], name, len(data), time.Since(began).Round(time.Millisecond))
	}
	manifest, err := dist.Manifest(*version, sums)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "checksums.txt"), []byte(checksums.String()), 0o644); err != nil {
		return err
	}
	path := filepath.Join(*out, dist.Plugin+".yaml")
	if err := os.WriteFile(path, manifest, 0o644); err != nil {
		return err
	}
	if len(build) < len(dist.Platforms) {
		fmt.Fprintf(os.Stderr, "%s: placeholder sums for the platforms not built\n", path)
	}
	fmt.Fprintln(os.Stderr, "wrote", path)
	return nil
}

// epoch returns SOURCE_DATE_EPOCH as a time, 1970 when it is not set.
func epoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970: %w", s, err)
	}
	return time.Unix(sec, 0), nil
}

// binary returns the command for p: read from DIR/<os>_<arch>/ when from is
// given, else built from pkg with the Go toolchain on PATH, saying version
// (kubectl sidecarset version).
func binary(p dist.Platform, from, pkg, version string) ([]byte, error) {
	if from != "" {
		return os.ReadFile(filepath.Join(from, p.OS+"_"+p.Arch, p.BinaryName()))
	}
	dir, err := os.MkdirTemp("", "sidecarset-dist-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, p.BinaryName())
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags=-s -w -X github.com/sidecarset/sidecarset/internal/cli.Version="+version, "-o", path, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build %s for %s: %w\n%s", pkg, p, err, out)
	}
	return os.ReadFile(path)
}
