package rollout

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/validation"
)

// serviceAccountMountPath is where the ServiceAccount admission plugin mounts
// the API token into every container that does not mount that path itself.
const serviceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// Adoptable reports whether set, with adoptionPolicy SameName, may take over
// pod: a pod its selectors match that carries no record of it (created
// before the set, or while the webhook was down). It may when, for every
// sidecar the set declares, the pod has a container of that name in the same
// list (containers, or initContainers) that equals the declared one except
// for the image.
//
// "Equals" is judged as the apiserver would have built the pod from the
// declaration: the declared container, with the pod's image put in, gets
// the apiserver's defaults (validation.Default: imagePullPolicy Always for
// ":latest" or no tag and IfNotPresent otherwise, terminationMessagePath
// "/dev/termination-log", terminationMessagePolicy "File", probe timings,
// port protocol TCP, requests copied from limits, ...), plus two the pod
// adds: host ports equal to container ports under hostNetwork, and the
// ServiceAccount token mount, which is ignored unless the declared container
// mounts that path itself. Putting the pod's image in first means the
// imagePullPolicy default follows the image the pod runs; a set whose
// defaulting webhook already fixed the policy from its own image then only
// adopts pods whose policy matches it. Anything else that admission added (a
// LimitRange's default resources, say) makes the pod not adoptable: it stays
// unmanaged and counted.
//
// A pod that opted out of injection (annotation sidecarset.dev/inject
// "false") is not adoptable: taking it over would inject by other means what
// its owner refused, and the first image update would restart its sidecar.
// It stays unmanaged and counted.
//
// A pod whose state annotation cannot be decoded is not adoptable: adopting
// means rewriting that annotation, which would drop the other sets' records.
// Nor is one where another set's record already claims a container of one of
// these names.
func Adoptable(pod *corev1.Pod, set *v1alpha1.SidecarSet) bool {
	spec := &set.Spec
	if spec.AdoptionPolicy != v1alpha1.AdoptSameName || len(spec.Containers)+len(spec.InitContainers) == 0 {
		return false
	}
	if pod.Annotations[v1alpha1.AnnotationInject] == "false" {
		return false
	}
	state, err := revision.Decode(pod.Annotations)
	if err != nil {
		return false
	}
	if _, ok := state[set.Name]; ok {
		return false
	}
	claimed := map[string]bool{}
	for _, other := range state {
		for _, c := range other.Containers {
			claimed[c.Name] = true
		}
	}
	hostNetwork := pod.Spec.HostNetwork
	for _, lists := range []struct {
		declared []v1alpha1.SidecarContainer
		inPod    []corev1.Container
	}{
		{spec.Containers, pod.Spec.Containers},
		{spec.InitContainers, pod.Spec.InitContainers},
	} {
		for _, d := range lists.declared {
			c, ok := byName(lists.inPod, d.Name)
			if !ok || claimed[d.Name] || !sameExceptImage(d.Container, c, hostNetwork) {
				return false
			}
		}
	}
	return true
}

// AdoptionRecord returns the record to write into a pod that Adoptable lets
// set take over. It describes what the pod runs: the set's spec with the
// pod's images. Its ImagelessHash is therefore the latest one, and its Hash
// is the latest one exactly when the images are the declared ones; otherwise
// the pod is simply not updated yet, and the rollout moves it like any other.
// Its Revision names no stored ControllerRevision in that case, which is
// harmless: nothing reads a revision back from a pod record.
//
// PreviousImageID stays empty, as after injection: the kubelet created the
// containers from this very spec, so they are consistent once running.
func AdoptionRecord(pod *corev1.Pod, set *v1alpha1.SidecarSet) revision.SetState {
	spec := set.Spec.DeepCopy()
	var containers []revision.ContainerState
	for i := range spec.Containers {
		if c, ok := byName(pod.Spec.Containers, spec.Containers[i].Name); ok {
			spec.Containers[i].Image = c.Image
		}
		containers = append(containers, revision.ContainerState{Name: spec.Containers[i].Name, Image: spec.Containers[i].Image})
	}
	for i := range spec.InitContainers {
		if c, ok := byName(pod.Spec.InitContainers, spec.InitContainers[i].Name); ok {
			spec.InitContainers[i].Image = c.Image
		}
		containers = append(containers, revision.ContainerState{Name: spec.InitContainers[i].Name, Init: true, Image: spec.InitContainers[i].Image})
	}
	return revision.SetState{
		Revision:      revision.Name(set.Name, spec),
		Hash:          revision.Hash(spec),
		ImagelessHash: revision.ImagelessHash(spec),
		Containers:    containers,
	}
}

// sameExceptImage compares a declared sidecar with a pod's container of the
// same name, as Adoptable documents.
func sameExceptImage(declared, inPod corev1.Container, hostNetwork bool) bool {
	declared.Image = inPod.Image
	want := defaulted(declared, hostNetwork)
	got := defaulted(inPod, hostNetwork)
	if !mountsAt(want, serviceAccountMountPath) {
		got.VolumeMounts = withoutMountAt(got.VolumeMounts, serviceAccountMountPath)
	}
	// Semantic equality compares quantities by value and treats nil and
	// empty lists alike, as the apiserver's round trip does.
	return equality.Semantic.DeepEqual(want, got)
}

// defaulted returns c with the defaults the apiserver gives a pod's
// container. Defaulting is idempotent, so the pod's own containers can go
// through it too, which keeps the comparison exact for pods that never went
// through an apiserver (tests, `kubectl sidecarset inject -f`).
func defaulted(c corev1.Container, hostNetwork bool) corev1.Container {
	set := v1alpha1.SidecarSet{Spec: v1alpha1.SidecarSetSpec{
		Containers: []v1alpha1.SidecarContainer{{Container: *c.DeepCopy()}},
	}}
	validation.Default(&set)
	out := set.Spec.Containers[0].Container
	if hostNetwork {
		for i := range out.Ports {
			if out.Ports[i].HostPort == 0 {
				out.Ports[i].HostPort = out.Ports[i].ContainerPort
			}
		}
	}
	return out
}

func mountsAt(c corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			return true
		}
	}
	return false
}

func withoutMountAt(mounts []corev1.VolumeMount, path string) []corev1.VolumeMount {
	var out []corev1.VolumeMount
	for _, m := range mounts {
		if m.MountPath != path {
			out = append(out, m)
		}
	}
	return out
}

func byName(cs []corev1.Container, name string) (corev1.Container, bool) {
	for _, c := range cs {
		if c.Name == name {
			return c, true
		}
	}
	return corev1.Container{}, false
}
