package rollout

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/validation"
)

// serviceAccountMountPath is where the ServiceAccount admission plugin mounts
// the API token into every container that does not mount that path itself.
const serviceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// OpenKruise's injection marks. Its pod webhook appends the env var
// IS_INJECTED=true to every container it injects, and records every
// injection in the pod annotation kruise.io/sidecarset-hash; every release
// has written both.
const (
	KruiseInjectedEnv      = "IS_INJECTED"
	KruiseHashAnnotation   = "kruise.io/sidecarset-hash"
	kruiseInjectedEnvValue = "true"
)

// Adoptable reports whether set, with adoptionPolicy SameName, may take over
// pod: a pod its selectors match that carries no record of it (created
// before the set, or while the webhook was down). It may when, for every
// sidecar the set declares, the pod has a container of that name in the list
// injection puts it into (containers, or initContainers; in a Job's pod, with
// jobPods NativeSidecar, the regular containers as native sidecars in
// initContainers, see inject.NativeInPod) that equals the declared one, so
// placed, except for the image.
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
// A container OpenKruise injected is the same sidecar too when it differs
// only by what Kruise adds on injection (see withoutKruiseAdditions), so a
// SidecarSet converted from Kruise's takes over the pods Kruise injected
// without restarting them. Kruise's hot-upgrade containers (renamed NAME-1,
// NAME-2) are not the declared sidecar: those pods stay unmanaged, and so
// does every pod of a set with a HotUpgrade sidecar, whose slots' versions
// no record of a pod not injected by it could tell. The
// resources of a sidecar with a resourcesPolicy are not compared: they were
// computed for that pod at its injection, by Kruise or by another release
// of the set, and an in-place update leaves them as they are.
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

// regularList returns the list of pod that a set's regular containers go
// into: the init containers where they go in as native sidecars
// (inject.NativeInPod), the containers otherwise.
func regularList(pod *corev1.Pod, native bool) []corev1.Container {
	if native {
		return pod.Spec.InitContainers
	}
	return pod.Spec.Containers
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

// sameExceptImage compares a declared sidecar with a pod's container of the
// same name, as Adoptable documents. computed says the declared sidecar has
// a resourcesPolicy, so its resources are whatever the pod got. kruiseApps,
// non-nil only in a pod that carries Kruise's annotation, are the pod's app
// containers, defaulted.
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
	// Semantic equality compares quantities by value and treats nil and
	// empty lists alike, as the apiserver's round trip does.
	return equality.Semantic.DeepEqual(want, got)
}

// withoutKruiseAdditions returns got, a pod's container, without what
// OpenKruise's webhook added to the declared container want when it injected
// it, or got unchanged when it does not look exactly so. Kruise (the pod
// webhook in pkg/webhook/pod/mutating/sidecarset.go) builds the injected
// container from the declared one by appending, in this order:
//
//   - to env: IS_INJECTED=true, then the env vars transferEnv names and the
//     ones a shared mount's subPathExpr refers to, each copied from an app
//     container;
//   - to volumeMounts, with shareVolumePolicy enabled: the app containers'
//     mounts at paths the sidecar does not use;
//   - to volumeDevices, with shareVolumeDevicePolicy enabled: the app
//     containers' devices likewise.
//
// "App containers" are, as for Kruise, the pod's regular containers that do
// not carry the IS_INJECTED mark themselves. So got is taken as Kruise's
// when its env holds IS_INJECTED=true right after the declared env, and
// every entry after the mark, and after the declared mounts and devices,
// equals one of an app container and names what no entry before it names
// (Kruise skips an env var the sidecar already has, and a mount at a path
// it already uses: a repeated name would override the declared one). The
// declared part itself must still equal want: nothing else is tolerated.
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

// kruiseAppContainers returns the pod's regular containers that carry no
// IS_INJECTED mark, defaulted as the pod's sidecars are compared: the
// containers Kruise copies env vars, mounts and devices from.
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
