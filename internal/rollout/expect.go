package rollout

import (
	"maps"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// Fresher returns the view of a pod to judge: cached, the manager's cache
// of it, or written, the pod as the apiserver returned it from this
// controller's last write of setName's record, when the cache has not caught
// up with that write yet. It also reports whether the cache has caught up,
// after which written can be forgotten.
//
// The cache lags the controller's own writes. A reconcile that runs before
// the write's watch event arrived (a requeue, an event of the SidecarSet or
// of another pod) would otherwise see the pod as it was before it was
// written: not updating, so not counted against maxUnavailable, and the next
// pod would be written beside it. The record the controller wrote tells the
// two apart: only this controller writes a set's record, so the cache shows
// it once it has seen the write, or any later version of the pod; another
// set's write changes it only to settle it or record it back (Apply).
//
// Worked cases, the controller wrote record R2 over R1:
//
//	cached record R1 (the write not seen yet) → written, not caught up
//	cached record R2                          → cached, caught up
//	cached record R2, status newer            → cached, caught up
//	cached record R2, another set's record new → cached, caught up
//	cached record R1, generation above the written one's → cached, caught up
//	cached record R2, the resize after it not seen yet   → written, not caught up
//	cached record R2 settled by another set's write      → cached, caught up
//	cached record R2 settled, no other set's record new  → written, not caught up
func Fresher(cached, written *corev1.Pod, setName string) (*corev1.Pod, bool) {
	if cached.UID != written.UID {
		// Another pod of the same name: the written one is gone.
		return cached, true
	}
	if cached.Generation > written.Generation ||
		(cached.Generation == written.Generation && seenIn(cached, written, setName)) {
		// A newer spec than the one written is a later version too. The
		// record alone does not tell a resize written after it.
		return cached, true
	}
	return written, false
}

// seenIn reports whether cached shows setName's record as written left
// it, or as another set's write of a record alone settled it or recorded it
// back since (Apply): a later version of the pod either way. That write
// wrote its own set's record too; without it, a record that reads as the
// written one settled or recorded back is the one from before the write (a
// resize written after its record keeps the Write the record held, but for
// WasReady).
func seenIn(cached, written *corev1.Pod, setName string) bool {
	got := recordOf(cached, setName)
	if got == recordOf(written, setName) {
		return true
	}
	state, err := revision.Decode(written.Annotations)
	rec, ok := state[setName]
	if err != nil || !ok || rec.Write == nil || !othersChanged(cached, state, setName) {
		return false
	}
	return got == revision.Encode(revision.State{setName: settledRecord(rec)}) ||
		got == revision.Encode(revision.State{setName: recordedBack(rec)})
}

// othersChanged reports whether the record of some set other than setName
// differs between cached and written, the state of the pod as written.
func othersChanged(cached *corev1.Pod, written revision.State, setName string) bool {
	state, err := revision.Decode(cached.Annotations)
	if err != nil {
		return false
	}
	return revision.Encode(without(state, setName)) != revision.Encode(without(written, setName))
}

// without returns a copy of state without setName's record.
func without(state revision.State, setName string) revision.State {
	out := maps.Clone(state)
	delete(out, setName)
	return out
}

// recordOf returns setName's entry of pod's state annotation, encoded, or
// the raw annotation when it does not decode.
func recordOf(pod *corev1.Pod, setName string) string {
	state, err := revision.Decode(pod.Annotations)
	if err != nil {
		return pod.Annotations[v1alpha1.AnnotationState]
	}
	rec, ok := state[setName]
	if !ok {
		return ""
	}
	return revision.Encode(revision.State{setName: rec})
}
