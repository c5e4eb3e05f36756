// Package testutil builds pods, namespaces and SidecarSets for tests, so a
// test case reads as the few fields that matter to it:
//
//	pod := testutil.Pod("shop", "db-0").Labels(map[string]string{"app": "db"}).Container("db", "mysql:8").Obj()
//	set := testutil.SidecarSet("exporter").Selector(map[string]string{"app": "db"}).Container("exporter", "exp:1").Obj()
//
// Every builder method returns the builder; Obj returns a fresh object that
// shares nothing with the builder or with earlier Obj results.
package testutil

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// ContainerBuilder builds a corev1.Container.
type ContainerBuilder struct{ c corev1.Container }

// Container starts a container with a name and an image.
func Container(name, image string) *ContainerBuilder {
	return &ContainerBuilder{c: corev1.Container{Name: name, Image: image}}
}

// Requests sets the cpu and memory requests; an empty string leaves that
// resource out.
func (b *ContainerBuilder) Requests(cpu, memory string) *ContainerBuilder {
	b.c.Resources.Requests = resourceList(cpu, memory)
	return b
}

// Limits sets the cpu and memory limits; an empty string leaves that
// resource out.
func (b *ContainerBuilder) Limits(cpu, memory string) *ContainerBuilder {
	b.c.Resources.Limits = resourceList(cpu, memory)
	return b
}

// RestartAlways sets restartPolicy: Always, which makes an init container a
// native sidecar.
func (b *ContainerBuilder) RestartAlways() *ContainerBuilder {
	always := corev1.ContainerRestartPolicyAlways
	b.c.RestartPolicy = &always
	return b
}

// VolumeMount mounts the volume name at path.
func (b *ContainerBuilder) VolumeMount(name, path string) *ContainerBuilder {
	b.c.VolumeMounts = append(b.c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: path})
	return b
}

// Obj returns the container.
func (b *ContainerBuilder) Obj() corev1.Container {
	return *b.c.DeepCopy()
}

// Sidecar returns the container as a SidecarSet container with the given
// podInjectPolicy; an empty policy leaves the field unset.
func (b *ContainerBuilder) Sidecar(policy v1alpha1.PodInjectPolicy) v1alpha1.SidecarContainer {
	return v1alpha1.SidecarContainer{Container: b.Obj(), PodInjectPolicy: policy}
}

func resourceList(cpu, memory string) corev1.ResourceList {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		l[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return l
}

// PodBuilder builds a corev1.Pod.
type PodBuilder struct{ pod corev1.Pod }

// Pod starts a pod in namespace with name.
func Pod(namespace, name string) *PodBuilder {
	return &PodBuilder{pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}}
}

// Labels adds labels.
func (b *PodBuilder) Labels(labels map[string]string) *PodBuilder {
	b.pod.Labels = merged(b.pod.Labels, labels)
	return b
}

// Annotations adds annotations.
func (b *PodBuilder) Annotations(annotations map[string]string) *PodBuilder {
	b.pod.Annotations = merged(b.pod.Annotations, annotations)
	return b
}

// Container appends a container with a name and an image.
func (b *PodBuilder) Container(name, image string) *PodBuilder {
	return b.Containers(corev1.Container{Name: name, Image: image})
}

// Containers appends containers.
func (b *PodBuilder) Containers(cs ...corev1.Container) *PodBuilder {
	b.pod.Spec.Containers = append(b.pod.Spec.Containers, cs...)
	return b
}

// InitContainers appends init containers.
func (b *PodBuilder) InitContainers(cs ...corev1.Container) *PodBuilder {
	b.pod.Spec.InitContainers = append(b.pod.Spec.InitContainers, cs...)
	return b
}

// Volumes appends volumes.
func (b *PodBuilder) Volumes(vs ...corev1.Volume) *PodBuilder {
	b.pod.Spec.Volumes = append(b.pod.Spec.Volumes, vs...)
	return b
}

// ImagePullSecrets appends imagePullSecrets by name.
func (b *PodBuilder) ImagePullSecrets(names ...string) *PodBuilder {
	b.pod.Spec.ImagePullSecrets = append(b.pod.Spec.ImagePullSecrets, secretRefs(names)...)
	return b
}

// RestartPolicy sets the pod's restartPolicy.
func (b *PodBuilder) RestartPolicy(p corev1.RestartPolicy) *PodBuilder {
	b.pod.Spec.RestartPolicy = p
	return b
}

// Obj returns the pod.
func (b *PodBuilder) Obj() *corev1.Pod {
	return b.pod.DeepCopy()
}

// SidecarSetBuilder builds a v1alpha1.SidecarSet.
type SidecarSetBuilder struct{ set v1alpha1.SidecarSet }

