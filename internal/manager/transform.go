package manager

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/internal/revision"
)

// slimPod keeps, of a managed pod in the cache, only what the controller
// reads: identity, labels, this project's annotations (the per-set records too), the generation and
// the generation the kubelet observed (completion rests on them), each
// container's name and image, phase, conditions and container statuses. A
// cached pod then
// costs a fraction of its full size, which is what lets one manager hold
// tens of thousands of managed pods.
//
// Dropping fields is safe for writes: every pod write is a patch computed
// against the cached object (strategic merge, or JSON merge for the
// annotations), so a field absent from both sides never appears in it.
// Adoption, which compares whole containers, reads the pod from the
// apiserver, not from the cache.
func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Generation:        pod.Generation,
			CreationTimestamp: pod.CreationTimestamp,
			DeletionTimestamp: pod.DeletionTimestamp,
			Labels:            pod.Labels,
			Annotations:       ownAnnotations(pod.Annotations),
		},
		Spec: corev1.PodSpec{
			NodeName:       pod.Spec.NodeName,
			InitContainers: slimContainers(pod.Spec.InitContainers),
			Containers:     slimContainers(pod.Spec.Containers),
		},
		Status: corev1.PodStatus{
			ObservedGeneration:    pod.Status.ObservedGeneration,
			Phase:                 pod.Status.Phase,
			Conditions:            pod.Status.Conditions,
			InitContainerStatuses: slimStatuses(pod.Status.InitContainerStatuses),
			ContainerStatuses:     slimStatuses(pod.Status.ContainerStatuses),
		},
	}
	return slim, nil
}

func ownAnnotations(in map[string]string) map[string]string {
	var out map[string]string
	for k, v := range in {
		// The policy path writes each set's record under its own key
		// (revision.PerSetPrefix).
		if strings.HasPrefix(k, "sidecarset.dev/") || strings.HasPrefix(k, revision.PerSetPrefix) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

func slimContainers(in []corev1.Container) []corev1.Container {
	if in == nil {
		return nil
	}
	out := make([]corev1.Container, len(in))
	for i, c := range in {
		// RestartPolicy tells a native sidecar from an init container.
		out[i] = corev1.Container{Name: c.Name, Image: c.Image, RestartPolicy: c.RestartPolicy}
	}
	return out
}

func slimStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if in == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, s := range in {
		out[i] = corev1.ContainerStatus{
			Name:         s.Name,
			Image:        s.Image,
			ImageID:      s.ImageID,
			ContainerID:  s.ContainerID,
			Ready:        s.Ready,
			Started:      s.Started,
			RestartCount: s.RestartCount,
			State:        s.State,
		}
	}
	return out
}
