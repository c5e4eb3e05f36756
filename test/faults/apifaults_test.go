package faults

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// faultyManager replaces the cluster's manager with one in the test's
// process whose requests go through tr, without leader election (its
// Lease's requests would fail too, and a lost Lease ends the manager).
// When the test ends it stops, and the cluster's manager starts again.
func faultyManager(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper) {
	t.Helper()
	if err := cluster.Stack.StopManager(); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(cluster.Env.Config)
	cfg.Wrap(wrap)
	opts := cluster.Stack.ManagerOptions()
	opts.LeaderElection = false
	ctx, cancel := context.WithCancel(context.Background())
	_, done, err := cluster.Env.StartManager(ctx, cfg, opts)
	t.Cleanup(func() {
		cancel()
		if done != nil {
			if err := <-done; err != nil {
				t.Errorf("the faulty manager: %v", err)
			}
		}
		if err := cluster.Stack.StartManager(); err != nil {
			t.Errorf("start the cluster's manager again: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAPIFaults: a rollout of 100 pods (maxUnavailable 10%) by a manager
// whose every request but discovery may fail: writes answered 409 (5%), or
// made and then answered 500 (5%, the answer lost); any request but a watch
// answered 429 with Retry-After (5%) or 500 (5%) without reaching the
// apiserver, or held back up to 500ms (10%); watch streams cut 1-5s after
// they open (50%, and always the first). The rollout completes with every
// pod written once and never more than 10 not Ready, and the manager backs
// off: its requests stay within a bound per pod (see requestsPerPod).
func TestAPIFaults(t *testing.T) {
	const (
		pods           = 100
		maxUnavailable = pods / 10
	)
	r := newRand(t)
	rates := faultRates{conflict: 0.05, lostAnswer: 0.05, throttled: 0.05, serverError: 0.05, slow: 0.10, droppedWatch: 0.50, slowBy: 500 * time.Millisecond}
	f := fixture.New(t, cluster)
	// The pods are made by the cluster's manager, without faults: what is
	// measured is the rollout.
	set := f.SidecarSet("exporter:v1", 1)
	set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromString("10%"))
	f.CreateSet(set)
	createPods(f, pods)
	f.WaitStatus("all matched, ready and complete", fixture.Complete(pods))
	before := f.Pods()
	apps := fixture.AppIDs(before)
	generations := map[string]int64{}
	for _, p := range before {
		generations[p.Name] = p.Generation
	}

	var tr *faultyTransport
	faultyManager(t, func(rt http.RoundTripper) http.RoundTripper {
		tr = newFaultyTransport(rt, r, rates)
		return tr
	})
	reqStart, faultStart, _ := tr.counts()

	log := watchPods(t, f, "exporter:v2")
	log.allow(pods)
	began := time.Now()
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	f.WaitStatusFor(2*time.Minute, "complete on exporter:v2", func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Condition(s, v1alpha1.ConditionComplete) == metav1.ConditionTrue && s.UpdatedReadyPods == pods
	})
	took := time.Since(began)
	reqs, faults, podWrites := tr.counts()
	log.stop(t)

	total := 0
	for v, n := range reqs {
		reqs[v] = n - reqStart[v]
		total += reqs[v]
	}
	injected := 0
	for k, n := range faults {
		faults[k] = n - faultStart[k]
		injected += faults[k]
	}
	for _, k := range []Fault{Conflict, Throttled, ServerError, LostAnswer, Slow} {
		if faults[k] == 0 {
			t.Errorf("no %s fault injected: the test did not exercise it", k)
		}
	}
	// Watches open when the manager starts and last until cut, so few open
	// during the rollout: a watch dropped since the faulty manager started
	// counts, its stream cut seconds later and opened again.
	if faults[DroppedWatch]+faultStart[DroppedWatch] == 0 {
		t.Errorf("no %s fault injected: the test did not exercise it", DroppedWatch)
	}
	if log.maxNotReady > maxUnavailable {
		t.Errorf("%d pods not Ready at once, more than maxUnavailable 10%% (%d)", log.maxNotReady, maxUnavailable)
	}
	log.assertOnce(t, "exporter:v1", generations)
	for _, p := range f.Pods() {
		if n := fixture.ContainerStatus(&p, "exporter").RestartCount; n != 1 {
			t.Errorf("pod %s: exporter restarted %d times, want once", p.Name, n)
		}
	}
	f.AssertAppsUntouched(apps)
	if per := float64(total) / pods; per > requestsPerPod {
		t.Errorf("%d requests for %d pods, %.1f per pod: more than %d, the manager does not back off", total, pods, per, requestsPerPod)
	}
	// Two writes per pod: the image, and the records once the swap
	// completed; one more may be a write sent again after its answer was
	// lost.
	if limit := 2*pods + faults[LostAnswer]; podWrites > limit {
		t.Errorf("%d pod writes reached the apiserver for %d pods, more than 2 per pod and one per lost answer (%d)", podWrites, pods, limit)
	}
	summary := fmt.Sprintf("%d requests (%s), %.1f per pod; %d pod writes reached the apiserver; %d faults injected (%s); rollout of %d pods in %v",
		total, formatCounts(reqs), float64(total)/pods, podWrites, injected, formatCounts(faults), pods, took.Round(time.Second))
	t.Logf("faults: %s", summary)
	if !t.Failed() {
		results.add(map[string]any{},
			"## API faults (TestAPIFaults)",
			"",
			fmt.Sprintf("- rollout of %d pods, maxUnavailable 10%% (%d), completed in %v; at most %d pods not Ready at once; every pod written once",
				pods, maxUnavailable, took.Round(time.Second), log.maxNotReady),
			fmt.Sprintf("- faults injected: %d (%s)", injected, formatCounts(faults)),
			fmt.Sprintf("- requests made: %d (%s), %.1f per pod (bound %d); pod writes that reached the apiserver: %d (bound 2 per pod and one per lost answer: %d)",
				total, formatCounts(reqs), float64(total)/pods, requestsPerPod, podWrites, 2*pods+faults[LostAnswer]),
		)
	}
}

// requestsPerPod bounds the manager's requests per pod over a rollout
// under TestAPIFaults' faults, counted from the update of the set to its
// Complete status. A pod costs the manager two writes (the image, then the
// records once the swap completed), and a share of the set's status
// writes and events (a reconcile per batch of pods turning ready) and of
// the cache's watches. A fault costs a request more, or a watch opened
// again after a dropped one (one request, not one per pod). Measured on 2
// cores: 4.1 per pod. A manager that retried at once on failure, or wrote
// statuses in a loop, makes hundreds; 20 leaves room for a loaded
// machine's slower rollout (more reconciles, more status writes) and none
// for a hot loop.
const requestsPerPod = 20

// formatCounts prints counts by key, sorted.
func formatCounts[K ~string](m map[K]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if m[k] != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	return strings.Join(parts, ", ")
}