// SidecarSet starts a SidecarSet named name. Its selector is unset, which
// selects no pod: call Selector.
func SidecarSet(name string) *SidecarSetBuilder {
	return &SidecarSetBuilder{set: v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// Named renames the set.
func (b *SidecarSetBuilder) Named(name string) *SidecarSetBuilder {
	b.set.Name = name
	return b
}

// Annotations adds annotations.
func (b *SidecarSetBuilder) Annotations(annotations map[string]string) *SidecarSetBuilder {
	b.set.Annotations = merged(b.set.Annotations, annotations)
	return b
}

// Selector sets spec.selector to match these labels.
func (b *SidecarSetBuilder) Selector(matchLabels map[string]string) *SidecarSetBuilder {
	return b.LabelSelector(&metav1.LabelSelector{MatchLabels: matchLabels})
}

// LabelSelector sets spec.selector as given, expressions included.
func (b *SidecarSetBuilder) LabelSelector(s *metav1.LabelSelector) *SidecarSetBuilder {
	b.set.Spec.Selector = s.DeepCopy()
	return b
}

// NamespaceSelector sets spec.namespaceSelector to match these labels.
func (b *SidecarSetBuilder) NamespaceSelector(matchLabels map[string]string) *SidecarSetBuilder {
	return b.NamespaceLabelSelector(&metav1.LabelSelector{MatchLabels: matchLabels})
}

// NamespaceLabelSelector sets spec.namespaceSelector as given.
func (b *SidecarSetBuilder) NamespaceLabelSelector(s *metav1.LabelSelector) *SidecarSetBuilder {
	b.set.Spec.NamespaceSelector = s.DeepCopy()
	return b
}

// Container appends a regular sidecar with a name and an image and no
// podInjectPolicy (which means BeforeAppContainer).
func (b *SidecarSetBuilder) Container(name, image string) *SidecarSetBuilder {
	return b.Containers(Container(name, image).Sidecar(""))
}

// HotContainer appends a regular sidecar upgraded hot, idling on
// emptyImage in its second slot.
func (b *SidecarSetBuilder) HotContainer(name, image, emptyImage string) *SidecarSetBuilder {
	sc := Container(name, image).Sidecar("")
	sc.UpgradeStrategy = &v1alpha1.UpgradeStrategy{UpgradeType: v1alpha1.HotUpgrade, HotUpgradeEmptyImage: emptyImage}
	return b.Containers(sc)
}

// Containers appends regular sidecars.
func (b *SidecarSetBuilder) Containers(cs ...v1alpha1.SidecarContainer) *SidecarSetBuilder {
	b.set.Spec.Containers = append(b.set.Spec.Containers, cs...)
	return b
}

// InitContainers appends init containers; give them RestartAlways for
// native sidecars.
func (b *SidecarSetBuilder) InitContainers(cs ...v1alpha1.SidecarContainer) *SidecarSetBuilder {
	b.set.Spec.InitContainers = append(b.set.Spec.InitContainers, cs...)
	return b
}

// Volumes appends volumes.
func (b *SidecarSetBuilder) Volumes(vs ...corev1.Volume) *SidecarSetBuilder {
	b.set.Spec.Volumes = append(b.set.Spec.Volumes, vs...)
	return b
}

// ImagePullSecrets appends imagePullSecrets by name.
func (b *SidecarSetBuilder) ImagePullSecrets(names ...string) *SidecarSetBuilder {
	b.set.Spec.ImagePullSecrets = append(b.set.Spec.ImagePullSecrets, secretRefs(names)...)
	return b
}

// CanaryOf marks the set as the canary of base (sidecarset.dev/canary
// "true", sidecarset.dev/canary-of base).
func (b *SidecarSetBuilder) CanaryOf(base string) *SidecarSetBuilder {
	return b.Annotations(map[string]string{v1alpha1.AnnotationCanary: "true", v1alpha1.AnnotationCanaryOf: base})
}

// Paused sets spec.injectionStrategy.paused.
func (b *SidecarSetBuilder) Paused() *SidecarSetBuilder {
	b.set.Spec.InjectionStrategy.Paused = true
	return b
}

// JobPods sets spec.jobPods.
func (b *SidecarSetBuilder) JobPods(p v1alpha1.JobPodsPolicy) *SidecarSetBuilder {
	b.set.Spec.JobPods = p
	return b
}

// MinReadySeconds sets spec.updateStrategy.minReadySeconds.
func (b *SidecarSetBuilder) MinReadySeconds(s int32) *SidecarSetBuilder {
	b.set.Spec.UpdateStrategy.MinReadySeconds = &s
	return b
}

// Obj returns the SidecarSet.
func (b *SidecarSetBuilder) Obj() *v1alpha1.SidecarSet {
	return b.set.DeepCopy()
}

// Namespace returns a namespace with a name and labels.
func Namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: merged(nil, labels)}}
}

// EmptyDirVolume returns an emptyDir volume named name.
func EmptyDirVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

// HostPathVolume returns a hostPath volume named name.
func HostPathVolume(name, path string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}
}

func secretRefs(names []string) []corev1.LocalObjectReference {
	refs := make([]corev1.LocalObjectReference, len(names))
	for i, n := range names {
		refs[i] = corev1.LocalObjectReference{Name: n}
	}
	return refs
}

// merged returns dst with src's entries added, allocating dst when needed so
// the caller's src map is never shared.
func merged(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]string, len(src))
	}
	maps.Copy(dst, src)
	return dst
}
