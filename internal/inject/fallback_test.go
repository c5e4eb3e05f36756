package inject

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

func TestFallbackRevision(t *testing.T) {
	stalled := func(set *v1alpha1.SidecarSet) {
		set.Spec.UpdateStrategy.Paused = true
		set.Generation = 4
		set.Status = v1alpha1.SidecarSetStatus{
			ObservedGeneration: 4,
			LatestRevision:     revision.Name(set.Name, &set.Spec),
			CompletedRevision:  "s-old",
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue,
				Reason: "ProgressDeadlineExceeded"}},
		}
	}
	tests := []struct {
		name   string
		change func(*v1alpha1.SidecarSet)
		want   string
	}{
		{"stalled and paused itself", func(*v1alpha1.SidecarSet) {}, "s-old"},
		{"resumed", func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Paused = false }, ""},
		{"status of an older spec", func(s *v1alpha1.SidecarSet) { s.Generation = 5 }, ""},
		{"status names another latest revision", func(s *v1alpha1.SidecarSet) { s.Status.LatestRevision = "s-other" }, ""},
		{"paused by hand, not stalled", func(s *v1alpha1.SidecarSet) { s.Status.Conditions[0].Status = metav1.ConditionFalse }, ""},
		{"never completed", func(s *v1alpha1.SidecarSet) { s.Status.CompletedRevision = "" }, ""},
		{"the latest completed", func(s *v1alpha1.SidecarSet) { s.Status.CompletedRevision = s.Status.LatestRevision }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := testutil.SidecarSet("s").Selector(map[string]string{"app": "db"}).Container("exporter", "exporter:v2").Obj()
			stalled(set)
			tt.change(set)
			if got := FallbackRevision(set); got != tt.want {
				t.Errorf("FallbackRevision = %q, want %q", got, tt.want)
			}
		})
	}
}
