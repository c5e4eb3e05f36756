package integration

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// TestFailingImage: a new sidecar image that never gets healthy holds the
// rollout at maxUnavailable; after progressDeadlineSeconds the set says
// Stalled and pauses itself; a fixed image and a resume finish the rollout.
func TestFailingImage(t *testing.T) {
	for _, bad := range []string{"exporter-pull-fails:v2", "exporter-crashes:v2", "exporter-never-ready:v2"} {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(bad, "exporter-"), ":v2"), func(t *testing.T) {
			// Each waits out a deadline; they share nothing but the cluster.
			t.Parallel()
			const pods, maxUnavailable = 5, 2
			f := newFixture(t)
			// A readiness delay longer than the simulated crash (200ms):
			// without a probe a crash-looping container is Ready for as long
			// as it runs, as on a real node.
			set := f.SidecarSet("exporter:v1", 1)
			set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromInt32(maxUnavailable))
			set.Spec.UpdateStrategy.ProgressDeadlineSeconds = new(int32(5))
			f.CreateSet(set)
			f.CreatePods(pods, nil, nil)
			before := fixture.AppIDs(f.Pods())
			f.WaitStatus("all matched and ready", func(s v1alpha1.SidecarSetStatus) bool {
				return s.MatchedPods == pods && s.UpdatedReadyPods == pods
			})

			w := f.WatchMax(func(pods []corev1.Pod) int { return fixture.CountImage(pods, bad) })
			changed := time.Now()
			f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = bad })
			st := f.WaitStatus("Stalled", func(s v1alpha1.SidecarSetStatus) bool {
				return fixture.Condition(s, v1alpha1.ConditionStalled) == metav1.ConditionTrue
			})
			stalled := fixture.SetCondition(st, v1alpha1.ConditionStalled)
			// Condition times are whole seconds; the deadline runs from the
			// first reconcile after the change at the earliest.
			if earliest := changed.Truncate(time.Second).Add(5 * time.Second); stalled.LastTransitionTime.Time.Before(earliest) {
				t.Errorf("Stalled at %s, before progressDeadlineSeconds (5s) passed since the change at %s",
					stalled.LastTransitionTime.Time, changed)
			}
			if stalled.Reason != "ProgressDeadlineExceeded" {
				t.Errorf("Stalled reason %q, want ProgressDeadlineExceeded", stalled.Reason)
			}
			f.WaitSet("the rollout paused itself", func(s *v1alpha1.SidecarSet) bool { return s.Spec.UpdateStrategy.Paused })
			evs := f.WaitSetEvent(controller.ReasonRolloutStalled)
			if len(evs) != 1 || fixture.Occurrences(evs[0]) != 1 || evs[0].Type != corev1.EventTypeWarning {
				t.Errorf("want one Warning event %s on the set, got %+v", controller.ReasonRolloutStalled, evs)
			}

			// Paused, nothing more moves.
			time.Sleep(time.Second)
			if n := fixture.CountImage(f.Pods(), bad); n != maxUnavailable {
				t.Errorf("%d pods on %s while stalled, want maxUnavailable = %d\n%s", n, bad, maxUnavailable, f.Describe())
			}
			if got := w.Max(); got > maxUnavailable {
				t.Errorf("%d pods got %s at once, more than maxUnavailable %d", got, bad, maxUnavailable)
			}

			f.UpdateSet(func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].Image = "exporter:v3"
				s.Spec.UpdateStrategy.Paused = false
			})
			st = f.WaitStatus("complete on the fixed image", func(s v1alpha1.SidecarSetStatus) bool {
				return fixture.Condition(s, v1alpha1.ConditionComplete) == metav1.ConditionTrue &&
					s.UpdatedReadyPods == s.MatchedPods && s.MatchedPods == pods
			})
			if c := fixture.Condition(st, v1alpha1.ConditionStalled); c != metav1.ConditionFalse {
				t.Errorf("Stalled %s after the rollout completed, want False", c)
			}
			for _, p := range f.Pods() {
				if fixture.Image(&p, "exporter") != "exporter:v3" {
					t.Errorf("pod %s exporter = %s, want exporter:v3", p.Name, fixture.Image(&p, "exporter"))
				}
			}
			// Told once per new revision, however many reconciles saw it.
			if n := f.SetEventCount(controller.ReasonRolloutStarted); n != 2 {
				t.Errorf("%d %s events for two image changes, want 2", n, controller.ReasonRolloutStarted)
			}
			f.AssertAppsUntouched(before)
		})
	}
}

// TestImageFailingAfterReady: a new sidecar image that passes readiness and
// fails it some time later. A pod seen Ready again still counts as the
// rollout's until the rollout is complete: once it fails, it takes its
// maxUnavailable slot back, so the rollout stops short of the other pods,
// stalls, and pauses itself, rather than spreading the image to every pod
// and calling it complete.
func TestImageFailingAfterReady(t *testing.T) {
	const pods, maxUnavailable, bad = 6, 1, "exporter-turns-unready:v2"
	f := newFixture(t)
	// Ready a second after it starts; the bad image fails readiness 0.2s
	// after that on simulated nodes, a few seconds after on a real one.
	set := f.SidecarSet("exporter:v1", 1)
	set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromInt32(maxUnavailable))
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = deadline(5)
	f.CreateSet(set)
	f.CreatePods(pods, nil, nil)
	before := fixture.AppIDs(f.Pods())
	f.WaitStatus("all matched and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == pods && s.UpdatedReadyPods == pods
	})

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = bad })
	st := f.WaitStatus("Stalled", func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Condition(s, v1alpha1.ConditionStalled) == metav1.ConditionTrue
	})
	if c := fixture.Condition(st, v1alpha1.ConditionComplete); c != metav1.ConditionFalse {
		t.Errorf("Complete %s while stalled, want False", c)
	}
	f.WaitSet("the rollout paused itself", func(s *v1alpha1.SidecarSet) bool { return s.Spec.UpdateStrategy.Paused })
	n := fixture.CountImage(f.Pods(), bad)
	if n == 0 || n >= pods {
		t.Errorf("%d of %d pods got %s; want the rollout stopped after the first failed, short of the rest\n%s",
			n, pods, bad, f.Describe())
	}
	// Paused, nothing more moves.
	time.Sleep(time.Second)
	if again := fixture.CountImage(f.Pods(), bad); again != n {
		t.Errorf("%d pods on %s after the pause, %d when it paused", again, bad, n)
	}
	f.AssertAppsUntouched(before)
}
