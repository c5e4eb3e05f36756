package realnode

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// FitPod fits a pod's spec to the node. A pod is bound to it from the start
// (it need not wait for kube-scheduler), every image is local (imagePullPolicy Never: a
// missing image never sends a pull off the machine), there is no cluster
// DNS, no service-account token, and containers get two seconds to stop.
func FitPod(spec *corev1.PodSpec) {
	if spec.NodeName == "" {
		spec.NodeName = NodeName
	}
	spec.DNSPolicy = corev1.DNSDefault
	spec.AutomountServiceAccountToken = ptr.To(false)
	spec.EnableServiceLinks = ptr.To(false)
	if spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds < 2 {
		spec.TerminationGracePeriodSeconds = ptr.To[int64](2)
	}
	for i := range spec.InitContainers {
		FitContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		FitContainer(&spec.Containers[i])
	}
}

// FitContainer makes a container use the node's local images only.
func FitContainer(c *corev1.Container) {
	c.ImagePullPolicy = corev1.PullNever
}
