package rollout

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/internal/revision"
)

// UpdateComplete reports whether the kubelet runs what was last written into
// a sidecar container: declaredImage (the image written, recorded.Image),
// given the record and the container's status.
//
// It is complete when the container is running and either
//
//   - its imageID differs from recorded.PreviousImageID, the imageID seen just
//     before the write (after injection PreviousImageID is empty, so any
//     running container counts: the kubelet created it from the injected
//     spec); or
//   - declaredImage is pinned by digest (repo@sha256:<hex>) and the running
//     imageID carries that same digest. This covers a new tag whose content
//     equals the old one: the imageID does not change, but the digest proves
//     the content.
//
// A tag alone never proves anything, unlike OpenKruise, which also accepts an
// unchanged imageID when status.image shows the declared tag:
//
//   - the kubelet may show the new tag while still running the old container
//     (the status lags the spec), or show a tag it knew first for the same
//     content; only the imageID tells;
//   - a tag re-pushed with new content keeps its name; the status then names
//     the declared tag whichever content runs.
//
// Both imageID forms are understood: <repo>@sha256:<hex> for an image pulled
// from a registry, and a bare sha256:<hex> (the image config digest) for a
// locally imported one; dockershim-era prefixes such as docker-pullable://
// are ignored. A digest that differs from the declared one is not taken as
// proof of the opposite: the runtime may report another of the image's repo
// digests, or the config digest, which never equals a manifest digest.
//
// A container that is not running (waiting in ErrImagePull or
// CrashLoopBackOff, or terminated) is not complete: it runs nothing yet.
//
// The price of never trusting a tag: a new tag for the same content,
// declared by tag, leaves the imageID as it was, so the update never
// completes and the rollout stalls at that pod. Declaring by digest avoids it
// (the webhook warns about tags).
//
// Worked cases, PreviousImageID "r/x@sha256:aaa…" unless said otherwise:
//
//	declared x:v2,          running r/x@sha256:bbb…                   → true  (imageID changed)
//	declared x:v2,          running r/x@sha256:aaa…, status.image x:v2 → false (status lags, tag re-pushed, or v2 is v1's content)
//	declared x@sha256:aaa…, running r/x@sha256:aaa…                   → true  (same content under a new reference)
//	declared x@sha256:aaa…, running sha256:aaa…                       → true  (local import)
//	declared x:v2,          waiting ErrImagePull                      → false
//	PreviousImageID "",     running r/x@sha256:aaa…                   → true  (as injected)
func UpdateComplete(declaredImage string, recorded revision.ContainerState, st corev1.ContainerStatus) bool {
	if st.State.Running == nil || st.ImageID == "" {
		return false
	}
	running := imageIDDigest(st.ImageID)
	if d := declaredDigest(declaredImage); d != "" && d == running {
		return true
	}
	// Compare digests when both have one, so the same image reported with
	// and without a runtime prefix is not taken for a change.
	if previous := imageIDDigest(recorded.PreviousImageID); previous != "" && running != "" {
		return running != previous
	}
	return st.ImageID != recorded.PreviousImageID
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
		if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '+' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	for _, r := range hex {
		if !('a' <= r && r <= 'f' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}
