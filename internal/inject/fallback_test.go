package inject

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

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

func TestPickRevision(t *testing.T) {
	named := func(policy v1alpha1.InjectionRevisionPolicy) func(*v1alpha1.SidecarSet) {
		return func(s *v1alpha1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &v1alpha1.InjectionRevision{RevisionName: "s-old", Policy: policy}
		}
	}
	counts := func(partition intstr.IntOrString, matched, updated int32) func(*v1alpha1.SidecarSet) {
		return func(s *v1alpha1.SidecarSet) {
			named(v1alpha1.InjectRevisionPartial)(s)
			s.Spec.UpdateStrategy.Partition = &partition
			s.Status.MatchedPods, s.Status.UpdatedPods = matched, updated
		}
	}
	old := RevisionPick{Name: "s-old"}
	tests := []struct {
		name   string
		change func(*v1alpha1.SidecarSet)
		want   RevisionPick
	}{
		{"stalled and paused itself", func(s *v1alpha1.SidecarSet) {
			named(v1alpha1.InjectRevisionAlways)(s)
			s.Spec.UpdateStrategy.Paused = true
			s.Status.CompletedRevision = "s-c"
			s.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "ProgressDeadlineExceeded"}}
		}, RevisionPick{Name: "s-c", Stalled: true}},
		{"Always", named(v1alpha1.InjectRevisionAlways), old},
		{"revisionName is the latest", func(s *v1alpha1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &v1alpha1.InjectionRevision{RevisionName: revision.Name(s.Name, &s.Spec), Policy: v1alpha1.InjectRevisionAlways}
		}, RevisionPick{}},
		{"customVersion", func(s *v1alpha1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &v1alpha1.InjectionRevision{CustomVersion: "v1", Policy: v1alpha1.InjectRevisionAlways}
		}, RevisionPick{CustomVersion: "v1"}},
		{"Partial, partition 0, all updated", counts(intstr.FromInt32(0), 9, 9), RevisionPick{}},
		{"Partial, partition 50%, below the target", counts(intstr.FromString("50%"), 9, 4), RevisionPick{}},
		{"Partial, partition 50%, target reached", counts(intstr.FromString("50%"), 9, 5), old},
		{"Partial, partition 3 of 3 pods", counts(intstr.FromInt32(3), 3, 0), RevisionPick{}},
		{"Partial, partition 100%, first pod", counts(intstr.FromString("100%"), 0, 0), old},
		{"Partial, updateStrategy paused", func(s *v1alpha1.SidecarSet) {
			counts(intstr.FromInt32(0), 9, 0)(s)
			s.Spec.UpdateStrategy.Paused = true
		}, old},
		{"Partial, status of an older spec", func(s *v1alpha1.SidecarSet) {
			counts(intstr.FromInt32(0), 9, 0)(s)
			s.Generation = 5
		}, old},
		{"no injectionStrategy.revision", func(*v1alpha1.SidecarSet) {}, RevisionPick{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := testutil.SidecarSet("s").Selector(map[string]string{"app": "db"}).Container("exporter", "exporter:v2").Obj()
			set.Generation = 4
			set.Status = v1alpha1.SidecarSetStatus{ObservedGeneration: 4, LatestRevision: revision.Name(set.Name, &set.Spec)}
			tt.change(set)
			if got := PickRevision(set); got != tt.want {
				t.Errorf("PickRevision = %+v, want %+v", got, tt.want)
			}
		})
	}
}
