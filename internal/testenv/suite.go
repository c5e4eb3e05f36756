package testenv

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// RunSuite is the TestMain of a test package whose tests share one
// control plane and may run the manager's binary: it sets the logger,
// starts the control plane with start into *shared, runs the tests, hands
// their exit code to after (when not nil) for what the package does once
// they are done, removes the manager's binary (ManagerBinary) and stops
// the control plane. It returns the code to exit with: not 0 if the
// control plane did not start, a test failed, or after or the cleanup
// failed.
func RunSuite[C interface{ Stop() error }](m *testing.M, shared *C, start func(context.Context) (C, error), after func(code int) int) int {
	SetLogger()
	c, err := start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*shared = c
	code := m.Run()
	if after != nil {
		code = after(code)
	}
	if err := RemoveManagerBinary(); err != nil {
		fmt.Fprintln(os.Stderr, "remove the manager's binary:", err)
		code = 1
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
		return 1
	}
	return code
}
