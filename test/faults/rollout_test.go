package faults

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// faultRollout is a rollout of the exporter from v1 to v2 over a
// fixture's pods, maxUnavailable 10%, walked down in partition steps,
// with a fault at each of a drawn set of points: when that many pods
// carry v2.
type faultRollout struct {
	f    *fixture.F
	pods int
	// before holds each pod's generation and app containers' ids before
	// the rollout.
	generations map[string]int64
	apps        map[string]string
	log         *podLog
	took        time.Duration
}

// newFaultRollout creates the set and its pods and waits until all are
// injected and Ready.
func newFaultRollout(t *testing.T, pods int) *faultRollout {
	t.Helper()
	f := fixture.New(t, cluster)
	set := f.SidecarSet("exporter:v1", 1)
	set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromString("10%"))
	f.CreateSet(set)
	began := time.Now()
	createPods(f, pods)
	f.WaitStatusFor(3*time.Minute, "all matched, ready and complete", fixture.Complete(int32(pods)))
	t.Logf("%d pods created, injected and ready in %v", pods, time.Since(began).Round(time.Second))
	before := f.Pods()
	r := &faultRollout{f: f, pods: pods, generations: map[string]int64{}, apps: fixture.AppIDs(before)}
	for _, p := range before {
		r.generations[p.Name] = p.Generation
	}
	return r
}

// maxUnavailable is 10% of the pods.
func (r *faultRollout) maxUnavailable() int { return r.pods / 10 }

// run lowers the partition through steps, and calls fault(k) once the
// k-th point of points (in increasing order, none on a step's end) is
// reached; each step must complete within 3 minutes.
func (r *faultRollout) run(t *testing.T, steps, points []int, fault func(k int)) {
	t.Helper()
	r.log = watchPods(t, r.f, "exporter:v2")
	began := time.Now()
	prev, k := 0, 0
	for i, partition := range steps {
		allowed := r.pods - partition
		r.log.allow(allowed)
		r.f.UpdateSet(func(s *v1alpha1.SidecarSet) {
			s.Spec.Containers[0].Image = "exporter:v2"
			s.Spec.UpdateStrategy.Partition = new(intstr.FromInt32(int32(partition)))
		})
		for ; k < len(points) && points[k] < allowed; k++ {
			if points[k] <= prev {
				continue
			}
			waitWritten(t, r.f, r.log, points[k])
			fault(k)
		}
		prev = allowed
		r.f.WaitStatusFor(3*time.Minute, fmt.Sprintf("step %d complete", i+1), func(s v1alpha1.SidecarSetStatus) bool {
			return fixture.Condition(s, v1alpha1.ConditionComplete) == metav1.ConditionTrue && s.UpdatedReadyPods == int32(allowed)
		})
		t.Logf("partition %d: %d pods updated and ready, %v into the rollout", partition, allowed, time.Since(began).Round(time.Second))
	}
	r.took = time.Since(began)
	r.log.stop(t)
}

// check fails unless the rollout kept its bounds at every moment the
// watch saw (never more than maxUnavailable pods not Ready, none beyond
// the partition in force), wrote every pod once, restarted every
// exporter once and no app container, and ended with all pods on v2 and
// Ready.
func (r *faultRollout) check(t *testing.T) {
	t.Helper()
	if r.log.maxNotReady > r.maxUnavailable() {
		t.Errorf("%d pods not Ready at once, more than maxUnavailable 10%% (%d)", r.log.maxNotReady, r.maxUnavailable())
	}
	if r.log.overPartition > 0 {
		t.Errorf("%d pods written beyond the partition in force at one moment", r.log.overPartition)
	}
	r.log.assertOnce(t, "exporter:v1", r.generations)
	for _, p := range r.f.Pods() {
		if img := fixture.Image(&p, "exporter"); img != "exporter:v2" || !fixture.PodReady(&p) {
			t.Errorf("pod %s: exporter %s, ready %v; want exporter:v2, ready", p.Name, img, fixture.PodReady(&p))
		}
		if n := fixture.ContainerStatus(&p, "exporter").RestartCount; n != 1 {
			t.Errorf("pod %s: exporter restarted %d times, want once", p.Name, n)
		}
	}
	r.f.AssertAppsUntouched(r.apps)
}

// writtenTwice counts the pods whose spec changed more than once.
func (r *faultRollout) writtenTwice() int {
	return r.log.writtenTwice(r.generations)
}
