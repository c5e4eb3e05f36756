package integration

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// TestManagerRestart: the manager stops right after the first pod of a
// rollout was written, while its sidecar is still restarting, and starts
// again. The new manager knows from the pods alone what was done: the
// rollout ends where the partition says, and no pod is written twice.
func TestManagerRestart(t *testing.T) {
	const pods, target = 8, 4
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 2)
	set.Spec.UpdateStrategy.Partition = new(intstr.FromString("50%"))
	set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromInt32(1))
	f.CreateSet(set)
	f.CreatePods(pods, nil, nil)
	before := fixture.AppIDs(f.Pods())
	f.WaitStatus("all matched and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == pods && s.UpdatedReadyPods == pods
	})

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	f.WaitPods("the first pod written", func(ps []corev1.Pod) bool { return fixture.CountImage(ps, "exporter:v2") > 0 })
	if err := sys.StopManager(); err != nil {
		t.Fatal(err)
	}
	if err := sys.StartManager(); err != nil {
		t.Fatalf("start the manager again: %v", err)
	}

	f.WaitStatus("the partition's share updated and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.UpdatedReadyPods == target && fixture.Condition(s, v1alpha1.ConditionComplete) == metav1.ConditionTrue
	})
	ps := f.Pods()
	updated := fixture.Restarts(ps, "exporter")
	steps := f.SetEventPods(controller.ReasonRolloutStep)
	for i, p := range ps {
		want, wantRestarts := "exporter:v1", int32(0)
		// The partition keeps the last pods by name.
		if i < target {
			want, wantRestarts = "exporter:v2", 1
		}
		if got := fixture.Image(&p, "exporter"); got != want {
			t.Errorf("pod %s exporter = %s, want %s", p.Name, got, want)
		}
		if updated[p.Name] != wantRestarts {
			t.Errorf("pod %s exporter restarted %d time(s), want %d", p.Name, updated[p.Name], wantRestarts)
		}
		// The first manager may not have sent its event before it stopped.
		if n := steps[p.Name]; n > int(wantRestarts) {
			t.Errorf("pod %s is named in %d %s event(s), want at most %d", p.Name, n, controller.ReasonRolloutStep, wantRestarts)
		}
	}
	if n := fixture.CountImage(ps, "exporter:v2"); n != target {
		t.Errorf("%d pods updated, want %d (partition 50%% of %d)\n%s", n, target, pods, f.Describe())
	}
	if t.Failed() {
		t.Logf("%s events per pod: %v", controller.ReasonRolloutStep, steps)
	}
	f.AssertAppsUntouched(before)
}
