package rollout

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// Fresher returns the view of a pod to judge: cached, from the manager's
// cache, or written, as the apiserver returned this controller's last
// write of setName's record, while the cache has not caught up with that
// write; and whether it has, after which written can be forgotten. The
// cache lags the controller's own writes: a reconcile that saw the pod as
// before the write would not count it, and write the next pod beside it.
//
// Since Kubernetes 1.35 resourceVersions compare (KEP-5504): a cached pod
// not below the written one is that write or a later one, whatever its
// record shows (another set's write may have settled it back, Apply).
// Worked cases, the controller wrote record R2 over R1 at resourceVersion 12:
//
//	cached resourceVersion 11, record R1 (the write not seen yet) → written, not caught up
//	cached resourceVersion 12, record R2                          → cached, caught up
//	cached resourceVersion 15, record R1 settled back by another set's write → cached, caught up
//	cached resourceVersion 9                                      → written, not caught up (9 < 12)
//	cached of another UID                                         → cached, caught up
//
// Where they do not compare, the cache has caught up once it shows a newer
// spec than the one written, or the same spec and record R2.
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
		// A newer spec than the one written is a later version too.
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
