package rollout

import (
	"fmt"
	"maps"

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
// Another set's entry that cannot be read is kept as it is, for that set to
// report. It fails only when the state annotation as a whole is not a JSON
// object: writing a record over it would lose the other sets' records.
func Apply(pod *corev1.Pod, setName string, u PodUpdate) (*corev1.Pod, error) {
	out := pod.DeepCopy()
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
	state, err := revision.Put(out.Annotations, setName, u.State)
	if err != nil {
		return nil, fmt.Errorf("record the update in %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[v1alpha1.AnnotationState] = state
	revision.DropPerSet(out.Annotations)
	// With the images, so that a slot the kubelet starts for them reads
	// its version.
	maps.Copy(out.Annotations, revision.HotVersions(u.State.Containers))
	return out, nil
}
