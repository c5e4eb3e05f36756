package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// TestCrashingImageWithoutProbe: the commonest failure of a sidecar rollout,
// a new image that starts and exits a second later, in a sidecar without a
// readiness probe (Ready as soon as it runs). With the default
// minReadySeconds (10), longer than the crash takes, a written pod holds
// its slot until its sidecar has run that long, which it never does: at
// most maxUnavailable pods take the image, the set never says Complete, and
// it stalls and pauses itself; new pods get the completed revision. On the
// real node the image exits 0.2 s after it starts (fixture.RealImages).
func TestCrashingImageWithoutProbe(t *testing.T) {
	for _, pods := range []int{2, 12} {
		t.Run(fmt.Sprintf("%d pods", pods), func(t *testing.T) {
			t.Parallel()
			const maxUnavailable, bad = 1, "exporter-crashes:v2"
			f := newFixture(t)
			set := f.SidecarSet("exporter:v1", 0)
			set.Spec.UpdateStrategy.MinReadySeconds = nil
			set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromInt32(maxUnavailable))
			set.Spec.UpdateStrategy.ProgressDeadlineSeconds = new(int32(15))
			f.CreateSet(set)
			f.CreatePods(pods, nil, nil)
			before := fixture.AppIDs(f.Pods())
			f.WaitStatus("all matched and ready", func(s v1alpha1.SidecarSetStatus) bool {
				return s.MatchedPods == int32(pods) && s.UpdatedReadyPods == int32(pods)
			})

			w := f.WatchMax(func(pods []corev1.Pod) int { return fixture.CountImage(pods, bad) })
			f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = bad })
			sawComplete := false
			f.WaitStatus("Stalled", func(s v1alpha1.SidecarSetStatus) bool {
				sawComplete = sawComplete || fixture.Condition(s, v1alpha1.ConditionComplete) == metav1.ConditionTrue
				return fixture.Condition(s, v1alpha1.ConditionStalled) == metav1.ConditionTrue
			})
			f.WaitSet("the rollout paused itself", func(s *v1alpha1.SidecarSet) bool { return s.Spec.UpdateStrategy.Paused })
			time.Sleep(time.Second)
			if got := w.Max(); got > maxUnavailable {
				t.Errorf("%d pods got %s, more than maxUnavailable %d\n%s", got, bad, maxUnavailable, f.Describe())
			}
			if sawComplete {
				t.Errorf("the set said Complete during the rollout of a crashing image")
			}
			if st := f.GetSet().Status; st.CompletedRevision == st.LatestRevision {
				t.Errorf("completedRevision %s is the crashing revision: new pods would get it", st.CompletedRevision)
			}
			f.AssertAppsUntouched(before)
		})
	}
}

