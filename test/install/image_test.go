//go:build e2e

package install

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// repoRoot is where `make image` runs.
const repoRoot = "../.."

// managerImage builds the manager's image with `make image` into dir, for
// this machine's platform, and returns the tarball's path: what a user
// imports into containerd (`ctr images import`), named by the chart's
// default image, ghcr.io/sidecarset/sidecarset-manager:<appVersion>.
func managerImage(ctx context.Context, dir string) (string, error) {
	path := filepath.Join(dir, "sidecarset-manager.tar")
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "image", "IMAGE_TAR="+path, "IMAGE_PLATFORMS=linux/"+runtime.GOARCH)
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("make image: %w\n%s", err, out)
	}
	if !strings.Contains(string(out), "archive "+path) {
		return "", fmt.Errorf("make image did not say it wrote %s:\n%s", path, out)
	}
	return path, nil
}
