package inject

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// The per-pod checks decide whether a set that matches can go into this pod
// without making its creation fail. Each returns why not, or "" when it can.
// They see the pod as built so far: its own containers and volumes plus those
// of the sets taken before, so two sets that clash with each other are caught
// too, and the later one (by name) is left out.

// missingVolume reports a volumeMount or volumeDevice of set's containers
// that names a volume neither spec nor set declares: the apiserver refuses
// such a pod (spec.containers[i].volumeMounts[j].name: Not found).
func missingVolume(spec *corev1.PodSpec, set *v1alpha1.SidecarSet) string {
	declared := func(name string) bool {
		has := func(v corev1.Volume) bool { return v.Name == name }
		return slices.ContainsFunc(spec.Volumes, has) || slices.ContainsFunc(set.Spec.Volumes, has)
	}
	for sc := range sidecarsOf(set) {
		for _, m := range sc.VolumeMounts {
			if !declared(m.Name) {
				return fmt.Sprintf("container %q mounts volume %q, which neither the pod nor the SidecarSet declares", sc.Name, m.Name)
			}
		}
		for _, d := range sc.VolumeDevices {
			if !declared(d.Name) {
				return fmt.Sprintf("container %q uses volume %q as a device, which neither the pod nor the SidecarSet declares", sc.Name, d.Name)
			}
		}
	}
	return ""
}

// boundPort is a port a running container declares.
type boundPort struct {
	container string
	port      corev1.ContainerPort
}

// portClash reports a port of set's containers that clashes with one of a
// container running beside it: the pod's own regular containers and native
// sidecars, and those of sets taken before (earlier), and set's own.
// Ordinary init containers run alone, one after another, and clash with no
// one.
//
// The containers of a pod share one network namespace, so two that declare
// the same containerPort and protocol cannot both listen on it: one of them
// fails (the apiserver only warns, "duplicate port definition"). Two equal
// hostPorts (same protocol, hostIPs equal or either unset) are refused by the
// apiserver among regular containers, and fail on the node otherwise. In a
// hostNetwork pod the network namespace is the node's and the apiserver
// refuses a regular container whose hostPort is set and differs from its
// containerPort.
func portClash(spec *corev1.PodSpec, earlier []sidecar, set *v1alpha1.SidecarSet) string {
	var bound []boundPort
	bind := func(c *corev1.Container) {
		for _, p := range c.Ports {
			bound = append(bound, boundPort{c.Name, p})
		}
	}
	for i := range spec.InitContainers {
		if running(&spec.InitContainers[i], true) {
			bind(&spec.InitContainers[i])
		}
	}
	for i := range spec.Containers {
		bind(&spec.Containers[i])
	}
	for _, s := range earlier {
		if running(s.container(), s.init) {
			bind(s.container())
		}
	}
	for sc, init := range sidecarsOf(set) {
		if !running(&sc.Container, init) {
			continue
		}
		for _, p := range sc.Ports {
			proto := cmp.Or(p.Protocol, corev1.ProtocolTCP)
			if spec.HostNetwork && !init && p.HostPort != 0 && p.HostPort != p.ContainerPort {
				return fmt.Sprintf("container %q port %d/%s has hostPort %d, but in a hostNetwork pod hostPort must equal containerPort", sc.Name, p.ContainerPort, proto, p.HostPort)
			}
			for _, b := range bound {
				if cmp.Or(b.port.Protocol, corev1.ProtocolTCP) != proto {
					continue
				}
				if b.port.ContainerPort == p.ContainerPort {
					return fmt.Sprintf("container %q port %d/%s is already declared by container %q, and the containers of a pod share one network namespace", sc.Name, p.ContainerPort, proto, b.container)
				}
				if p.HostPort != 0 && b.port.HostPort == p.HostPort && (p.HostIP == b.port.HostIP || p.HostIP == "" || b.port.HostIP == "") {
					return fmt.Sprintf("container %q hostPort %d/%s is already taken by container %q", sc.Name, p.HostPort, proto, b.container)
				}
			}
			bound = append(bound, boundPort{sc.Name, p})
		}
	}
	return ""
}

// running reports whether c keeps running beside the pod's containers: a
// regular container, or an init container with restartPolicy Always.
func running(c *corev1.Container, init bool) bool {
	return !init || c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// podSecurityEvaluator evaluates the Pod Security Standards as the
// apiserver's PodSecurity admission does, with the same checks.
var podSecurityEvaluator = sync.OnceValue(func() policy.Evaluator {
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		// The default checks are valid in every release.
		panic(fmt.Sprintf("pod security evaluator: %v", err))
	}
	return e
})

// podSecurityLevel is the level and version ns enforces, read from its
// pod-security.kubernetes.io/enforce and enforce-version labels as the
// apiserver reads them: a label that cannot be parsed means "restricted",
// and without labels a namespace is "privileged" (the apiserver's default
// unless its admission configuration says otherwise, which a webhook cannot
// see). nil ns (labels unknown) is "privileged" too: nothing to check
// against.
func podSecurityLevel(ns *corev1.Namespace) psapi.LevelVersion {
	var labels map[string]string
	if ns != nil {
		labels = ns.Labels
	}
	p, _ := psapi.PolicyToEvaluate(labels, psapi.Policy{
		Enforce: psapi.LevelVersion{Level: psapi.LevelPrivileged, Version: psapi.LatestVersion()},
	})
	return p.Enforce
}

// podSecurityViolation reports what in with the level lv forbids, when
// without passes it. with is the pod with a set's sidecars, without the pod
// as its creator sent it. A pod that fails the level on its own is refused
// by the apiserver anyway, or exempt from it (an exempt user, runtime class
// or namespace, which a webhook cannot see); either way its sidecars are not
// the cause, and nothing is reported.
func podSecurityViolation(lv psapi.LevelVersion, meta *metav1.ObjectMeta, without, with *corev1.PodSpec) string {
	if lv.Level == psapi.LevelPrivileged {
		return ""
	}
	e := podSecurityEvaluator()
	if r := policy.AggregateCheckResults(e.EvaluatePod(lv, meta, without)); !r.Allowed {
		return ""
	}
	r := policy.AggregateCheckResults(e.EvaluatePod(lv, meta, with))
	if r.Allowed {
		return ""
	}
	return fmt.Sprintf("the namespace enforces Pod Security %q, which the pod meets without this SidecarSet and violates with it: %s", lv.String(), r.ForbiddenDetail())
}
