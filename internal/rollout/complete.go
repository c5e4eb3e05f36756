package rollout

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/internal/revision"
)

// UpdateComplete reports whether the kubelet runs what was last written into
// a sidecar container that keeps running (a regular or native sidecar), given
// the container's record, the record's last write (nil when none), the
// container's status, and the pod's status.observedGeneration.
//
// The kubelet restarts a container when the hash of its name and image
// changes: any change of the image string, even to a reference of the same
// content (a digest pin, a mirror). So an in-place update is complete when
// the container is running and either
//
//   - a new container runs: its containerID differs from the one recorded
//     just before the write (PreviousContainerID). When the written image is
//     the one that previous container was started from (PreviousImage: an
//     undo, or A→B→A while B was in flight), the new container must also
//     run the previous content (PreviousImageID): a container of the image
//     in between, which the kubelet is about to replace, proves nothing; or
//   - the previous container still runs and was started from the written
//     image: the kubelet never acted on the write in between (A→B→A before
//     it synced), and has nothing to restart.
//
// Until the kubelet reports (status.observedGeneration) the generation the
// write produced, nothing it reports proves anything about the write. Having
// reported it proves less than it seems: the kubelet publishes a sync's
// status before acting on the spec, so its first status at that generation
// still shows the container the previous sync left. A new containerID is
// what proves the restart; the generation only rules out a container
// restarted for another reason (a crash) before the kubelet saw the write.
// The same container counts only once the generation is reported: then the
// kubelet has seen the written spec and left the container running, which
// it does only when that container already matches it.
//
// Neither imageID nor digest alone proves a restart. Pinning x:v1 to
// x@sha256:<v1's digest> restarts the container although the running imageID
// already shows that digest; the old rule, "the imageID changed or equals a
// declared digest", judged such a write complete at once and let the next
// pod go before the first had restarted. And an undo after a failed pull
// writes back the image whose imageID was recorded, so "the imageID changed"
// never held.
//
// A record of a container never written in place (after injection or
// adoption) is complete once the container runs: the kubelet created it from
// the injected spec. One written while no container of it had started yet
// (NoneRan) is complete once a container runs whose status shows the
// written image, or that is not the first (restartCount above 0): the
// kubelet may have been creating one from the spec before, and it shows
// that one at the write's generation too, just before it replaces it; any
// later one it created from the written spec. Only a first container of a
// tag that shares its content with the one before, which the runtime may
// name by that other tag, is not told from the one before: such a write
// waits until the container restarts or the pod is recreated. A write made
// over ones the kubelet had not finished (Between) is not complete while
// the status shows a container of one of their images: the kubelet may
// start it first, and shows it at the write's generation too. The status
// is not required to show the written image: the runtime names a
// container by the first tag its content has on the node, so the written
// image's container may show as another tag; only a container of an image
// in between that shares its content with a tag named before it is not
// told apart, and is taken for the write's. A record written before writes were kept
// (revision.Write) is judged as it was then: by the imageID changing, or a
// declared digest equal to the running one.
//
// A container that is not running (waiting in ErrImagePull or
// CrashLoopBackOff, or terminated) is not complete: it runs nothing yet.
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
		// As that version judged it, digest shortcut included: it judged
		// these writes by it, and the pods it let go on are long done.
		if d := declaredDigest(rc.Image); d != "" && d == imageIDDigest(st.ImageID) {
			return true
		}
		return !sameImageID(st.ImageID, rc.PreviousImageID)
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
		return sameImageID(st.ImageID, rc.PreviousImageID)
	}
	return true
}

// sameImageID reports whether two status imageIDs name the same content:
// their digests when both carry one (so the same image reported with and
// without a runtime prefix is the same), the strings otherwise.
func sameImageID(a, b string) bool {
	if da, db := imageIDDigest(a), imageIDDigest(b); da != "" && db != "" {
		return da == db
	}
	return a == b
}

// declaredDigest returns the digest an image reference is pinned to
// ("repo:tag@sha256:<hex>" or "repo@sha256:<hex>"), or "".
func declaredDigest(image string) string {
	i := strings.LastIndex(image, "@")
	if i < 0 {
		return ""
	}
	if d := image[i+1:]; isDigest(d) {
		return d
	}
	return ""
}

// imageIDDigest returns the digest in a container status imageID, in either
// form the runtimes report, or "".
func imageIDDigest(id string) string {
	if _, rest, ok := strings.Cut(id, "://"); ok {
		id = rest
	}
	if i := strings.LastIndex(id, "@"); i >= 0 {
		id = id[i+1:]
	}
	if isDigest(id) {
		return id
	}
	return ""
}

// isDigest reports whether d is an OCI digest: algorithm ":" lowercase hex.
func isDigest(d string) bool {
	alg, hex, ok := strings.Cut(d, ":")
	if !ok || alg == "" || len(hex) < 32 {
		return false
	}
	for _, r := range alg {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '+' && r != '.' && r != '_' && r != '-' {
			return false
		}
	}
	for _, r := range hex {
		if (r < 'a' || r > 'f') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}
