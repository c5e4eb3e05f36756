package inject

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The QoS rules below follow the kubelet's
// (k8s.io/kubernetes/pkg/apis/core/v1/helper/qos.ComputePodQOS, mirrored in
// k8s.io/kubectl/pkg/util/qos): neither module is a dependency here, and
// k8s.io/kubernetes is not meant to be imported.

// podLevelResourcesSet reports whether the pod sets pod-level cpu, memory or
// hugepages; the kubelet then takes the QoS class from those alone, so
// injected containers cannot change it.
func podLevelResourcesSet(pod *corev1.Pod) bool {
	r := pod.Spec.Resources
	if r == nil {
		return false
	}
	for _, l := range []corev1.ResourceList{r.Requests, r.Limits} {
		for name := range l {
			if name == corev1.ResourceCPU || name == corev1.ResourceMemory || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
				return true
			}
		}
	}
	return false
}

// containersQOS is the QoS class of a pod without pod-level resources:
// BestEffort when no container (init containers included) has cpu or memory
// requests or limits, Guaranteed when every container has both with limits
// equal to requests, Burstable otherwise. A pod without containers is
// BestEffort.
func containersQOS(pod *corev1.Pod) corev1.PodQOSClass {
	var class corev1.PodQOSClass
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			switch c := containerQOS(&cs[i].Resources); {
			case c == corev1.PodQOSBurstable:
				return c
			case class == "":
				class = c
			case class != c:
				return corev1.PodQOSBurstable
			}
		}
	}
	if class == "" {
		return corev1.PodQOSBestEffort
	}
	return class
}

// containerQOS is the class one container's resources alone would give.
func containerQOS(r *corev1.ResourceRequirements) corev1.PodQOSClass {
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	cpu := resourceQOS(r, corev1.ResourceCPU)
	if cpu != resourceQOS(r, corev1.ResourceMemory) {
		return corev1.PodQOSBurstable
	}
	return cpu
}

// resourceQOS is Guaranteed when the request equals a non-zero limit,
// BestEffort when neither is set, Burstable otherwise. A request missing
// where a limit is set counts as equal to the limit: the apiserver defaults
// it so (SetDefaults_Pod) before storing the pod, after mutating webhooks
// too, so a sidecar declaring limits only ends up Guaranteed.
func resourceQOS(r *corev1.ResourceRequirements, name corev1.ResourceName) corev1.PodQOSClass {
	lim := r.Limits[name]
	req, _ := request(r, name)
	switch {
	case !req.Equal(lim):
		return corev1.PodQOSBurstable
	case req.IsZero():
		return corev1.PodQOSBestEffort
	default:
		return corev1.PodQOSGuaranteed
	}
}

// request returns the container's request of name, which is its limit when
// only that is set, as the apiserver defaults it; ok is false when neither
// is set.
func request(r *corev1.ResourceRequirements, name corev1.ResourceName) (q resource.Quantity, ok bool) {
	if req, ok := r.Requests[name]; ok {
		return req, true
	}
	lim, ok := r.Limits[name]
	return lim, ok
}

// guaranteed reports whether pod is of the Guaranteed class through its
// containers' resources; with pod-level resources those alone decide.
func guaranteed(pod *corev1.Pod) bool {
	return !podLevelResourcesSet(pod) && containersQOS(pod) == corev1.PodQOSGuaranteed
}

// QOSClass returns the QoS class the apiserver computes for pod from its
// containers' resources, and false when pod-level resources set it instead,
// which no container's resources change.
func QOSClass(pod *corev1.Pod) (corev1.PodQOSClass, bool) {
	if podLevelResourcesSet(pod) {
		return "", false
	}
	return containersQOS(pod), true
}
