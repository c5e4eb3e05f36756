package rollout

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

// TestClassifyShared: a sidecar injected with the app's mounts and
// variables (shareVolumePolicy, transferEnv) differs in the pod from the
// set's declaration, but upgradability is judged on the set's revisions,
// so a new image stays in place; a change of the policy itself is a change
// beyond the image.
func TestClassifyShared(t *testing.T) {
	shared := func(image string) *v1alpha1.SidecarSet {
		set := testSet(image)
		set.Spec.Containers[0].ShareVolumePolicy = &v1alpha1.SharePolicy{Type: v1alpha1.SharePolicyEnabled}
		set.Spec.Containers[0].TransferEnv = []v1alpha1.TransferEnvVar{{SourceContainerName: "mysql", EnvName: "MYSQL_PORT"}}
		return set
	}
	v1 := shared("exporter:v1")
	app := testutil.Container("mysql", "mysql:8").VolumeMount("data", "/var/lib/mysql").Obj()
	app.Env = []corev1.EnvVar{{Name: "MYSQL_PORT", Value: "3306"}}
	pod := testutil.Pod(testNS, "p01").Labels(map[string]string{"app": "db"}).Containers(app).
		Volumes(corev1.Volume{Name: "data"}).Obj()
	res := inject.Inject(pod, nil, []*v1alpha1.SidecarSet{v1}, inject.Options{})
	if len(res.Injected) != 1 {
		t.Fatalf("not injected: %v", res.Warnings)
	}
	pod = res.Pod
	var exporter corev1.Container
	for _, c := range pod.Spec.Containers {
		if c.Name == "exporter" {
			exporter = c
		}
	}
	if len(exporter.VolumeMounts) == 0 || len(exporter.Env) == 0 {
		t.Fatalf("the exporter took nothing from the app: %+v", exporter)
	}

	if p := Classify(pod, record(pod), NewLatest(shared("exporter:v2"))); !p.Upgradable {
		t.Errorf("a new image over a sidecar with the app's mounts and env is not upgradable")
	}
	off := shared("exporter:v2")
	off.Spec.Containers[0].ShareVolumePolicy.Type = v1alpha1.SharePolicyDisabled
	if p := Classify(pod, record(pod), NewLatest(off)); p.Upgradable {
		t.Errorf("turning shareVolumePolicy off is upgradable in place; the mounts cannot leave a running pod")
	}
}
