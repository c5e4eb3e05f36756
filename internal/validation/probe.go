package validation

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// The apiserver's pod validation is the judge of what a pod may hold, and
// this module cannot import it (k8s.io/kubernetes). So the validating webhook
// asks the apiserver itself: a server-side dry-run create of a probe pod that
// carries a SidecarSet's containers, init containers, volumes and
// imagePullSecrets at the same indices as in the SidecarSet, so that each
// field error's path (spec.containers[0].ports[0].hostPort) is also the
// SidecarSet's own. A set the apiserver refuses there would make every pod
// it matches fail to be created.

// ProbePodGenerateName prefixes the name of the probe pod.
const ProbePodGenerateName = "sidecarset-validation-"

// probePlaceholder is the probe pod's only regular container when the set
// declares none: a pod needs one.
const probePlaceholder = "sidecarset-validation-placeholder"

// ProbePod returns the pod whose dry-run create shows what the apiserver
// thinks of set's containers, in namespace. Whatever a sidecar refers to that
// a real pod would bring (a volume it mounts but the set does not declare, a
// resource claim) is stubbed after the set's own, so that only what is wrong
// with the set whatever the pod is refused. The pod opts out of injection:
// the pod webhook leaves it alone wherever it is created.
func ProbePod(set *v1alpha1.SidecarSet, namespace string) *corev1.Pod {
	spec := set.Spec.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    namespace,
			GenerateName: ProbePodGenerateName,
			Annotations:  map[string]string{v1alpha1.AnnotationInject: "false"},
		},
		Spec: corev1.PodSpec{
			Volumes:          spec.Volumes,
			ImagePullSecrets: spec.ImagePullSecrets,
			// No token volume: it would add a mount the set did not ask for.
			AutomountServiceAccountToken: ptr.To(false),
		},
	}
	for _, sc := range spec.Containers {
		pod.Spec.Containers = append(pod.Spec.Containers, sc.Container)
	}
	for _, sc := range spec.InitContainers {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, sc.Container)
	}
	if len(pod.Spec.Containers) == 0 {
		pod.Spec.Containers = []corev1.Container{{Name: probePlaceholder, Image: "registry.k8s.io/pause:3.10"}}
	}

	declared := func(name string) bool {
		return slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == name })
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		for _, m := range c.VolumeMounts {
			if !declared(m.Name) {
				pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: m.Name,
					VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			}
		}
		// Only a persistent volume can be a block device.
		for _, d := range c.VolumeDevices {
			if !declared(d.Name) {
				pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: d.Name,
					VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: d.Name}}})
			}
		}
		for _, rc := range c.Resources.Claims {
			if !slices.ContainsFunc(pod.Spec.ResourceClaims, func(p corev1.PodResourceClaim) bool { return p.Name == rc.Name }) {
				pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: rc.Name, ResourceClaimName: ptr.To(rc.Name)})
			}
		}
	}
	return pod
}

// ProbeErrors turns the causes of the apiserver's refusal of ProbePod(set)
// into field errors of set, and returns apart the causes about anything else
// (the stubs, the placeholder, the pod as a whole), which say nothing about
// set.
func ProbeErrors(set *v1alpha1.SidecarSet, causes []metav1.StatusCause) (field.ErrorList, []string) {
	lists := []probeList{
		{"spec.containers[", len(set.Spec.Containers)},
		{"spec.initContainers[", len(set.Spec.InitContainers)},
		{"spec.volumes[", len(set.Spec.Volumes)},
		{"spec.imagePullSecrets[", len(set.Spec.ImagePullSecrets)},
	}
	var errs field.ErrorList
	var other []string
	for _, c := range causes {
		if !slices.ContainsFunc(lists, func(l probeList) bool { return l.holds(c.Field) }) {
			other = append(other, strings.TrimPrefix(c.Field+": "+c.Message, ": "))
			continue
		}
		typ := field.ErrorType(c.Type)
		// The message is the error's body: its type, maybe the value, then
		// the detail. The value stays in the detail, as the apiserver wrote
		// it.
		detail := strings.TrimPrefix(strings.TrimPrefix(c.Message, typ.String()), ": ")
		errs = append(errs, &field.Error{Type: typ, Field: c.Field, BadValue: field.OmitValueType{}, Detail: detail})
	}
	return errs, other
}

// probeList is a list of the probe pod that holds the set's items at their
// own indices: the first n, behind prefix.
type probeList struct {
	prefix string
	n      int
}

// holds reports whether path is within one of the list's first n items.
func (l probeList) holds(path string) bool {
	rest, ok := strings.CutPrefix(path, l.prefix)
	if !ok {
		return false
	}
	i, _, ok := strings.Cut(rest, "]")
	n, err := strconv.Atoi(i)
	return ok && err == nil && n < l.n
}
