// Command kubectl-sidecarset inspects and steers SidecarSets; on the PATH it
// is also the kubectl plugin `kubectl sidecarset`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/sidecarset/sidecarset/internal/cli"
)

func main() {
	// The exit code tells scripts what happened (cli.ExitCode; listed in
	// every verb's --help). Ctrl-C cancels the context, so waiting verbs stop and clean up
	// (preflight deletes its probe SidecarSet).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := cli.NewOptions(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	root := cli.NewCmdRoot(o)
	// Started as kubectl_complete-sidecarset, it completes for kubectl.
	root.SetArgs(cli.Args(os.Args[0], os.Args[1:]))
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		stop()
		os.Exit(cli.ExitCode(err))
	}
}
