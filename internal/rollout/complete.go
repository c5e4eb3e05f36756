package rollout

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/internal/imageref"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// UpdateComplete reports whether the kubelet runs what was last written
// into a sidecar that keeps running, given its record, the record's last
// write (nil when none), its status, and the pod's observedGeneration.
//
// The kubelet restarts a container when its image string changes, even to
// the same content (a digest pin), so no imageID or digest alone proves a
// restart. A write is complete when the container runs and either
//
//   - a new container runs; one back to the image that ran before (an undo,
//     A→B→A) must also run that content (PreviousImageID), as one of the
//     image in between, about to go, proves nothing; or
//   - the previous container still runs, started from the written image,
//     and the kubelet reported the write's generation: it has nothing to do.
//
// Nothing reported before the write's generation proves anything, and the
// first status at it still shows the previous sync's container. A container
// never written in place is complete once it runs; one written while none
// had started (NoneRan), once one runs showing the written image, or
// restarted. A write over unfinished ones (Between) is not complete while
// a container of their images runs; the status need not show the written
// image, which the runtime may name by another tag. A record without a
// Write is judged by the imageID changing, or a declared digest running.
//
// Worked cases, previous container c1 started from x:v1 (imageID
// r/x@sha256:aaa…) unless said otherwise:
//
//	written x:v2,           c2 running r/x@sha256:bbb…           → true  (new container)
//	written x:v2,           c1 running, status.image x:v2        → false (the kubelet has not restarted it)
//	written x@sha256:aaa…,  c1 running r/x@sha256:aaa…           → false (a pin restarts the container too)
//	written x@sha256:aaa…,  c2 running r/x@sha256:aaa…           → true
//	written x:v1 (undo),    c3 running r/x@sha256:aaa…           → true  (back to what ran before)
//	written x:v1 (undo),    c2 running r/x@sha256:bbb…           → false (x:v2's container, about to go)
//	written x:v1 (undo),    c1 still running, generation seen    → true  (the kubelet never acted)
//	written x:v2,           c2 running, observedGeneration < write's → false
//	written x:v2,           waiting ErrImagePull                 → false
//	written x:v2, none ran, c1 running, status.image x:v1        → false (created from the spec before)
//	written x:v2, none ran, c1 running, status.image x:v2        → true
//	written x:v2, none ran, c2 running, status.image x:v1, restartCount 1 → true (a later container)
//	written x:v3 over x:v2 in flight, c2 running, status.image x:v2   → false (x:v2's, about to go)
//	written x:v3 over x:v2 in flight, c3 running, status.image x:latest → true (x:v3's, by another tag)
//	no write,               c1 running                           → true  (as injected)
func UpdateComplete(rc revision.ContainerState, write *revision.Write, st corev1.ContainerStatus, observedGeneration int64) bool {
	if st.State.Running == nil {
		return false
	}
	if !written(rc) {
		return true
	}
	if write == nil {
		// As the version that wrote it judged it, digest shortcut included.
		if d := imageref.Digest(rc.Image); d != "" && d == imageref.IDDigest(st.ImageID) {
			return true
		}
		return !imageref.SameID(st.ImageID, rc.PreviousImageID)
	}
	if observedGeneration > 0 && observedGeneration < write.Generation {
		return false
	}
	for _, b := range rc.Between {
		if runsImage(st, b) && !runsImage(st, rc.Image) {
			return false
		}
	}
	if rc.NoneRan {
		return runsImage(st, rc.Image) || st.RestartCount > 0
	}
	backToPrevious := rc.PreviousImage != "" && rc.PreviousImage == rc.Image
	if rc.PreviousContainerID != "" && st.ContainerID == rc.PreviousContainerID {
		return backToPrevious && observedGeneration >= write.Generation
	}
	if backToPrevious && rc.PreviousImageID != "" {
		return imageref.SameID(st.ImageID, rc.PreviousImageID)
	}
	return true
}
