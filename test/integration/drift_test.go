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
	"github.com/sidecarset/sidecarset/internal/imageref"
)

// TestDrift: a sidecar image changed by hand on one pod (kubectl patch) is
// reported under driftPolicy Report, on the set's status, the pod's
// condition and in events, once; switching to Revert writes the declared
// image back.
func TestDrift(t *testing.T) {
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

// TestDriftRevertedAtOnce: under driftPolicy Revert a hand edit is written
// back as soon as it is seen, usually before the kubelet has acted on it.
// The revert waits until the kubelet runs the hand-edited image: written
// earlier, it would record as the container to see replaced the one the
// hand edit is about to replace, and take the hand-edited container for
// the revert's; or, had the kubelet skipped the edit, wait for a restart
// that never comes. So the set counts the pod reverted and ready only once
// the declared image runs again in a new container: restarted for the edit
// and again for the revert, or once when the edit's container never ran
// (its image still being pulled when the revert came).
func TestDriftRevertedAtOnce(t *testing.T) {
	const pods = 2
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 0)
	set.Spec.DriftPolicy = v1alpha1.DriftRevert
	f.CreateSet(set)
	f.CreatePods(pods, nil, nil)
	before := fixture.AppIDs(f.Pods())
	f.WaitStatus("all matched and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == pods && s.UpdatedReadyPods == pods
	})

	edited := fixture.ContainerStatus(f.Pod("p02"), "exporter").ContainerID
	patch := []byte(`{"spec":{"containers":[{"name":"exporter","image":"exporter:by-hand"}]}}`)
	if err := env.Client.Patch(t.Context(), f.Pod("p02"), fixture.RawStrategic(patch)); err != nil {
		t.Fatal(err)
	}
	f.WaitPodEvent("p02", controller.ReasonDriftReverted)
	f.WaitStatus("drift reverted, all ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.DriftedPods == 0 && s.UpdatedReadyPods == pods
	})
	st := fixture.ContainerStatus(f.Pod("p02"), "exporter")
	if st.State.Running == nil || !imageref.Same("exporter:v1", st.Image) || st.ContainerID == edited || st.RestartCount > 2 {
		t.Errorf("p02 counted reverted and ready while its exporter shows %s, running %v, container %s (the edited one %s), %d restart(s); want exporter:v1 running in a new container, after at most 2 restarts\n%s",
			st.Image, st.State.Running != nil, st.ContainerID, edited, st.RestartCount, f.Describe())
	}
	if got := fixture.Restarts(f.Pods(), "exporter"); got["p01"] != 0 {
		t.Errorf("p01's exporter restarted %d time(s), want 0", got["p01"])
	}
	f.AssertAppsUntouched(before)
}
