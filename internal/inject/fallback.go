package inject

import (
	"k8s.io/apimachinery/pkg/api/meta"

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
