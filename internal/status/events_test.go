package status

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

func TestEvents(t *testing.T) {
	st := func(rev string, complete bool, matched, updated int32) v1alpha1.SidecarSetStatus {
		c := metav1.Condition{Type: v1alpha1.ConditionComplete, Status: metav1.ConditionFalse, Message: "moving"}
		if complete {
			c.Status, c.Message = metav1.ConditionTrue, "done"
		}
		return v1alpha1.SidecarSetStatus{LatestRevision: rev, MatchedPods: matched, UpdatedPods: updated, Conditions: []metav1.Condition{c}}
	}
	tests := []struct {
		name       string
		prev, next v1alpha1.SidecarSetStatus
		want       []Event
	}{
		{"first status, complete", v1alpha1.SidecarSetStatus{}, st("s-1", true, 0, 0), []Event{{EventRolloutComplete, "done"}}},
		{"new revision", st("s-1", true, 12, 12), st("s-2", false, 12, 0),
			[]Event{{EventRolloutStarted, "revision s-2: 12 matched pod(s) on other revisions"}}},
		{"completes", st("s-2", false, 12, 6), st("s-2", true, 12, 12), []Event{{EventRolloutComplete, "done"}}},
		{"stays complete", st("s-2", true, 12, 12), st("s-2", true, 12, 12), nil},
		{"new revision, complete at once", st("s-1", true, 0, 0), st("s-2", true, 0, 0),
			[]Event{{EventRolloutStarted, "revision s-2: 0 matched pod(s) on other revisions"}, {EventRolloutComplete, "done"}}},
		{"still moving", st("s-2", false, 12, 3), st("s-2", false, 12, 4), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Events(tt.prev, tt.next)); diff != "" {
				t.Errorf("Events (-want +got):\n%s", diff)
			}
		})
	}
}
