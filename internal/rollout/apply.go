package rollout

import (
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// Apply returns a copy of pod with u written into it: the images of u's
// containers, found by name in spec.containers or spec.initContainers, and
// setName's entry of the state annotation replaced by u.State, the entries
// of other SidecarSets kept, with the version annotations of its
// HotUpgrade slots. Images and record go into one write, so the
// record never disagrees with the spec. pod itself is not modified.
//
// The other sets' records whose last write is back in pod at now are written as
// those sets' own reconciles would write them (backOf), and their names
// returned in others (the caller times those updates): the write is made
// from pod, through the optimistic lock, so their writes were back when it
// was made. Should it take the pod down, a record that still described its
// write would take that for its own disruption: count the pod against its
// set's maxUnavailable, write into it again without a slot, and hold the
// writes of every other set into it (HeldByOtherRollout) until the pod is
// ready again. Their own status.releasedBefore may pass those writes only
// later, or never, while a write of theirs is not back.
//
// Another set's entry that cannot be read is kept as it is, for that set to
// report. It fails only when the state annotation as a whole is not a JSON
// object: writing a record over it would lose the other sets' records.
func Apply(pod *corev1.Pod, setName string, u PodUpdate, now time.Time) (out *corev1.Pod, others []string, err error) {
	out = pod.DeepCopy()
	for _, c := range u.Containers {
		list := out.Spec.Containers
		if c.Init {
			list = out.Spec.InitContainers
		}
		for i := range list {
			if list[i].Name == c.Name {
				list[i].Image = c.Image
			}
		}
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	records := map[string]revision.SetState{setName: u.State}
	// Entries that do not decode are left out, and kept as they are.
	state, _ := revision.Decode(pod.Annotations)
	for name, rec := range state {
		if name == setName || rec.Write == nil {
			continue
		}
		if back, ok := backOf(Classify(pod, rec, Latest{Now: now})); ok {
			records[name] = back
			others = append(others, name)
		}
	}
	for name, rec := range records {
		value, err := revision.Put(out.Annotations, name, rec)
		if err != nil {
			return nil, nil, fmt.Errorf("record the update in %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		out.Annotations[v1alpha1.AnnotationState] = value
		// The per-set keys are in the state annotation now; left, they
		// would go over the next record's Put.
		revision.DropPerSet(out.Annotations)
	}
	slices.Sort(others)
	// With the images, so that a slot the kubelet starts for them reads
	// its version.
	maps.Copy(out.Annotations, revision.HotVersions(u.State.Containers))
	return out, others, nil
}
