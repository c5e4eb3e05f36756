// Command gendocs writes the reference under docs/reference from the
// sources it documents: one page per kubectl-sidecarset command, from the
// cobra commands (their --help), and the SidecarSet API, from the CRD's
// schema (the Go types' comments). `make manifests` runs it;
// hack/verify-generated.sh fails when the pages differ from what it writes.
//
//	go run ./hack/gendocs docs/reference
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra/doc"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/sidecarset/sidecarset/internal/cli"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gendocs DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	cliDir := filepath.Join(dir, "cli")
	if err := os.MkdirAll(cliDir, 0o755); err != nil {
		return err
	}
	// Flag defaults under the home directory read as ~, whoever runs it.
	if err := os.Setenv("HOME", "~"); err != nil {
		return err
	}
	root := cli.NewCmdRoot(cli.NewOptions(genericiooptions.NewTestIOStreamsDiscard()))
	// No date: the pages change only when the commands do.
	root.DisableAutoGenTag = true
	// Cobra adds its completion command when the root runs; so here.
	root.InitDefaultCompletionCmd()
	if err := doc.GenMarkdownTree(root, cliDir); err != nil {
		return fmt.Errorf("CLI reference: %w", err)
	}
	crd, err := os.ReadFile(filepath.Join("config", "crd", "sidecarset.dev_sidecarsets.yaml"))
	if err != nil {
		return err
	}
	page, err := apiReference(crd)
	if err != nil {
		return fmt.Errorf("API reference: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "api.md"), page, 0o644)
}
