package revision

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// Withdrawn returns the names of the revisions in revs that were first
// declared after latest: when a set declares an older revision again
// (`rollout undo`, or the old manifest applied), those are the ones it went
// back from, and the pods on them go back whatever the partition. Empty when
// latest is the newest, or is not in revs.
//
// Which of two revisions was declared first is told by the number each was
// created with (AnnotationFirstRevision; the revision number itself moves
// to the top on every re-declaration), or, for revisions created before
// that was kept, by creation time.
func Withdrawn(revs []appsv1.ControllerRevision, latest string) map[string]bool {
	var l *appsv1.ControllerRevision
	for i := range revs {
		if revs[i].Name == latest {
			l = &revs[i]
		}
	}
	if l == nil {
		return nil
	}
	out := map[string]bool{}
	for i := range revs {
		if r := &revs[i]; r.Name != latest && declaredBefore(l, r) {
			out[r.Name] = true
		}
	}
	return out
}

func declaredBefore(a, b *appsv1.ControllerRevision) bool {
	na, errA := strconv.ParseInt(a.Annotations[v1alpha1.AnnotationFirstRevision], 10, 64)
	nb, errB := strconv.ParseInt(b.Annotations[v1alpha1.AnnotationFirstRevision], 10, 64)
	if errA == nil && errB == nil {
		return na < nb
	}
	return a.CreationTimestamp.Before(&b.CreationTimestamp)
}
