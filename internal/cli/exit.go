package cli

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// Errors the exit code is read from: a verb's error wraps one of them, and
// ExitCode maps it to its code. An error wrapping none exits 1.
var (
	// ErrUsage: the command line is wrong (unknown verb or flag, a missing
	// or extra argument, a flag value out of range).
	ErrUsage = errors.New("usage")
	// ErrPaused: the rollout will not move until someone acts:
	// updateStrategy.paused (not by a stall), type NotUpdate, or
	// injectionStrategy.paused for restart.
	ErrPaused = errors.New("paused")
	// ErrTimeout: a wait ran out of time (--timeout, --wait-ready) while
	// nothing had failed.
	ErrTimeout = errors.New("timed out")
	// ErrUnreachable: the cluster could not be reached (kubeconfig,
	// connection, TLS), after retrying transient failures.
	ErrUnreachable = errors.New("cluster unreachable")
)

// exitCode is one row of the exit code table.
type exitCode struct {
	code int
	// err is the error an exit with this code wraps; nil for 0 and 1.
	err     error
	meaning string
}

// exitCodes is the one table of exit codes: ExitCode reads it, the root's
// --help prints it, each verb's --help the rows it can return (exits),
// and the README copies it (a test checks).
// ExitCode tries the rows in order, so an error wrapping two of them (a
// timeout while the cluster was unreachable) gets the earlier one.
var exitCodes = []exitCode{
	{0, nil, "done: the rollout is complete, the checks passed, the workloads restarted"},
	{1, nil, "failed: an anomaly (rollout run), a stalled rollout, a refusal, or any other error"},
	{2, ErrUsage, "usage: unknown verb or flag, wrong arguments, a flag value out of range"},
	{5, ErrUnreachable, "unreachable: no kubeconfig, or the apiserver did not answer even after retries"},
	{3, ErrPaused, "paused: updateStrategy.paused or type NotUpdate (for restart also injectionStrategy.paused): nothing moves until someone acts"},
	{4, ErrTimeout, "timeout: --timeout or --wait-ready ran out while the work was still going (restart: a workload patched but not finished)"},
}

// ExitCode is the process exit code for a verb's error; see exitCodes.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	for _, c := range exitCodes {
		if c.err != nil && errors.Is(err, c.err) {
			return c.code
		}
	}
	if unreachable(err) {
		return 5
	}
	return 1
}

// exitCodesHelp spells the whole table, for the help of the root and of
// verbs that only group others (rollout).
func exitCodesHelp() string {
	return spellExitCodes("Exit codes (each verb's --help lists those it returns):", exitCodes)
}

// spellExitCodes spells rows under head, by code, as a reader looks them up.
func spellExitCodes(head string, rows []exitCode) string {
	var b strings.Builder
	b.WriteString(head + "\n")
	for _, r := range slices.SortedFunc(slices.Values(rows), func(a, b exitCode) int { return a.code - b.code }) {
		fmt.Fprintf(&b, "  %d  %s\n", r.code, r.meaning)
	}
	return strings.TrimRight(b.String(), "\n")
}

// annotationExitCodes holds, on a verb, the exit codes its --help lists.
const annotationExitCodes = "sidecarset.dev/exit-codes"

// exits records the exit codes cmd can return, each with what it means
// for cmd, for its --help: only those, so that a verb never promises what
// it cannot do (convert reaches no cluster; inject completes no rollout).
// Usage (2) is added, as every verb can return it; a meaning left empty
// reads as in the table.
func exits(cmd *cobra.Command, codes map[int]string) *cobra.Command {
	// A verb has no verbs of its own to get wrong.
	rows := []exitCode{{code: 2, meaning: "usage: an unknown flag, wrong arguments, a flag value out of range"}}
	for code, meaning := range codes {
		if meaning == "" {
			meaning = general(code)
		}
		if code != 2 {
			rows = append(rows, exitCode{code: code, meaning: meaning})
		}
	}
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotationExitCodes] = spellExitCodes("Exit codes:", rows)
	return cmd
}

// general is code's meaning in the table.
func general(code int) string {
	for _, c := range exitCodes {
		if c.code == code {
			return c.meaning
		}
	}
	panic(fmt.Sprintf("exit code %d is not in the table", code))
}

// unreachable reports whether err says the apiserver could not be reached
// at all: no connection, or no TLS session with it.
func unreachable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	return errors.As(err, &opErr) || errors.As(err, &dnsErr) || errors.As(err, &unknownAuthority) || errors.As(err, &hostname)
}

// usageErrorf is an error about the command line.
func usageErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

// usageError marks err as being about the command line; nil stays nil.
func usageError(err error) error {
	if err == nil || errors.Is(err, ErrUsage) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUsage, err)
}

// withUsageErrors makes every error cobra reports about the command line
// (flags, arguments, unknown verbs) wrap ErrUsage, and prints the exit
// codes in the help of every verb, for cmd and its subcommands: those the
// verb gave exits, else (the root, rollout) the whole table.
func withUsageErrors(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	if cmd.HasSubCommands() {
		// A parent verb run with an unknown verb would otherwise print its
		// help and exit 0.
		cmd.Args = func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown verb %q for %q; see %s --help", args[0], c.CommandPath(), c.CommandPath())
			}
			return nil
		}
		cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	} else if args := cmd.Args; args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error { return usageError(args(c, a)) }
	}
	codes, ok := cmd.Annotations[annotationExitCodes]
	if !ok {
		codes = exitCodesHelp()
	}
	cmd.Long = strings.TrimRight(cmd.Long, "\n") + "\n\n" + codes
	for _, sub := range cmd.Commands() {
		withUsageErrors(sub)
	}
}
