// Package adopt decides whether a SidecarSet with adoptionPolicy SameName
// takes over a running pod that already runs its sidecars (one injected by
// OpenKruise, or by hand), and writes the record it then gets, without a
// restart. It never reads or writes the cluster.
package adopt

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/validation"
)

// serviceAccountMountPath is where admission mounts the ServiceAccount token.
const serviceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// OpenKruise's injection marks: its webhook sets IS_INJECTED=true in every
// container it injects, and records each in kruise.io/sidecarset-hash.
const (
	KruiseInjectedEnv      = "IS_INJECTED"
	KruiseHashAnnotation   = "kruise.io/sidecarset-hash"
	kruiseInjectedEnvValue = "true"
)

// Adoptable reports whether set, with adoptionPolicy SameName, may take
// over pod, which its selectors match and which carries no record of it:
// every declared sidecar has a container of its name, in the list injection
// puts it into, equal to the declared one but for the image once both get
// the apiserver's defaults (defaulted), the ServiceAccount token mount
// ignored. Anything else admission added makes the pod not adoptable.
//
// What OpenKruise adds on injection is ignored too (withoutKruiseAdditions),
// so a set converted from Kruise's takes over its pods without restarting
// them, and so are the resources of a resourcesPolicy. Never adoptable: a
// pod of a set with a HotUpgrade sidecar (no record could tell its slots'
// versions), one that opted out, one whose state annotation does not
// decode, and one where another set's record claims one of these names.
func Adoptable(pod *corev1.Pod, set *v1alpha1.SidecarSet) bool {
	spec := &set.Spec
	if spec.AdoptionPolicy != v1alpha1.AdoptSameName || len(spec.Containers)+len(spec.InitContainers) == 0 {
		return false
	}
	if slices.ContainsFunc(spec.Containers, func(c v1alpha1.SidecarContainer) bool { return c.Hot() }) {
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
	var kruiseApps []corev1.Container
	if pod.Annotations[KruiseHashAnnotation] != "" {
		kruiseApps = kruiseAppContainers(pod, hostNetwork)
	}
	native := inject.NativeInPod(set, pod)
	for _, lists := range []struct {
		declared []v1alpha1.SidecarContainer
		inPod    []corev1.Container
		native   bool
	}{
		{spec.Containers, regularList(pod, native), native},
		{spec.InitContainers, pod.Spec.InitContainers, false},
	} {
		for _, d := range lists.declared {
			c, ok := byName(lists.inPod, d.Name)
			if lists.native {
				d.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
			}
			if !ok || claimed[d.Name] || !sameExceptImage(d.Container, c, d.ResourcesPolicy != nil, hostNetwork, kruiseApps) {
				return false
			}
		}
	}
	return true
}

// regularList returns the list of pod a set's regular containers go into:
// the init containers for native sidecars, the containers otherwise.
func regularList(pod *corev1.Pod, native bool) []corev1.Container {
	if native {
		return pod.Spec.InitContainers
	}
	return pod.Spec.Containers
}

// AdoptionRecord returns the record to write into a pod that Adoptable
// lets set take over: the set's spec with the pod's images, so the pod is
// simply not updated yet when they differ. PreviousImageID stays empty:
// the kubelet created the containers from this very spec.
func AdoptionRecord(pod *corev1.Pod, set *v1alpha1.SidecarSet) revision.SetState {
	spec := set.Spec.DeepCopy()
	native := inject.NativeInPod(set, pod)
	var containers []revision.ContainerState
	for i := range spec.Containers {
		if c, ok := byName(regularList(pod, native), spec.Containers[i].Name); ok {
			spec.Containers[i].Image = c.Image
		}
		containers = append(containers, revision.ContainerState{Name: spec.Containers[i].Name, Init: native, Image: spec.Containers[i].Image})
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

// sameExceptImage compares a declared sidecar with the pod's container of
// its name (Adoptable). computed: the sidecar has a resourcesPolicy.
// kruiseApps, non-nil in a pod Kruise injected, are its app containers.
func sameExceptImage(declared, inPod corev1.Container, computed, hostNetwork bool, kruiseApps []corev1.Container) bool {
	declared.Image = inPod.Image
	if computed {
		declared.Resources = inPod.Resources
	}
	want := defaulted(declared, hostNetwork)
	got := defaulted(inPod, hostNetwork)
	if !mountsAt(want, serviceAccountMountPath) {
		got.VolumeMounts = withoutMountAt(got.VolumeMounts, serviceAccountMountPath)
	}
	if kruiseApps != nil {
		got = withoutKruiseAdditions(want, got, kruiseApps)
	}
	// Quantities by value, nil and empty lists alike, as the apiserver does.
	return equality.Semantic.DeepEqual(want, got)
}

// withoutKruiseAdditions returns got without what OpenKruise's webhook
// appended to want when it injected it, or got as is when it does not look
// exactly so: IS_INJECTED=true right after the declared env, then only env
// vars, mounts and devices equal to an app container's, each naming what
// no entry before it names (a repeated name would override the declared).
//
// Worked cases, the declared exporter with env [POD], mounts [conf], app
// mysql with env [POD_IP, PORT] and mounts [data]:
//
//	env [POD, IS_INJECTED=true]                     → Kruise's: env [POD]
//	env [POD, IS_INJECTED=true, POD_IP]             → Kruise's (transferEnv)
//	env [POD, IS_INJECTED=true], mounts [conf data] → Kruise's (shareVolumePolicy)
//	env [POD, IS_INJECTED=true, DEBUG=1]            → not: DEBUG is no app's
//	env [IS_INJECTED=true, POD]                     → not: the mark is misplaced
//	env [POD, IS_INJECTED=false]                    → not: Kruise writes "true"
//	env [POD, IS_INJECTED=true, POD] (an app's POD) → not: it overrides the declared POD
func withoutKruiseAdditions(want, got corev1.Container, apps []corev1.Container) corev1.Container {
	n := len(want.Env)
	if len(got.Env) <= n || !isKruiseMark(got.Env[n]) {
		return got
	}
	extraEnv := got.Env[n+1:]
	extraMounts := got.VolumeMounts[min(len(want.VolumeMounts), len(got.VolumeMounts)):]
	extraDevices := got.VolumeDevices[min(len(want.VolumeDevices), len(got.VolumeDevices)):]
	for i, e := range extraEnv {
		if !slices.ContainsFunc(apps, func(a corev1.Container) bool { return containsSemantic(a.Env, e) }) ||
			slices.ContainsFunc(got.Env[:n+1+i], func(x corev1.EnvVar) bool { return x.Name == e.Name }) {
			return got
		}
	}
	firstMount := len(got.VolumeMounts) - len(extraMounts)
	for i, m := range extraMounts {
		if !slices.ContainsFunc(apps, func(a corev1.Container) bool { return containsSemantic(a.VolumeMounts, m) }) ||
			slices.ContainsFunc(got.VolumeMounts[:firstMount+i], func(x corev1.VolumeMount) bool { return x.MountPath == m.MountPath }) {
			return got
		}
	}
	firstDevice := len(got.VolumeDevices) - len(extraDevices)
	for i, d := range extraDevices {
		if !slices.ContainsFunc(apps, func(a corev1.Container) bool { return containsSemantic(a.VolumeDevices, d) }) ||
			slices.ContainsFunc(got.VolumeDevices[:firstDevice+i], func(x corev1.VolumeDevice) bool { return x.DevicePath == d.DevicePath }) {
			return got
		}
	}
	got.Env = got.Env[:n]
	got.VolumeMounts = got.VolumeMounts[:len(got.VolumeMounts)-len(extraMounts)]
	got.VolumeDevices = got.VolumeDevices[:len(got.VolumeDevices)-len(extraDevices)]
	return got
}

// kruiseAppContainers returns the pod's unmarked containers, defaulted.
func kruiseAppContainers(pod *corev1.Pod, hostNetwork bool) []corev1.Container {
	apps := []corev1.Container{}
	for _, c := range pod.Spec.Containers {
		if !slices.ContainsFunc(c.Env, isKruiseMark) {
			apps = append(apps, defaulted(c, hostNetwork))
		}
	}
	return apps
}

func isKruiseMark(e corev1.EnvVar) bool {
	return e.Name == KruiseInjectedEnv && e.Value == kruiseInjectedEnvValue && e.ValueFrom == nil
}

func containsSemantic[T any](list []T, v T) bool {
	return slices.ContainsFunc(list, func(x T) bool { return equality.Semantic.DeepEqual(x, v) })
}

// defaulted returns c with the defaults the apiserver gives a pod's
// container. It is idempotent, so the pod's containers go through it too,
// which keeps pods that never met an apiserver comparable.
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
