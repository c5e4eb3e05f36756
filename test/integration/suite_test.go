// Package integration tests the whole loop: a real kube-apiserver, etcd and
// kube-controller-manager, the sidecarset manager with its webhooks called
// over TLS by the apiserver, and nodes: simulated ones in `make test`, a
// real kubelet with containerd in `make e2e` (internal/fixture). Every
// assertion is made from the outside: pod specs and statuses, SidecarSet
// status, events.
package integration

import (
	"context"
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
	os.Exit(testenv.RunSuite(m, &cluster, func(ctx context.Context) (*fixture.Cluster, error) {
		c, err := fixture.Start(ctx)
		if err == nil {
			env, sys = c.Env, c.Stack
		}
		return c, err
	}, func(code int) int { return cluster.Report(os.Stderr, code) }))
}

// testFixture is the shared fixture with this suite's own helpers.
type testFixture struct{ *fixture.F }

func newFixture(t testing.TB) *testFixture {
	t.Helper()
	return &testFixture{fixture.New(t, cluster)}
}

// deadline returns progressDeadlineSeconds for a rollout that must not
// stall: short on simulated nodes, 20 s on a real node, where a container
// restart and readiness take seconds, more on a busy machine.
func deadline(short int32) *int32 {
	if cluster.Kind != fixture.Simulated {
		return new(max(short, 20))
	}
	return new(short)
}

// admissionOnly skips, on a real node and on simulated nodes that take
// time (fixture.SimDelayEnv), a test of what the apiserver stores at
// admission alone: no node acts on it, and the run on simulated nodes
// without delays covers it.
func admissionOnly(t testing.TB) {
	t.Helper()
	if cluster.Kind != fixture.Simulated || os.Getenv(fixture.SimDelayEnv) != "" {
		t.Skip("admission only: what the apiserver stores, which no node acts on; the simulated run without delays covers it")
	}
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
