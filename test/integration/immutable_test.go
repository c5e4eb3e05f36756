package integration

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// TestNotUpgradable: a change to a sidecar other than its image (an env var
// added) cannot be made in place. Every pod is counted not upgradable and
// says so in its condition, one event on the set names them, and nothing
// is written or restarted.
func TestNotUpgradable(t *testing.T) {
	const pods = 3
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.CreatePods(pods, nil, nil)
	before := fixture.AppIDs(f.Pods())
	f.WaitStatus("all matched and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == pods && s.UpdatedReadyPods == pods
	})

	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.Containers[0].Env = append(s.Spec.Containers[0].Env, corev1.EnvVar{Name: "DEBUG", Value: "1"})
	})
	st := f.WaitStatus("every pod not upgradable", func(s v1alpha1.SidecarSetStatus) bool {
		return s.NotUpgradablePods == pods
	})
	if st.UpdatedPods != 0 || st.MatchedPods != pods {
		t.Errorf("status %+v: want %d matched, none updated", st, pods)
	}
	f.WaitPods("condition SidecarSetUpgradable=False on every pod", func(ps []corev1.Pod) bool {
		for _, p := range ps {
			c := fixture.PodCondition(&p, v1alpha1.PodConditionUpgradable)
			if c == nil || c.Status != corev1.ConditionFalse || c.Reason != v1alpha1.ReasonUpdateImmutableField {
				return false
			}
		}
		return true
	})
	f.WaitSetEvent(controller.ReasonNotUpgradable)

	// Let a few more reconciles pass: they must neither write nor tell it
	// again.
	time.Sleep(2 * time.Second)
	evs := f.SetEvents(controller.ReasonNotUpgradable)
	if len(evs) != 1 || fixture.Occurrences(evs[0]) != 1 {
		t.Fatalf("want one %s event on the set, got %+v", controller.ReasonNotUpgradable, evs)
	}
	if e := evs[0]; e.Type != corev1.EventTypeWarning || !strings.HasPrefix(e.Message, "3 pod(s)") {
		t.Errorf("event %s %q: want a Warning that counts 3 pods", e.Type, e.Message)
	}
	for _, p := range f.Pods() {
		if !strings.Contains(evs[0].Message, f.NS+"/"+p.Name) {
			t.Errorf("event %q does not name pod %s", evs[0].Message, p.Name)
		}
		if fixture.Image(&p, "exporter") != "exporter:v1" {
			t.Errorf("pod %s exporter = %s, want exporter:v1 (not upgradable: untouched)", p.Name, fixture.Image(&p, "exporter"))
		}
		for _, c := range p.Spec.Containers {
			if len(c.Env) != 0 {
				t.Errorf("pod %s container %s got env %v written", p.Name, c.Name, c.Env)
			}
		}
	}
	f.AssertNothingRestarted()
	f.AssertAppsUntouched(before)
}
