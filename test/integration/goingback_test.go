package integration

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// TestGoingBackBringsCanariesBack: a canary of exporter:v2 on one pod of
// four (partition 3), then the old spec declared again by hand, as applying
// the old manifest does. The pods that never moved are on the latest
// revision again, and partition 3 would keep the canary on the withdrawn
// one and call the rollout complete; the canary goes back whatever the
// partition, the set is complete only once it has, and nothing else
// restarts.
func TestGoingBackBringsCanariesBack(t *testing.T) {
	const pods = 4
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 1)
	set.Spec.UpdateStrategy.Partition = new(intstr.FromInt32(3))
	f.startComplete(set, pods)
	before := fixture.AppIDs(f.Pods())

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	f.WaitStatus("the canary updated", func(s v1alpha1.SidecarSetStatus) bool {
		return s.UpdatedReadyPods == 1 && fixture.Condition(s, v1alpha1.ConditionComplete) == "True"
	})

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v1" })
	f.WaitStatus("complete with every pod back on exporter:v1", func(s v1alpha1.SidecarSetStatus) bool {
		complete := fixture.Complete(pods)(s)
		if n := fixture.CountImage(f.Pods(), "exporter:v2"); complete && n > 0 {
			t.Fatalf("complete with %d pod(s) still on exporter:v2\n%s", n, f.Describe())
		}
		return complete
	})
	if got := fixture.Restarts(f.Pods(), "exporter"); got["p01"] != 2 || got["p02"]+got["p03"]+got["p04"] != 0 {
		t.Errorf("exporter restarts %v, want p01 twice (to v2 and back) and no other", got)
	}
	f.AssertAppsUntouched(before)
}
