package revision

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

func TestLabels(t *testing.T) {
	stored := func(labels map[string]string) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "s-abc", Labels: labels}}
	}
	tests := []struct {
		name    string
		version string
		cur     *appsv1.ControllerRevision
		want    map[string]string
	}{
		{"new revision, customVersion v2", "v2", nil, map[string]string{v1alpha1.LabelSidecarSet: "s", v1alpha1.LabelCustomVersion: "v2"}},
		{"new revision, no customVersion", "", nil, map[string]string{v1alpha1.LabelSidecarSet: "s"}},
		{"stored with v1, now v2", "v2", stored(map[string]string{v1alpha1.LabelSidecarSet: "s", v1alpha1.LabelCustomVersion: "v1"}),
			map[string]string{v1alpha1.LabelSidecarSet: "s", v1alpha1.LabelCustomVersion: "v2"}},
		{"stored with v1, now none", "", stored(map[string]string{v1alpha1.LabelSidecarSet: "s", v1alpha1.LabelCustomVersion: "v1"}),
			map[string]string{v1alpha1.LabelSidecarSet: "s", v1alpha1.LabelCustomVersion: "v1"}},
		{"stored with another label", "", stored(map[string]string{v1alpha1.LabelSidecarSet: "s", "team": "dba"}),
			map[string]string{v1alpha1.LabelSidecarSet: "s", "team": "dba"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := &v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: v1alpha1.SidecarSetSpec{CustomVersion: tt.version}}
			var before *appsv1.ControllerRevision
			if tt.cur != nil {
				before = tt.cur.DeepCopy()
			}
			if diff := cmp.Diff(tt.want, Labels(set, tt.cur)); diff != "" {
				t.Errorf("Labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.cur); diff != "" {
				t.Errorf("Labels modified the stored revision (-before +after):\n%s", diff)
			}
		})
	}
}

func TestPinned(t *testing.T) {
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "s-abc", Labels: map[string]string{v1alpha1.LabelCustomVersion: "v1"}}}
	tests := []struct {
		name string
		r    *v1alpha1.InjectionRevision
		want bool
	}{
		{"revisionName s-abc", &v1alpha1.InjectionRevision{RevisionName: "s-abc"}, true},
		{"revisionName s-def", &v1alpha1.InjectionRevision{RevisionName: "s-def"}, false},
		{"customVersion v1", &v1alpha1.InjectionRevision{CustomVersion: "v1"}, true},
		{"customVersion v2", &v1alpha1.InjectionRevision{CustomVersion: "v2"}, false},
		{"no injectionStrategy.revision", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := &v1alpha1.SidecarSet{Spec: v1alpha1.SidecarSetSpec{InjectionStrategy: v1alpha1.InjectionStrategy{Revision: tt.r}}}
			if got := Pinned(set, cr); got != tt.want {
				t.Errorf("Pinned = %v, want %v", got, tt.want)
			}
		})
	}
}
