package rollout

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"

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
// pod would be written beside it.
//
// The resourceVersions tell the two apart: since Kubernetes 1.35 they
// compare (KEP-5504), and a cached pod whose resourceVersion is not below the
// written one's is that write or a later version of the pod, whatever it
// shows. The record tells only some later versions from the pod before the
// write: another set's write may have settled it back to what it was
// (Apply), and a resize written after its record, over a record recorded
// back, leaves it as it was but for WasReady.
//
// Worked cases, the controller wrote record R2 over R1 at resourceVersion 12:
//
//	cached resourceVersion 11, record R1 (the write not seen yet) → written, not caught up
//	cached resourceVersion 12, record R2                          → cached, caught up
//	cached resourceVersion 15, record R1 settled back by another set's write → cached, caught up
//	cached resourceVersion 9                                      → written, not caught up (9 < 12)
//	cached of another UID                                         → cached, caught up
//
// An apiserver whose resourceVersions do not compare gets the record's
// rule: the cache has caught up once it shows a newer spec than the one
// written, or the same spec and record R2.
func Fresher(cached, written *corev1.Pod, setName string) (*corev1.Pod, bool) {
	if cached.UID != written.UID {
		// Another pod of the same name: the written one is gone.
		return cached, true
	}
	if order, err := resourceversion.CompareResourceVersion(cached.ResourceVersion, written.ResourceVersion); err == nil {
		if order >= 0 {
			return cached, true
		}
		return written, false
	}
	if cached.Generation > written.Generation ||
		(cached.Generation == written.Generation && recordOf(cached, setName) == recordOf(written, setName)) {
		// A newer spec than the one written is a later version too. The
		// record alone does not tell a resize written after it.
		return cached, true
	}
	return written, false
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
