package inject

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// FallbackRevision names the revision that new pods get instead of set's
// latest one, or "" when they get the latest.
//
// A rollout that stalled paused itself because its latest revision does not
// come up; injecting that revision into every new pod (an HPA scale-up, an
// application rollout) would spread what the rollout stopped. So while the
// status says Stalled for the latest spec and the rollout is paused, new
// pods get status.completedRevision, the last revision whose rollout
// completed. Resuming the rollout, or declaring any other spec, brings the
// latest revision back to new pods.
//
// Worked cases, latest revision s-new, completedRevision s-old:
//
//	Stalled True, paused, status of the latest spec → s-old
//	Stalled True, not paused (resumed)              → "" (s-new)
//	Stalled True, paused, status of an older spec   → "" (the stall was not the latest's)
//	Stalled False, paused by hand                   → ""
//	no completedRevision (never completed)          → ""
func FallbackRevision(set *v1alpha1.SidecarSet) string {
	st := set.Status
	latest := revision.Name(set.Name, &set.Spec)
	switch {
	case !set.Spec.UpdateStrategy.Paused,
		!meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionStalled),
		st.ObservedGeneration != set.Generation || st.LatestRevision != latest,
		st.CompletedRevision == "" || st.CompletedRevision == latest:
		return ""
	}
	return st.CompletedRevision
}

// RevisionPick is the revision of a set that a new pod gets. The zero value
// is the latest revision.
type RevisionPick struct {
	// Name names the ControllerRevision. When it is "", CustomVersion, if
	// set, is the spec.customVersion whose newest revision to look up.
	Name          string
	CustomVersion string
	// Stalled says the stall fallback (FallbackRevision) chose it.
	Stalled bool
}

// Latest reports whether p is the set's latest revision.
func (p RevisionPick) Latest() bool { return p.Name == "" && p.CustomVersion == "" }

// PickRevision says which revision of set a new pod gets.
//
// The stall fallback wins over injectionStrategy.revision: it is the safety
// net of a rollout that stopped on its own, and injectionStrategy.revision
// names a revision the user chose while the latest still looked good. A
// revision named by injectionStrategy.revision goes to every new pod with
// policy Always, and with Partial while updateStrategy.paused is true
// (nothing should then move to the latest). Otherwise, with Partial, a new
// pod gets the latest revision while the pods on it are fewer than the
// rollout's target, the selected pods (this one among them) minus the
// partition, as rollout's Scope computes it. The counts are the status's
// (matchedPods, updatedPods), and only while they describe the latest spec:
// a status of an older spec counts pods of another latest revision, so the
// named revision is injected until the controller catches up.
//
// The status lags the pods by a reconcile, so a burst of creates that all
// read the same counts can put more pods on the latest revision than the
// target, by at most the pods created within the lag. The status then counts
// them as updated, beyond the target, and the rollout never moves a pod
// back.
//
// Worked cases, latest s-new, revision s-old named, status of the latest
// spec:
//
//	Stalled and paused itself, completedRevision s-c       → s-c (stall fallback)
//	Always                                                 → s-old
//	revisionName s-new (the latest)                        → latest
//	customVersion v1                                       → customVersion v1, looked up
//	Partial, partition 0, 9 matched, 9 updated             → latest (target 10 of 10)
//	Partial, partition 50%, 9 matched, 4 updated           → latest (10 with the new pod, partition 5, target 5)
//	Partial, partition 50%, 9 matched, 5 updated           → s-old (target 5 reached)
//	Partial, partition 3, 3 matched, 0 updated             → latest (4 with the new pod, target 1)
//	Partial, partition 100%, 0 matched                     → s-old (target 0)
//	Partial, updateStrategy.paused                         → s-old
//	Partial, status of an older spec                       → s-old
//	no injectionStrategy.revision                          → latest
func PickRevision(set *v1alpha1.SidecarSet) RevisionPick {
	if name := FallbackRevision(set); name != "" {
		return RevisionPick{Name: name, Stalled: true}
	}
	r := set.Spec.InjectionStrategy.Revision
	if r == nil || (r.RevisionName == "" && r.CustomVersion == "") {
		return RevisionPick{}
	}
	if r.RevisionName != "" && r.RevisionName == revision.Name(set.Name, &set.Spec) {
		return RevisionPick{}
	}
	if r.Policy == v1alpha1.InjectRevisionPartial && !set.Spec.UpdateStrategy.Paused && latestHasRoom(set) {
		return RevisionPick{}
	}
	return RevisionPick{Name: r.RevisionName, CustomVersion: r.CustomVersion}
}

// latestHasRoom reports whether one more pod on set's latest revision stays
// within the rollout's target, by the status's counts of the latest spec.
func latestHasRoom(set *v1alpha1.SidecarSet) bool {
	st := set.Status
	if st.ObservedGeneration != set.Generation || st.LatestRevision != revision.Name(set.Name, &set.Spec) {
		return false
	}
	selected := int(st.MatchedPods) + 1
	partition := 0
	if p := set.Spec.UpdateStrategy.Partition; p != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(p, selected, true)
		if err != nil {
			// Validation refuses such a partition; the named revision
			// is the one declared.
			return false
		}
		partition = min(max(n, 0), selected)
	}
	return int(st.UpdatedPods) < selected-partition
}
