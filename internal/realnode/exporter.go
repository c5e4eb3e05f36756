package realnode

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// exporterPackage is the main package of the exporter that images with
// Exporter set run.
const exporterPackage = "github.com/sidecarset/sidecarset/test/images/exporter"

// buildExporter builds the exporter from this module's source into bin:
// static (no cgo), for the images' platform, without paths or VCS stamps,
// so that the same source gives the same binary and the same image digests.
// The Go build cache makes every build after the first quick.
func buildExporter(ctx context.Context, bin string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("build the exporter (an image has Exporter set): the go command is needed: %w", err)
	}
	dir, err := moduleDir(ctx, goBin)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", bin, exporterPackage)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the exporter in %s: go build %s: %w: %s", dir, exporterPackage, err, out)
	}
	return checkStatic(bin)
}

// moduleDir finds a folder from which the go command resolves the
// exporter's package: the one this file was compiled from (go test builds
// without -trimpath), else the working folder.
func moduleDir(ctx context.Context, goBin string) (string, error) {
	var candidates []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		candidates = append(candidates, filepath.Dir(file))
	}
	if wd, err := os.Getwd(); err == nil {
		candidates = append(candidates, wd)
	}
	var errs []error
	for _, dir := range candidates {
		cmd := exec.CommandContext(ctx, goBin, "list", "-f", "{{.Dir}}", exporterPackage)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err == nil {
			return dir, nil
		}
		errs = append(errs, fmt.Errorf("from %s: %w: %s", dir, err, strings.TrimSpace(string(out))))
	}
	return "", fmt.Errorf("find the source of %s (run from within module github.com/sidecarset/sidecarset): %w", exporterPackage, errors.Join(errs...))
}

// checkStatic fails unless bin is an ELF executable without an interpreter:
// the images hold no dynamic loader or C library.
func checkStatic(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("the exporter %s is not an ELF executable: %w", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("the exporter %s is linked dynamically: the images have no dynamic loader", bin)
		}
	}
	return nil
}
