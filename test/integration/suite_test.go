// Package integration tests the whole loop: a real kube-apiserver, etcd and
// kube-controller-manager, the sidecarset manager with its webhooks called
// over TLS by the apiserver, and nodes: simulated ones in `make test`, a
// real kubelet with containerd in `make e2e` (internal/fixture). Every
// assertion is made from the outside: pod specs and statuses, SidecarSet
// status, events.
package integration

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/stack"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

var (
	cluster *fixture.Cluster
	env     *testenv.Env
	sys     *stack.Stack
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	testenv.SetLogger()
	var err error
	cluster, err = fixture.Start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env, sys = cluster.Env, cluster.Stack
	code := m.Run()
	// TestMetrics runs the manager's binary (fixture.Cluster.ManagerProcess).
	if err := testenv.RemoveManagerBinary(); err != nil {
		fmt.Fprintln(os.Stderr, "remove the manager's binary:", err)
		code = 1
	}
	if code != 0 && cluster.Kind == fixture.Real {
		fmt.Fprintf(os.Stderr, "control plane and node logs:\n%s", cluster.Logs())
	}
	if err := cluster.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
		return 1
	}
	return code
}

// testFixture is the shared fixture with this suite's own helpers.
type testFixture struct{ *fixture.F }

func newFixture(t testing.TB) *testFixture {
	t.Helper()
	return &testFixture{fixture.New(t, cluster)}
}

// simulatedOnly skips a test that needs what only simulated nodes do:
// images whose names say how they fail, a registry whose tags a ConfigMap
// re-points.
func simulatedOnly(t testing.TB, why string) {
	t.Helper()
	if cluster.Kind != fixture.Simulated {
		t.Skipf("needs simulated nodes: %s", why)
	}
}