// TestCrashingImageCombined: the crashing image of
// TestCrashingImageWithoutProbe, rolled with a hot upgrade, with a resize,
// beside another set on the same pods, and by a set deleted once stalled.
// Each time at most maxUnavailable pods take it, the set never says
// Complete, it stalls and pauses itself, and the app never restarts. The
// other set then rolls its own sidecar over the pods that are up, and over
// the pod the crash has down too once the crashing set is deleted.
func TestCrashingImageCombined(t *testing.T) {
	const pods, maxUnavailable, bad = 4, 1, "exporter-crashes:v2"
	tests := []struct {
		name string
		// set is the set before the crashing image, and change what the
		// update changes besides its image.
		set    func(f *testFixture) *v1alpha1.SidecarSet
		change func(s *v1alpha1.SidecarSet)
		// other: a second set injects proxy:v1 into the same pods, and
		// rolls proxy:v2 once the first stalled; deleted: after the first
		// is deleted.
		other, deleted bool
	}{
		{name: "a hot upgrade", set: func(f *testFixture) *v1alpha1.SidecarSet { return f.hotSet("exporter:v1") }},
		{name: "a resize", set: func(f *testFixture) *v1alpha1.SidecarSet {
			set := f.SidecarSet("exporter:v1", 0)
			set.Spec.Containers[0].Resources = limits("50m", "32Mi")
			return set
		}, change: func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Resources = limits("100m", "64Mi") }},
		{name: "another set on the same pods", other: true},
		{name: "the set deleted once stalled", other: true, deleted: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			set := f.SidecarSet("exporter:v1", 0)
			if tt.set != nil {
				set = tt.set(f)
			}
			set.Spec.UpdateStrategy.MinReadySeconds = nil
			set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromInt32(maxUnavailable))
			set.Spec.UpdateStrategy.ProgressDeadlineSeconds = new(int32(15))
			f.CreateSet(set)
			second := f.Set + "-b"
			if tt.other {
				f.createProxySet(second)
			}
			f.CreatePods(pods, nil, nil)
			before := fixture.AppIDs(f.Pods())
			f.WaitStatus("all matched and ready", func(s v1alpha1.SidecarSetStatus) bool {
				return s.MatchedPods == pods && s.UpdatedReadyPods == pods
			})

			w := f.WatchMax(func(ps []corev1.Pod) int { return declaring(ps, bad) })
			f.UpdateSet(func(s *v1alpha1.SidecarSet) {
				s.Spec.Containers[0].Image = bad
				if tt.change != nil {
					tt.change(s)
				}
			})
			sawComplete := false
			f.WaitStatus("Stalled", func(s v1alpha1.SidecarSetStatus) bool {
				sawComplete = sawComplete || fixture.Condition(s, v1alpha1.ConditionComplete) == metav1.ConditionTrue
				return fixture.Condition(s, v1alpha1.ConditionStalled) == metav1.ConditionTrue
			})
			f.WaitSet("the rollout paused itself", func(s *v1alpha1.SidecarSet) bool { return s.Spec.UpdateStrategy.Paused })
			if tt.other {
				f.rollBeside(second, bad, tt.deleted)
			}
			time.Sleep(time.Second)
			if got := w.Max(); got > maxUnavailable {
				t.Errorf("%d pods got %s, more than maxUnavailable %d\n%s", got, bad, maxUnavailable, f.Describe())
			}
			if sawComplete {
				t.Errorf("the set said Complete during the rollout of a crashing image")
			}
			f.AssertAppsUntouched(before)
		})
	}
}

// declaring counts the pods with a container, a hot slot included, whose
// spec declares image.
func declaring(pods []corev1.Pod, image string) int {
	n := 0
	for _, p := range pods {
		if slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Image == image }) {
			n++
		}
	}
	return n
}

// createProxySet creates the SidecarSet name, injecting proxy:v1 into the
// fixture's pods beside the fixture's set, with maxUnavailable 2: a pod
// the other set's crash keeps down may hold one of its slots.
func (f *testFixture) createProxySet(name string) {
	f.T.Helper()
	set := f.SidecarSet("proxy:v1", 0)
	set.Name = name
	set.Spec.Containers[0].Name = "proxy"
	set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromInt32(2))
	f.C.FitSet(set)
	if err := env.Client.Create(f.T.Context(), set); err != nil {
		f.T.Fatalf("create SidecarSet %s: %v", name, err)
	}
	f.T.Cleanup(func() { _ = env.Client.Delete(context.Background(), set) })
	f.waitInjecting("exporter", "proxy")
}

// rollBeside rolls proxy:v2 with the SidecarSet name over the fixture's
// pods, one of which the fixture's stalled set has down with bad; first it
// deletes the fixture's set when deleted. Every pod that is up takes
// proxy:v2. The pod that is down takes it too once the fixture's set is
// deleted: no rollout of it is left to wait for. While the set exists, the
// write waits unless it catches the pod Ready between two crashes, when it
// takes a slot of the second set's own.
func (f *testFixture) rollBeside(name, bad string, deleted bool) {
	t := f.T
	t.Helper()
	down := ""
	for _, p := range f.Pods() {
		if fixture.Image(&p, "exporter") == bad {
			down = p.Name
		}
	}
	if down == "" {
		t.Fatalf("no pod declares %s\n%s", bad, f.Describe())
	}
	if deleted {
		if err := env.Client.Delete(t.Context(), f.GetSet()); err != nil {
			t.Fatal(err)
		}
	}
	f.UpdateNamedSet(name, func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "proxy:v2" })
	// The pod the crash has down may take proxy:v2 too, while its
	// sidecar runs between crashes: only the others are waited for.
	f.WaitPods("proxy:v2 in every pod that is up", func(ps []corev1.Pod) bool {
		for _, p := range ps {
			if (deleted || p.Name != down) && fixture.Image(&p, "proxy") != "proxy:v2" {
				return false
			}
		}
		return true
	})
	for _, p := range f.Pods() {
		if got := fixture.Image(&p, "proxy"); p.Name != down && got != "proxy:v2" {
			t.Errorf("pod %s, up, has %s, want proxy:v2", p.Name, got)
		}
	}
}
