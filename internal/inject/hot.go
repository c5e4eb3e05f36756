package inject

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// A HotUpgrade sidecar NAME goes into a pod as two containers, NAME-1 and
// NAME-2 (v1alpha1.HotSlots), equal but for the name and the image: NAME-1
// runs the declared image and serves, NAME-2 idles on the
// hotUpgradeEmptyImage. Both keep the declared probes and hooks, so the
// empty image must pass them, as OpenKruise asks of it too. Each gets
// SIDECARSET_VERSION and SIDECARSET_VERSION_ALT, read through the downward
// API from the pod annotations the record's versions are written to
// (revision.HotVersions): NAME-1 starts as version 1 beside the empty 0.

// appendSlots appends s to out, or its two slots when it is a HotUpgrade
// sidecar.
func appendSlots(out []sidecar, s sidecar) []sidecar {
	if !s.c.Hot() {
		return append(out, s)
	}
	base := &s.c.Container
	if s.built != nil {
		base = s.built
	}
	for slot := 1; slot <= 2; slot++ {
		t := s
		t.slot = slot
		t.built = slotContainer(base, s.c, slot)
		out = append(out, t)
	}
	return out
}

// slotContainer returns a copy of c, built from the declared sc, as slot 1
// or 2 of the HotUpgrade sidecar: its name, its image (the empty image in
// slot 2), and the version variables. The rest is shared with c
// (Result.Pod), the environment excepted.
func slotContainer(c *corev1.Container, sc *v1alpha1.SidecarContainer, slot int) *corev1.Container {
	out := *c
	out.Name = v1alpha1.HotSlots(sc.Name)[slot-1]
	if slot == 2 {
		out.Image = sc.UpgradeStrategy.HotUpgradeEmptyImage
	}
	out.Env = append(make([]corev1.EnvVar, 0, len(c.Env)+2), c.Env...)
	out.Env = append(out.Env,
		annotationEnv(v1alpha1.EnvHotVersion, v1alpha1.AnnotationHotVersionPrefix+out.Name),
		annotationEnv(v1alpha1.EnvHotVersionAlt, v1alpha1.AnnotationHotVersionAltPrefix+out.Name))
	return &out
}

func annotationEnv(name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.annotations['" + key + "']"},
	}}
}

// hotRecords returns the records of the two slots of sc, as injected.
func hotRecords(sc *v1alpha1.SidecarContainer, init bool) []revision.ContainerState {
	slots := v1alpha1.HotSlots(sc.Name)
	return []revision.ContainerState{
		{Name: slots[0], Init: init, Image: sc.Image, Hot: &revision.HotSlot{Of: sc.Name, Version: 1}},
		{Name: slots[1], Init: init, Image: sc.UpgradeStrategy.HotUpgradeEmptyImage, Hot: &revision.HotSlot{Of: sc.Name, Version: 0}},
	}
}

// hotAnnotations writes the version annotations of sc's slots, as
// injected, into the pod.
func (b *builder) hotAnnotations(sc *v1alpha1.SidecarContainer) {
	if b.pod.Annotations == nil {
		b.pod.Annotations = map[string]string{}
	}
	for k, v := range revision.HotVersions(hotRecords(sc, false)) {
		b.pod.Annotations[k] = v
	}
}
