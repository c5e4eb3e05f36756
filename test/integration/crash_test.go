package integration

import (
	"fmt"
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
