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
// containers and setName's entry of the state annotation, in one write so
// that the record never disagrees with the spec, and the version
// annotations of its HotUpgrade slots. pod is not modified.
//
// The other sets' records whose last write is back at now are written as
// their own reconciles would write them (backOf), and their names returned
// in others. Left as they are, should this write take the pod down, those
// sets would take it for their own write's disruption and hold the pod.
//
// It fails only when the state annotation is not a JSON object: a record
// written over it would lose the other sets'. An unreadable entry is kept.
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
		// Per-set keys left would go over the next record's Put.
		revision.DropPerSet(out.Annotations)
	}
	slices.Sort(others)
	// With the images, so that a slot the kubelet starts reads its version.
	maps.Copy(out.Annotations, revision.HotVersions(u.State.Containers))
	return out, others, nil
}
