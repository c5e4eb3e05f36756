package testenv_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start(testenv.Options{ControllerManager: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the control plane:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop the control plane:", err)
		code = 1
	}
	os.Exit(code)
}

func TestPodThroughRealAPIServer(t *testing.T) {
	ctx := t.Context()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox:1.36"}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	got := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatalf("get pod: %v", err)
	}
	// The apiserver's defaulting ran: a real apiserver, not a fake.
	if got.UID == "" || got.Spec.Containers[0].TerminationMessagePath != "/dev/termination-log" {
		t.Errorf("pod not created and defaulted by the apiserver: uid %q, terminationMessagePath %q",
			got.UID, got.Spec.Containers[0].TerminationMessagePath)
	}
	if got.Status.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("status.qosClass = %q, want BestEffort", got.Status.QOSClass)
	}
}

func TestSidecarSetCRDInstalled(t *testing.T) {
	ctx := t.Context()
	set := &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "crd-check"},
		Spec: v1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: "exporter", Image: "exporter:1"}}},
		},
	}
	if err := env.Client.Create(ctx, set); err != nil {
		t.Fatalf("create SidecarSet: %v", err)
	}
	got := &v1alpha1.SidecarSet{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(set), got); err != nil {
		t.Fatalf("get SidecarSet: %v", err)
	}
	// Defaults come from the CRD's structural schema.
	if got.Spec.UpdateStrategy.Type != v1alpha1.RollingUpdateStrategy || got.Spec.DriftPolicy != v1alpha1.DriftReport ||
		ptr.Deref(got.Spec.RevisionHistoryLimit, -1) != 10 || got.Spec.Containers[0].PodInjectPolicy != v1alpha1.BeforeAppContainer {
		t.Errorf("CRD defaults not applied: %+v", got.Spec)
	}
}

func TestDeploymentPodsAppear(t *testing.T) {
	ctx := t.Context()
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
	if err := env.Client.Create(ctx, dep); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	// kube-controller-manager's deployment and replicaset controllers make
	// the pods; nothing here creates them.
	var pods corev1.PodList
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels(labels)); err != nil {
			return false, err
		}
		return len(pods.Items) == 3, nil
	})
	if err != nil {
		t.Fatalf("wait for 3 pods of deployment web: have %d: %v", len(pods.Items), err)
	}
	for _, p := range pods.Items {
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "ReplicaSet" {
			t.Errorf("pod %s owners = %v, want one ReplicaSet", p.Name, p.OwnerReferences)
		}
	}
}

// TestAPIServerRestart: what was written before a restart of the
// apiserver is there after it, and the clients made before it reach it
// again, as the administrator: same port, same certificates, same client
// CA, etcd untouched.
func TestAPIServerRestart(t *testing.T) {
	ctx := t.Context()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "before-restart"},
		Data:       map[string]string{"k": "v"},
	}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatalf("create ConfigMap: %v", err)
	}
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err == nil {
		t.Error("a Get succeeded while the apiserver was stopped")
	}
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	got := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil {
		t.Fatalf("get the ConfigMap after the restart: %v", err)
	}
	if got.Data["k"] != "v" || got.UID != cm.UID {
		t.Errorf("ConfigMap after the restart: uid %s data %v, want uid %s data %v", got.UID, got.Data, cm.UID, cm.Data)
	}
	// A user added before the restart is trusted after it.
	cfg, err := env.AddUser("restart-check", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "after-restart"}}); err != nil {
		t.Errorf("create a ConfigMap after the restart: %v", err)
	}
}
