package status

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// Reasons of the rollout events Events tells.
const (
	EventRolloutStarted  = "RolloutStarted"
	EventRolloutComplete = "RolloutComplete"
)

// Event is a Normal event to emit on the SidecarSet.
type Event struct {
	Reason, Message string
}

// Events returns the rollout events the move from prev to next tells, in
// order: a rollout started (the latest revision changed from one the set
// had), and a rollout completed (Complete became True, or is True for a new
// revision). A stall is told by the controller when it pauses the rollout.
//
// Worked cases:
//
//	prev none,  next s-1 complete           → RolloutComplete
//	prev s-1 complete, next s-2 progressing → RolloutStarted "revision s-2: 12 matched pod(s) on other revisions"
//	prev s-2 progressing, next s-2 complete → RolloutComplete
//	prev s-2 complete, next s-2 complete    → nothing
//	prev s-1 complete, next s-2 complete    → RolloutStarted, RolloutComplete (no pod to move)
func Events(prev, next v1alpha1.SidecarSetStatus) []Event {
	var out []Event
	newRevision := prev.LatestRevision != next.LatestRevision
	if prev.LatestRevision != "" && newRevision {
		out = append(out, Event{EventRolloutStarted, fmt.Sprintf("revision %s: %d matched pod(s) on other revisions",
			next.LatestRevision, next.MatchedPods-next.UpdatedPods)})
	}
	if c := meta.FindStatusCondition(next.Conditions, v1alpha1.ConditionComplete); c != nil && c.Status == "True" {
		if newRevision || !meta.IsStatusConditionTrue(prev.Conditions, v1alpha1.ConditionComplete) {
			out = append(out, Event{EventRolloutComplete, c.Message})
		}
	}
	return out
}
