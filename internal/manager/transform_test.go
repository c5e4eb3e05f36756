package manager

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSlimPod(t *testing.T) {
	native := corev1.ContainerRestartPolicyAlways
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "db-0", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 3,
			Labels: map[string]string{"app": "db", "sidecarset.dev/managed": "true"},
			Annotations: map[string]string{
				"sidecarset.dev/state":                             `{"a":{}}`,
				"sidecarset.dev/injected":                          "a",
				"state.sidecarset.dev/b":                           `{}`,
				"kubectl.kubernetes.io/last-applied-configuration": "{...}",
			},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			OwnerReferences: []metav1.OwnerReference{{Name: "db"}},
		},
		Spec: corev1.PodSpec{
			NodeName: "n1",
			InitContainers: []corev1.Container{{Name: "shipper", Image: "shipper:1", RestartPolicy: &native,
				Env: []corev1.EnvVar{{Name: "X", Value: "y"}}}},
			Containers: []corev1.Container{{Name: "mysql", Image: "mysql:8", Command: []string{"mysqld"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/mysql"}}}},
			Volumes: []corev1.Volume{{Name: "data"}},
		},
		Status: corev1.PodStatus{
			Phase:              corev1.PodRunning,
			ObservedGeneration: 2,
			PodIP:              "10.0.0.1",
			Conditions:         []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "mysql", Image: "mysql:8", ImageID: "sha256:1",
				ContainerID: "containerd://1", Ready: true, RestartCount: 2, State: running,
				LastTerminationState: running}},
		},
	}
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "db-0", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 3,
			Labels:      map[string]string{"app": "db", "sidecarset.dev/managed": "true"},
			Annotations: map[string]string{"sidecarset.dev/state": `{"a":{}}`, "sidecarset.dev/injected": "a", "state.sidecarset.dev/b": `{}`},
		},
		Spec: corev1.PodSpec{
			NodeName:       "n1",
			InitContainers: []corev1.Container{{Name: "shipper", Image: "shipper:1", RestartPolicy: &native}},
			Containers:     []corev1.Container{{Name: "mysql", Image: "mysql:8"}},
		},
		Status: corev1.PodStatus{
			Phase:              corev1.PodRunning,
			ObservedGeneration: 2,
			Conditions:         []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "mysql", Image: "mysql:8", ImageID: "sha256:1",
				ContainerID: "containerd://1", Ready: true, RestartCount: 2, State: running}},
		},
	}
	got, err := slimPod(full)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slimPod (-want +got):\n%s", diff)
	}
	if len(full.Annotations) != 4 || full.Spec.Volumes == nil {
		t.Errorf("slimPod changed its input")
	}
	other := &corev1.Namespace{}
	if got, _ := slimPod(other); got != other {
		t.Errorf("slimPod changed a non-pod")
	}
}
