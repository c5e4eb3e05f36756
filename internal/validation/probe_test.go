package validation

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

func TestProbePod(t *testing.T) {
	withDevice := func(c corev1.Container, name string) corev1.Container {
		c.VolumeDevices = []corev1.VolumeDevice{{Name: name, DevicePath: "/dev/x"}}
		return c
	}
	withClaim := func(c corev1.Container, name string) corev1.Container {
		c.Resources.Claims = []corev1.ResourceClaim{{Name: name}}
		return c
	}
	optOut := map[string]string{v1alpha1.AnnotationInject: "false"}
	meta := metav1.ObjectMeta{Namespace: "sidecarset-system", GenerateName: ProbePodGenerateName, Annotations: optOut}
	cases := []struct {
		name string
		set  *v1alpha1.SidecarSet
		want *corev1.Pod
	}{{
		name: "the set's lists at their own indices, then stubs for what a pod would bring",
		set: testutil.SidecarSet("s").
			Containers(testutil.Container("exporter", "e").VolumeMount("conf", "/conf").VolumeMount("mysql", "/var/lib/mysql").Sidecar("")).
			InitContainers(v1alpha1.SidecarContainer{Container: withClaim(withDevice(testutil.Container("shipper", "s").RestartAlways().Obj(), "disk"), "gpu")}).
			Volumes(testutil.EmptyDirVolume("conf")).ImagePullSecrets("regcred").Obj(),
		want: &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{
			Containers:     []corev1.Container{testutil.Container("exporter", "e").VolumeMount("conf", "/conf").VolumeMount("mysql", "/var/lib/mysql").Obj()},
			InitContainers: []corev1.Container{withClaim(withDevice(testutil.Container("shipper", "s").RestartAlways().Obj(), "disk"), "gpu")},
			Volumes: []corev1.Volume{
				testutil.EmptyDirVolume("conf"),
				{Name: "disk", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "disk"}}},
				{Name: "mysql", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
			ResourceClaims:               []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("gpu")}},
			ImagePullSecrets:             []corev1.LocalObjectReference{{Name: "regcred"}},
			AutomountServiceAccountToken: ptr.To(false),
		}},
	}, {
		name: "init containers only: a placeholder after them",
		set:  testutil.SidecarSet("s").InitContainers(testutil.Container("shipper", "s").RestartAlways().Sidecar("")).Obj(),
		want: &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{
			Containers:                   []corev1.Container{{Name: probePlaceholder, Image: "registry.k8s.io/pause:3.10"}},
			InitContainers:               []corev1.Container{testutil.Container("shipper", "s").RestartAlways().Obj()},
			AutomountServiceAccountToken: ptr.To(false),
		}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ProbePod(tc.set, "sidecarset-system")); diff != "" {
				t.Errorf("ProbePod() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProbeErrors(t *testing.T) {
	set := testutil.SidecarSet("s").Containers(testutil.Container("exporter", "e").VolumeMount("mysql", "/m").Sidecar("")).
		InitContainers(testutil.Container("shipper", "s").RestartAlways().Sidecar("")).
		Volumes(testutil.EmptyDirVolume("conf")).ImagePullSecrets("regcred").Obj()
	cause := func(typ metav1.CauseType, path, msg string) metav1.StatusCause {
		return metav1.StatusCause{Type: typ, Field: path, Message: msg}
	}
	causes := []metav1.StatusCause{
		cause(metav1.CauseTypeFieldValueInvalid, "spec.containers[0].ports[0].containerPort", "Invalid value: 70000: must be between 1 and 65535, inclusive"),
		cause(metav1.CauseTypeFieldValueRequired, "spec.initContainers[0].image", "Required value"),
		cause(metav1.CauseType(field.ErrorTypeForbidden), "spec.initContainers[0].lifecycle.stopSignal", "Forbidden: may not be set without spec.os.name"),
		cause(metav1.CauseTypeFieldValueNotSupported, "spec.volumes[0].hostPath.type", `Unsupported value: "Dir": supported values: "Directory"`),
		cause(metav1.CauseTypeFieldValueInvalid, "spec.imagePullSecrets[0]", "Invalid value: x: only name may be set"),
		// Past the set's own: a stub volume, and the pod as a whole.
		cause(metav1.CauseTypeFieldValueInvalid, "spec.volumes[1].emptyDir", "Invalid value: x"),
		cause(metav1.CauseTypeFieldValueInvalid, "spec.containers[1].name", "Invalid value: x"),
		cause(metav1.CauseTypeFieldValueRequired, "spec.restartPolicy", "Required value"),
		cause("", "", "something else"),
	}
	gotErrs, gotOther := ProbeErrors(set, causes)
	want := []string{
		"spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
		"spec.initContainers[0].image: Required value",
		"spec.initContainers[0].lifecycle.stopSignal: Forbidden: may not be set without spec.os.name",
		`spec.volumes[0].hostPath.type: Unsupported value: "Dir": supported values: "Directory"`,
		"spec.imagePullSecrets[0]: Invalid value: x: only name may be set",
	}
	var got []string
	for _, e := range gotErrs {
		got = append(got, e.Error())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ProbeErrors() errors (-want +got):\n%s", diff)
	}
	if gotErrs[1].Type != field.ErrorTypeRequired {
		t.Errorf("type %s, want %s", gotErrs[1].Type, field.ErrorTypeRequired)
	}
	wantOther := []string{
		"spec.volumes[1].emptyDir: Invalid value: x",
		"spec.containers[1].name: Invalid value: x",
		"spec.restartPolicy: Required value",
		"something else",
	}
	if diff := cmp.Diff(wantOther, gotOther); diff != "" {
		t.Errorf("ProbeErrors() other causes (-want +got):\n%s", diff)
	}
}
