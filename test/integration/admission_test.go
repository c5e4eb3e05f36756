package integration

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// TestImageFromLatestUpdatedInPlace: a sidecar declared as :latest gets the
// pull policy Always by default, :v2 gets IfNotPresent. A manifest that
// names no pull policy, replaced with the new tag (kubectl replace, or a
// server-side apply that owns the defaulted field), changes only the image:
// every pod is updated in place, none is counted not upgradable. The pods
// keep the pull policy they were created with, which is immutable.
func TestImageFromLatestUpdatedInPlace(t *testing.T) {
	simulatedOnly(t, "the pull policy a :latest image defaults to; on a real node here every image is local, pulled never")
	const pods = 2
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:latest", 0))
	f.CreatePods(pods, nil, nil)
	before := fixture.AppIDs(f.Pods())
	f.WaitStatus("all matched and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == pods && s.UpdatedReadyPods == pods
	})
	if p := f.GetSet().Spec.Containers[0].ImagePullPolicy; p != corev1.PullAlways {
		t.Fatalf("defaulted pull policy %s, want Always", p)
	}

	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "exporter:v2"
		s.Spec.Containers[0].ImagePullPolicy = ""
	})
	st := f.WaitStatus("every pod updated in place", func(s v1alpha1.SidecarSetStatus) bool {
		return s.UpdatedReadyPods == pods || s.NotUpgradablePods > 0
	})
	if st.NotUpgradablePods != 0 || st.UpdatedReadyPods != pods {
		t.Fatalf("status %+v: want %d updated in place, none not upgradable", st, pods)
	}
	for _, p := range f.Pods() {
		if fixture.Image(&p, "exporter") != "exporter:v2" {
			t.Errorf("pod %s exporter = %s, want exporter:v2", p.Name, fixture.Image(&p, "exporter"))
		}
	}
	f.AssertAppsUntouched(before)
}
