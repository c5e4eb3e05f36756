package testutil_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

func TestPod(t *testing.T) {
	b := testutil.Pod("shop", "db-0").Labels(map[string]string{"app": "db"}).Container("db", "mysql:8")
	first := b.Obj()
	first.Labels["app"] = "changed"
	first.Spec.Containers[0].Image = "changed"

	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-0", Labels: map[string]string{"app": "db"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "mysql:8"}}},
	}
	if diff := cmp.Diff(want, b.Obj()); diff != "" {
		t.Errorf("Obj() after changing an earlier Obj() (-want +got):\n%s", diff)
	}
}

func TestSidecarSet(t *testing.T) {
	got := testutil.SidecarSet("exporter").Selector(map[string]string{"app": "db"}).
		Container("exporter", "exp:1").
		InitContainers(testutil.Container("shipper", "fluent-bit:3.1").RestartAlways().Sidecar(v1alpha1.AfterAppContainer)).
		Obj()

	always := corev1.ContainerRestartPolicyAlways
	want := &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "exporter"},
		Spec: v1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: "exporter", Image: "exp:1"}}},
			InitContainers: []v1alpha1.SidecarContainer{{
				Container:       corev1.Container{Name: "shipper", Image: "fluent-bit:3.1", RestartPolicy: &always},
				PodInjectPolicy: v1alpha1.AfterAppContainer,
			}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Obj() (-want +got):\n%s", diff)
	}
}
