package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// ShimName is the name kubectl runs to complete `kubectl sidecarset ...`:
// kubectl_complete-<plugin>, found on the PATH. A link of that name to
// this binary completes (Args).
const ShimName = "kubectl_complete-sidecarset"

// Args returns the arguments the root command runs with when the binary
// was started as argv0 with args: as the completion shim, `__complete`
// and args; otherwise args.
func Args(argv0 string, args []string) []string {
	if strings.TrimSuffix(filepath.Base(argv0), ".exe") == ShimName {
		return append([]string{cobra.ShellCompRequestCmd}, args...)
	}
	return args
}

// completionTimeout bounds the read of SidecarSets a completion makes: a
// shell waits for it.
const completionTimeout = 5 * time.Second

// completeNames sets the completion of every verb under cmd whose first
// argument is a SidecarSet's NAME (its Use says so).
func completeNames(cmd *cobra.Command, o *Options) {
	for _, c := range cmd.Commands() {
		completeNames(c, o)
		if name, _, _ := strings.Cut(c.Use, " "); strings.Contains(strings.TrimPrefix(c.Use, name), "NAME") && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = setNames(o)
		}
	}
}

// setNames completes the names of the SidecarSets in the cluster the flags
// point at, each with its pod counts; nothing when the cluster does not
// answer within completionTimeout.
func setNames(o *Options) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := o.Client()
		if err != nil {
			cobra.CompDebugln(err.Error(), false)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		ctx, cancel := context.WithTimeout(ctx, completionTimeout)
		defer cancel()
		var sets v1alpha1.SidecarSetList
		if err := c.List(ctx, &sets); err != nil {
			cobra.CompDebugln(err.Error(), false)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []cobra.Completion
		for _, s := range sets.Items {
			if strings.HasPrefix(s.Name, toComplete) {
				names = append(names, cobra.CompletionWithDesc(s.Name,
					fmt.Sprintf("%d matched, %d updated", s.Status.MatchedPods, s.Status.UpdatedPods)))
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
