// Command image builds the sidecarset-manager container image without a
// container engine: it compiles the static binary for each platform and
// assembles the image index with internal/imagebuild, writes it as one
// tarball for `ctr images import`, `kind load image-archive` and `docker
// load`, and pushes it with -push. `make image` runs it from the
// repository's root.
//
// It prints what it built, one "key value" per line:
//
//	reference ghcr.io/sidecarset/sidecarset-manager:v0.1.0
//	digest sha256:...
//	archive bin/image/sidecarset-manager.tar
//	pushed registry.example.com/sidecarset-manager:v0.1.0@sha256:...   (with -push)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sidecarset/sidecarset/internal/imagebuild"
)

const (
	binaryName  = "sidecarset-manager"
	pkg         = "./cmd/sidecarset-manager"
	chartDir    = "charts/sidecarset"
	source      = "https://github.com/sidecarset/sidecarset"
	description = "Injects the sidecars SidecarSets declare into new pods and updates their images in place."
)

func main() {
	platforms := flag.String("platforms", "linux/amd64", "comma-separated platforms, one image each, e.g. linux/amd64,linux/arm64")
	repo := flag.String("repo", imagebuild.DefaultRepository, "repository the image is named by")
	tag := flag.String("tag", "", "tag the image is named by (default: the chart's appVersion)")
	out := flag.String("out", "bin/image/sidecarset-manager.tar", "the tarball to write")
	push := flag.String("push", "", "also push the index to this repository (registry/repo), with the same tag")
	certs := flag.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle copied into the image")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, options{platforms: *platforms, repo: *repo, tag: *tag, out: *out, push: *push, certs: *certs})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

type options struct {
	platforms, repo, tag, out, push, certs string
}

func run(ctx context.Context, o options) error {
	if o.tag == "" {
		def, err := imagebuild.DefaultReference(chartDir)
		if err != nil {
			return err
		}
		o.tag = def.TagStr()
	}
	ref, err := imagebuild.Reference(o.repo, o.tag)
	if err != nil {
		return err
	}
	created, err := sourceDate(ctx)
	if err != nil {
		return err
	}
	revision, err := sourceRevision(ctx, ".")
	if err != nil {
		return err
	}
	spec := imagebuild.Spec{
		Name:    binaryName,
		CACerts: o.certs,
		Created: created,
		Metadata: imagebuild.Metadata{
			Title:       binaryName,
			Description: description,
			Source:      source,
			Version:     o.tag,
			Revision:    revision,
			Licenses:    "Apache-2.0",
		},
	}
	binDir := filepath.Join(filepath.Dir(o.out), "bin")
	for _, s := range strings.Split(o.platforms, ",") {
		p, err := v1.ParsePlatform(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-platforms %q: %w", s, err)
		}
		bin := filepath.Join(binDir, strings.ReplaceAll(p.String(), "/", "_"), binaryName)
		if err := compile(ctx, *p, bin); err != nil {
			return err
		}
		spec.Binaries = append(spec.Binaries, imagebuild.Binary{Platform: *p, Path: bin})
	}
	idx, err := imagebuild.Build(spec)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	if err := imagebuild.WriteArchive(o.out, idx, ref, created); err != nil {
		return err
	}
	fmt.Printf("reference %s\ndigest %s\narchive %s\n", ref, digest, o.out)
	if o.push == "" {
		return nil
	}
	target, err := imagebuild.Reference(o.push, o.tag)
	if err != nil {
		return fmt.Errorf("-push: %w", err)
	}
	pushed, err := imagebuild.Push(ctx, idx, target)
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s@%s\n", target, pushed)
	return nil
}

// compile builds the static manager for p: no cgo, no file system paths,
// no symbol tables, so that the same source and Go give the same binary.
func compile(ctx context.Context, p v1.Platform, bin string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if p.Architecture == "arm" && p.Variant != "" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build %s for %s: %w", pkg, p, err)
	}
	return nil
}

// sourceDate is $SOURCE_DATE_EPOCH, or else the commit time of HEAD: the
// time of every file and of the image itself.
func sourceDate(ctx context.Context) (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		var err error
		if s, err = git(ctx, "log", "-1", "--format=%ct"); err != nil {
			return time.Time{}, err
		}
	}
	secs, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: not seconds since 1970: %w", s, err)
	}
	return time.Unix(secs, 0).UTC(), nil
}

// sourceRevision is the commit checked out in dir, with "-dirty" appended
// when the work tree differs from it (a change, staged or not, or an
// untracked file git does not ignore): the binaries were then built from
// something no commit holds.
func sourceRevision(ctx context.Context, dir string) (string, error) {
	head, err := git(ctx, "-C", dir, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	changes, err := git(ctx, "-C", dir, "status", "--porcelain")
	if err != nil {
		return "", err
	}
	if changes != "" {
		return head + "-dirty", nil
	}
	return head, nil
}

func git(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", args...).Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
