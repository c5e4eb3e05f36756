package inject

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

func mount(name, path string) corev1.VolumeMount {
	return corev1.VolumeMount{Name: name, MountPath: path}
}

func env(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

var on = &v1alpha1.SharePolicy{Type: v1alpha1.SharePolicyEnabled}

// TestWithApps mirrors the worked cases of share.go.
func TestWithApps(t *testing.T) {
	bidirectional := corev1.MountPropagationBidirectional
	// The package documentation's worked case.
	a := &corev1.Container{Name: "a",
		Env: []corev1.EnvVar{env("ZONE", "z1"), env("POD", "$(ZONE)-p"), env("OTHER", "o")},
		VolumeMounts: []corev1.VolumeMount{mount("logs", "/var/log"),
			{Name: "data", MountPath: "/data", SubPathExpr: "$(POD)"}},
		VolumeDevices: []corev1.VolumeDevice{{Name: "blk", DevicePath: "/dev/xvda"}}}
	b := &corev1.Container{Name: "b",
		VolumeMounts:  []corev1.VolumeMount{mount("cache", "/var/log/"), mount("tmp", "/tmp")},
		VolumeDevices: []corev1.VolumeDevice{{Name: "blk2", DevicePath: "/dev/xvda"}, {Name: "blk3", DevicePath: "/dev/xvdb"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0",
		Labels: map[string]string{"main": "a"}, Annotations: map[string]string{"empty": ""}}}
	pf := podFields{pod: pod, namespace: "shop"}

	tests := []struct {
		name     string
		sc       v1alpha1.SidecarContainer
		apps     []*corev1.Container
		want     corev1.Container
		warnings []string
	}{{
		name: "mounts: own path kept, first app container wins a path, subPathExpr env copied with what it refers to",
		sc: v1alpha1.SidecarContainer{Container: corev1.Container{Name: "s", VolumeMounts: []corev1.VolumeMount{mount("conf", "/tmp")}},
			ShareVolumePolicy: on},
		apps: []*corev1.Container{a, b},
		want: corev1.Container{Name: "s",
			Env: []corev1.EnvVar{env("ZONE", "z1"), env("POD", "$(ZONE)-p")},
			VolumeMounts: []corev1.VolumeMount{mount("conf", "/tmp"), mount("logs", "/var/log"),
				{Name: "data", MountPath: "/data", SubPathExpr: "$(POD)"}}},
	}, {
		name: "disabled shares nothing",
		sc:   v1alpha1.SidecarContainer{Container: corev1.Container{Name: "s"}, ShareVolumePolicy: &v1alpha1.SharePolicy{Type: v1alpha1.SharePolicyDisabled}},
		apps: []*corev1.Container{a, b},
		want: corev1.Container{Name: "s"},
	}, {
		name: "the sidecar's own variable is not copied over",
		sc: v1alpha1.SidecarContainer{Container: corev1.Container{Name: "s", Env: []corev1.EnvVar{env("POD", "mine")}},
			ShareVolumePolicy: on},
		apps: []*corev1.Container{a},
		want: corev1.Container{Name: "s",
			Env: []corev1.EnvVar{env("ZONE", "z1"), env("POD", "mine")},
			VolumeMounts: []corev1.VolumeMount{mount("logs", "/var/log"),
				{Name: "data", MountPath: "/data", SubPathExpr: "$(POD)"}}},
	}, {
		name: "a volume the sidecar uses as a device is not mounted; Bidirectional only into a privileged sidecar",
		sc: v1alpha1.SidecarContainer{Container: corev1.Container{Name: "s", VolumeDevices: []corev1.VolumeDevice{{Name: "logs", DevicePath: "/dev/l"}}},
			ShareVolumePolicy: on},
		apps: []*corev1.Container{{Name: "c", VolumeMounts: []corev1.VolumeMount{mount("logs", "/var/log"),
			{Name: "host", MountPath: "/host", MountPropagation: &bidirectional}}}},
		want: corev1.Container{Name: "s", VolumeDevices: []corev1.VolumeDevice{{Name: "logs", DevicePath: "/dev/l"}}},
	}, {
		name: "devices: first app container wins a path, not at a path the sidecar mounts",
		sc: v1alpha1.SidecarContainer{Container: corev1.Container{Name: "s", VolumeMounts: []corev1.VolumeMount{mount("x", "/dev/xvdb")}},
			ShareVolumeDevicePolicy: on},
		apps: []*corev1.Container{a, b},
		want: corev1.Container{Name: "s", VolumeMounts: []corev1.VolumeMount{mount("x", "/dev/xvdb")},
			VolumeDevices: []corev1.VolumeDevice{{Name: "blk", DevicePath: "/dev/xvda"}}},
	}, {
		name: "transferEnv by name and through a label, before the sidecar's own env",
		sc: v1alpha1.SidecarContainer{Container: corev1.Container{Name: "s", Env: []corev1.EnvVar{env("MINE", "$(OTHER)")}},
			TransferEnv: []v1alpha1.TransferEnvVar{
				{SourceContainerName: "b", EnvName: "NONE"},
				{SourceContainerNameFrom: &v1alpha1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['main']"}},
					EnvNames: []string{"OTHER", "ZONE"}},
				{SourceContainerName: "gone", EnvName: "ZONE"},
				{SourceContainerNameFrom: &v1alpha1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['empty']"}},
					EnvName: "ZONE"},
			}},
		apps: []*corev1.Container{a, b},
		want: corev1.Container{Name: "s", Env: []corev1.EnvVar{env("OTHER", "o"), env("ZONE", "z1"), env("MINE", "$(OTHER)")}},
		warnings: []string{
			`container "s" transferEnv[0]: app container "b" has no environment variable "NONE"; it is not copied`,
			`container "s" transferEnv[2]: the pod has no app container named "gone"; nothing copied`,
			`container "s" transferEnv[3]: fieldPath "metadata.annotations['empty']" is empty in the pod; nothing copied`,
		},
	}, {
		name: "a resourceFieldRef keeps naming the source container",
		sc:   v1alpha1.SidecarContainer{Container: corev1.Container{Name: "s"}, TransferEnv: []v1alpha1.TransferEnvVar{{SourceContainerName: "c", EnvName: "MEM"}}},
		apps: []*corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "MEM", ValueFrom: &corev1.EnvVarSource{
			ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}}}}},
		want: corev1.Container{Name: "s", Env: []corev1.EnvVar{{Name: "MEM", ValueFrom: &corev1.EnvVarSource{
			ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.memory"}}}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.sc.DeepCopy()
			got, warnings := withApps(&tt.sc, tt.apps, pf)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("container (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.warnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, &tt.sc); diff != "" {
				t.Errorf("the SidecarSet's container changed (-before +after):\n%s", diff)
			}
		})
	}
	if a.Env[2].ValueFrom != nil || len(a.VolumeMounts) != 2 {
		t.Errorf("an app container changed: %+v", a)
	}
}

func TestEnvRefs(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"plain", nil},
		{"$(A)", []string{"A"}},
		{"x/$(A)/$(B_2)", []string{"A", "B_2"}},
		{"$$(A)", nil},
		{"$$$(A)", []string{"A"}},
		{"$(A", nil},
		{"$", nil},
		{"$A", nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, envRefs(tt.in)); diff != "" {
			t.Errorf("envRefs(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestPodFieldValue(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0",
		Labels: map[string]string{"app.example.com/main": "db"}, Annotations: map[string]string{"main": "app"}}}
	tests := []struct {
		path, want string
		err        bool
	}{
		{"metadata.name", "db-0", false},
		{"metadata.namespace", "shop", false},
		{"metadata.labels['app.example.com/main']", "db", false},
		{"metadata.annotations['main']", "app", false},
		{"metadata.labels['missing']", "", true},
		{"metadata.labels[main]", "", true},
		{"metadata.labels['']", "", true},
		{"metadata.uid", "", true},
		{"spec.nodeName", "", true},
	}
	for _, tt := range tests {
		got, err := PodFieldValue(pod, "shop", tt.path)
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("PodFieldValue(%q) = %q, %v; want %q, error %v", tt.path, got, err, tt.want, tt.err)
		}
		if supported := PodFieldPathSupported(tt.path); supported != (tt.want != "" || tt.path == "metadata.labels['missing']") {
			t.Errorf("PodFieldPathSupported(%q) = %v", tt.path, supported)
		}
	}
}
