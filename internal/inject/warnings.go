package inject

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// SetWarnings returns the warnings about set that hold whatever pod it goes
// into, each starting with the path of the field it is about:
//
//   - a container (or init container) with no resource requests or limits
//     and no resourcesPolicy to compute them: the scheduler reserves
//     nothing for it and nothing caps what it uses, unless a pod it goes
//     into declares pod-level resources;
//   - an image by tag rather than digest (no "@"): a re-pushed tag makes pods
//     of one revision run different images;
//   - a HotUpgrade sidecar without an exec readiness probe: the old
//     container gets the empty image once the new one is Ready, and only a
//     probe that runs in the container can say it has taken over (one on
//     the pod's network is answered by whichever container listens);
//   - any other sidecar that keeps running (a container, or an init
//     container with restartPolicy Always) without a readiness probe: it is
//     Ready as soon as it runs, so only updateStrategy.minReadySeconds
//     keeps a rollout of an image that fails soon after it starts within
//     maxUnavailable;
//   - a container, or the set's volumes, that Pod Security "baseline"
//     forbids (privileged, added capabilities, host ports, hostPath, ...):
//     pods in namespaces that enforce baseline or restricted are left
//     without the set (skipped), as the apiserver would refuse them.
//
// Worked case: a set declaring container proxy (envoy:1, no resources) and
// native sidecar mesh-init (mesh@sha256:..., with requests) gives
//
//	spec.containers[0].resources: container "proxy" has no resource requests or limits: ...
//	spec.containers[0].image: image "envoy:1" of container "proxy" is a tag, not a digest (@sha256:...): ...
//	spec.containers[0].readinessProbe: container "proxy" has no readiness probe: ...
//	spec.initContainers[0].readinessProbe: container "mesh-init" has no readiness probe: ...
//
// These are the validating webhook's to give, when the set is created or
// what it puts into pods changes: given on every pod create they would reach
// only the pod's creator, often a controller that logs them for every pod
// it makes. Inject warns only about what depends on the pod (see the
// package documentation).
func SetWarnings(set *v1alpha1.SidecarSet) []string {
	var out []string
	spec := field.NewPath("spec")
	minReady := ptr.Deref(set.Spec.UpdateStrategy.MinReadySeconds, v1alpha1.DefaultMinReadySeconds)
	for i := range set.Spec.Containers {
		path := spec.Child("containers").Index(i)
		out = appendContainerWarnings(out, path, &set.Spec.Containers[i], true, minReady)
		out = appendBaselineWarning(out, path, fmt.Sprintf("container %q", set.Spec.Containers[i].Name),
			&corev1.PodSpec{Containers: []corev1.Container{set.Spec.Containers[i].Container}})
	}
	for i := range set.Spec.InitContainers {
		sc := &set.Spec.InitContainers[i]
		runs := sc.RestartPolicy != nil && *sc.RestartPolicy == corev1.ContainerRestartPolicyAlways
		path := spec.Child("initContainers").Index(i)
		out = appendContainerWarnings(out, path, sc, runs, minReady)
		out = appendBaselineWarning(out, path, fmt.Sprintf("init container %q", sc.Name),
			&corev1.PodSpec{InitContainers: []corev1.Container{sc.Container}})
	}
	return appendBaselineWarning(out, spec.Child("volumes"), "the volumes", &corev1.PodSpec{Volumes: set.Spec.Volumes})
}

// appendBaselineWarning appends a warning about what, at path, when the pod
// spec made of it alone violates Pod Security "baseline".
func appendBaselineWarning(out []string, path *field.Path, what string, spec *corev1.PodSpec) []string {
	lv := psapi.LevelVersion{Level: psapi.LevelBaseline, Version: psapi.LatestVersion()}
	r := policy.AggregateCheckResults(podSecurityEvaluator().EvaluatePod(lv, &metav1.ObjectMeta{}, spec))
	if r.Allowed {
		return out
	}
	return append(out, fmt.Sprintf("%s: Pod Security %q forbids %s (%s): in namespaces that enforce baseline or restricted, where the apiserver would refuse such pods, the webhook leaves this SidecarSet out of them (skippedPods)",
		path, lv.String(), what, r.ForbiddenDetail()))
}

// appendContainerWarnings appends the warnings about sc, at path; runs: it
// keeps running once the pod started. minReady is the set's
// updateStrategy.minReadySeconds.
func appendContainerWarnings(out []string, path *field.Path, sc *v1alpha1.SidecarContainer, runs bool, minReady int32) []string {
	if len(sc.Resources.Requests) == 0 && len(sc.Resources.Limits) == 0 && sc.ResourcesPolicy == nil {
		out = append(out, fmt.Sprintf("%s: container %q has no resource requests or limits: the scheduler reserves nothing for it and nothing caps what it uses, unless the pod declares pod-level resources",
			path.Child("resources"), sc.Name))
	}
	if !strings.Contains(sc.Image, "@") {
		out = append(out, fmt.Sprintf("%s: image %q of container %q is a tag, not a digest (@sha256:...): a re-pushed tag makes pods of one revision run different images",
			path.Child("image"), sc.Image, sc.Name))
	}
	if sc.Hot() && (sc.ReadinessProbe == nil || sc.ReadinessProbe.Exec == nil) {
		out = append(out, fmt.Sprintf("%s: HotUpgrade container %q has no exec readiness probe: its old version gets the empty image as soon as the new one is Ready, which without a probe is when it starts, and which a probe over the pod's network cannot tell, as both containers share it; probe with a command that says this container serves",
			path.Child("readinessProbe"), sc.Name))
	} else if runs && sc.ReadinessProbe == nil && minReady > 0 {
		out = append(out, fmt.Sprintf("%s: container %q has no readiness probe: it is Ready as soon as it runs, so in a rollout only updateStrategy.minReadySeconds (%d) holds a pod whose new image fails soon after it starts; add a probe that says the sidecar serves",
			path.Child("readinessProbe"), sc.Name, minReady))
	} else if runs && sc.ReadinessProbe == nil {
		out = append(out, fmt.Sprintf("%s: container %q has no readiness probe: it is Ready as soon as it runs, and with updateStrategy.minReadySeconds 0 nothing holds a pod whose new image fails soon after it starts; add a probe that says the sidecar serves, or set minReadySeconds",
			path.Child("readinessProbe"), sc.Name))
	}
	return out
}
