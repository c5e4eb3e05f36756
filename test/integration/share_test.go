package integration

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/examples"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// TestShareVolumesAndTransferEnv: the example's SidecarSet, through the
// validating webhook, injects a sidecar that gets the app's volume mount
// (with the variable its subPathExpr needs) and the variable transferEnv
// names; a new image then goes into those pods in place, the shared mounts
// not making them not upgradable.
func TestShareVolumesAndTransferEnv(t *testing.T) {
	const pods = 2
	f := newFixture(t)
	b, err := examples.SidecarSets.ReadFile("sidecarsets/share-volumes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	set := &v1alpha1.SidecarSet{}
	if err := yaml.UnmarshalStrict(b, set); err != nil {
		t.Fatalf("decode the example: %v", err)
	}
	set.Name = f.Set
	set.Spec.Selector = &metav1.LabelSelector{MatchLabels: f.Labels}
	shipper := &set.Spec.Containers[0]
	shipper.Image = "exporter:v1"
	f.CreateSet(set)

	for _, name := range []string{"p01", "p02"} {
		pod := f.NewPod(name)
		pod.Labels["example.com/main-container"] = fixture.AppContainer
		app := &pod.Spec.Containers[0]
		app.Env = []corev1.EnvVar{
			{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "LOG_FORMAT", Value: "json"},
		}
		app.VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/var/log/mysql", SubPathExpr: "$(POD)"}}
		pod.Spec.Volumes = []corev1.Volume{{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		f.CreatePod(pod)
	}
	f.WaitReady(pods)
	before := fixture.AppIDs(f.Pods())
	for _, p := range f.Pods() {
		var got *corev1.Container
		for i := range p.Spec.Containers {
			if p.Spec.Containers[i].Name == shipper.Name {
				got = &p.Spec.Containers[i]
			}
		}
		if got == nil {
			t.Fatalf("pod %s has no container %s", p.Name, shipper.Name)
		}
		app := p.Spec.Containers[0]
		wantEnv := []corev1.EnvVar{app.Env[1], app.Env[0]}
		if diff := cmp.Diff(wantEnv, got.Env); diff != "" {
			t.Errorf("pod %s sidecar env (-want +got):\n%s", p.Name, diff)
		}
		if diff := cmp.Diff(app.VolumeMounts[:1], got.VolumeMounts); diff != "" {
			t.Errorf("pod %s sidecar volumeMounts (-want +got):\n%s", p.Name, diff)
		}
	}
	f.WaitComplete(pods)

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	st := f.WaitComplete(pods)
	if st.NotUpgradablePods != 0 {
		t.Errorf("status %+v: want no pod not upgradable", st)
	}
	for _, p := range f.Pods() {
		if img := fixture.Image(&p, shipper.Name); img != "exporter:v2" {
			t.Errorf("pod %s %s = %s, want exporter:v2", p.Name, shipper.Name, img)
		}
	}
	f.AssertAppsUntouched(before)
}
