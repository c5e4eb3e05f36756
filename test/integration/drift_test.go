package integration

import (
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// TestDrift: a sidecar image changed by hand on one pod (kubectl patch) is
// reported under driftPolicy Report, on the set's status, the pod's
// condition and in events, once; switching to Revert writes the declared
// image back.
func TestDrift(t *testing.T) {
	// On a real node the revert can be judged done before the kubelet
	// restarts the container: the kubelet reports the revert's generation
	// observed while the hand-edited container still runs, and the
	// container recorded as running before the revert may be the one the
	// hand edit replaced. Not yet fixed.
	simulatedOnly(t, "a drift revert is judged done too early on a real kubelet")
	const pods = 3
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.CreatePods(pods, nil, nil)
	before := fixture.AppIDs(f.Pods())
	f.WaitStatus("all matched and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == pods && s.UpdatedReadyPods == pods
	})

	p02 := f.Pod("p02")
	patch := []byte(`{"spec":{"containers":[{"name":"exporter","image":"exporter:by-hand"}]}}`)
	if err := env.Client.Patch(t.Context(), p02, fixture.RawStrategic(patch)); err != nil {
		t.Fatal(err)
	}
	f.WaitStatus("one drifted pod", func(s v1alpha1.SidecarSetStatus) bool { return s.DriftedPods == 1 })
	f.WaitPods("condition SidecarSetDrifted=True on p02 only", func(ps []corev1.Pod) bool {
		for _, p := range ps {
			c := fixture.PodCondition(&p, controller.PodConditionDrifted)
			drifted := c != nil && c.Status == corev1.ConditionTrue
			if drifted != (p.Name == "p02") {
				return false
			}
		}
		return true
	})
	f.WaitPodEvent("p02", controller.ReasonDrifted)
	f.WaitSetEvent(controller.ReasonDrifted)

	// Report leaves the pod as it is, and tells it once.
	time.Sleep(2 * time.Second)
	if img := fixture.Image(f.Pod("p02"), "exporter"); img != "exporter:by-hand" {
		t.Errorf("driftPolicy Report changed p02's exporter to %s", img)
	}
	if got := f.PodEvents(controller.ReasonDrifted); len(got) != 1 || got["p02"] != 1 {
		t.Errorf("%s events per pod: %v, want p02 once", controller.ReasonDrifted, got)
	}
	evs := f.SetEvents(controller.ReasonDrifted)
	if len(evs) != 1 || fixture.Occurrences(evs[0]) != 1 || evs[0].Type != corev1.EventTypeWarning ||
		!strings.Contains(evs[0].Message, f.NS+"/p02") {
		t.Errorf("want one Warning %s event on the set naming p02, got %+v", controller.ReasonDrifted, evs)
	}
	if st := f.GetSet().Status; st.DriftedPods != 1 {
		t.Errorf("driftedPods %d under Report, want 1", st.DriftedPods)
	}

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.DriftPolicy = v1alpha1.DriftRevert })
	f.WaitStatus("drift reverted, all ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.DriftedPods == 0 && s.UpdatedReadyPods == pods
	})
	f.WaitPods("p02 back on exporter:v1, condition False", func(ps []corev1.Pod) bool {
		c := fixture.PodCondition(&ps[1], controller.PodConditionDrifted)
		return fixture.Image(&ps[1], "exporter") == "exporter:v1" && c != nil && c.Status == corev1.ConditionFalse
	})
	f.WaitPodEvent("p02", controller.ReasonDriftReverted)
	// p02's exporter restarted for the hand edit and for the revert; the
	// others never.
	if got, want := fixture.Restarts(f.Pods(), "exporter"), map[string]int32{"p01": 0, "p02": 2, "p03": 0}; !maps.Equal(got, want) {
		t.Errorf("exporter restarts %v, want %v", got, want)
	}
	f.AssertAppsUntouched(before)
}
