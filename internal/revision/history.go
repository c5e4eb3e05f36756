package revision

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// Labels returns the labels of the ControllerRevision of set's latest spec,
// cur as stored (nil when there is none yet): those it has, the set's name,
// and spec.customVersion when given. A revision keeps a custom version it
// was labelled with before, so that injectionStrategy.revision.customVersion
// still finds it after the spec moved on to another custom version or none.
//
// Worked cases, set s:
//
//	new revision, customVersion v2              → {set: s, custom-version: v2}
//	new revision, no customVersion              → {set: s}
//	stored with custom-version v1, now v2       → custom-version v2
//	stored with custom-version v1, now none     → custom-version v1 (kept)
//	stored with another label                   → that label kept
func Labels(set *v1alpha1.SidecarSet, cur *appsv1.ControllerRevision) map[string]string {
	labels := map[string]string{}
	if cur != nil {
		maps.Copy(labels, cur.Labels)
	}
	labels[v1alpha1.LabelSidecarSet] = set.Name
	if v := set.Spec.CustomVersion; v != "" {
		labels[v1alpha1.LabelCustomVersion] = v
	}
	return labels
}

// Pinned reports whether set's injectionStrategy.revision names cr, by name
// or by its custom version: new pods get it, so trimming the history must
// keep it, or they would get the latest revision.
//
// Worked cases, revision s-abc labelled custom-version v1:
//
//	revisionName s-abc      → true
//	revisionName s-def      → false
//	customVersion v1        → true
//	customVersion v2        → false
//	no injectionStrategy.revision → false
func Pinned(set *v1alpha1.SidecarSet, cr *appsv1.ControllerRevision) bool {
	r := set.Spec.InjectionStrategy.Revision
	if r == nil {
		return false
	}
	return (r.RevisionName != "" && cr.Name == r.RevisionName) ||
		(r.CustomVersion != "" && cr.Labels[v1alpha1.LabelCustomVersion] == r.CustomVersion)
}
