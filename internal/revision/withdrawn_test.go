package revision

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

func TestWithdrawn(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rev := func(name, first string, created time.Duration) appsv1.ControllerRevision {
		cr := appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(created))}}
		if first != "" {
			cr.Annotations = map[string]string{v1alpha1.AnnotationFirstRevision: first}
		}
		return cr
	}
	// r1 declared first, then r2, then r3; their numbers moved since.
	revs := []appsv1.ControllerRevision{rev("r1", "1", 0), rev("r2", "2", time.Minute), rev("r3", "3", 2*time.Minute)}
	tests := []struct {
		name   string
		revs   []appsv1.ControllerRevision
		latest string
		want   map[string]bool
	}{
		{"the newest declared: nothing withdrawn", revs, "r3", map[string]bool{}},
		{"back to r1: r2 and r3 withdrawn", revs, "r1", map[string]bool{"r2": true, "r3": true}},
		{"back to r2: r3 withdrawn", revs, "r2", map[string]bool{"r3": true}},
		{"latest not kept yet", revs, "r4", nil},
		{"created before first numbers were kept: by creation time",
			[]appsv1.ControllerRevision{rev("old", "", 0), rev("new", "", time.Minute)}, "old", map[string]bool{"new": true}},
		{"the same second, no numbers: not told apart",
			[]appsv1.ControllerRevision{rev("old", "", 0), rev("new", "", 0)}, "old", map[string]bool{}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, Withdrawn(tt.revs, tt.latest)); diff != "" {
			t.Errorf("%s: Withdrawn (-want +got):\n%s", tt.name, diff)
		}
	}
}
