package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/status"
)

// TestPodOnLostNode: a pod whose node is not Ready (its kubelet gone; the
// pod Running and not Ready) is not written, neither counted nor waited on:
// the rest of the rollout goes on, nothing stalls or pauses, and the set
// says what is left. Once the node is Ready again the pod is written.
func TestPodOnLostNode(t *testing.T) {
	simulatedOnly(t, "a node object no kubelet serves")
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 0)
	set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromInt32(1))
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = new(int32(3))
	f.CreateSet(set)
	f.CreatePods(2, nil, nil)

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "lost-" + f.NS}}
	if err := f.Client.Create(f.T.Context(), node); err != nil {
		t.Fatalf("create node: %v", err)
	}
	t.Cleanup(func() { _ = f.Client.Delete(context.Background(), node) })
	setNodeReady := func(ready corev1.ConditionStatus) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := f.Client.Get(f.T.Context(), client.ObjectKeyFromObject(node), node); err != nil {
				return err
			}
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: "Test",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
			return f.Client.Status().Update(f.T.Context(), node)
		})
		if err != nil {
			t.Fatalf("update node status: %v", err)
		}
	}
	setNodeReady(corev1.ConditionUnknown)
	lost := f.NewPod("p03")
	f.C.FitPod(&lost.Spec)
	lost.Spec.NodeName = node.Name
	if err := f.Client.Create(f.T.Context(), lost); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	// As its kubelet last reported it, before the node was lost: running,
	// and marked not ready since.
	now := metav1.Now()
	lost.Status = corev1.PodStatus{Phase: corev1.PodRunning, ObservedGeneration: lost.Generation,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now}}}
	for _, c := range lost.Spec.Containers {
		lost.Status.ContainerStatuses = append(lost.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			ImageID: "sha256:0000000000000000000000000000000000000000000000000000000000000000", ContainerID: "containerd://" + c.Name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
	if err := f.Client.Status().Update(f.T.Context(), lost); err != nil {
		t.Fatalf("update pod status: %v", err)
	}
	f.WaitStatus("all matched, two ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == 3 && s.UpdatedReadyPods == 2
	})

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	st := f.WaitStatus("the two pods on live nodes updated, the third left", func(s v1alpha1.SidecarSetStatus) bool {
		c := fixture.SetCondition(s, v1alpha1.ConditionComplete)
		return s.UpdatedReadyPods == 2 && c != nil && c.Reason == status.ReasonPodsOnLostNodes
	})
	if msg := fixture.SetCondition(st, v1alpha1.ConditionComplete).Message; !strings.Contains(msg, "1 on nodes that are not Ready") {
		t.Errorf("Complete's message %q does not count the pod on the lost node", msg)
	}
	// Past progressDeadlineSeconds: no stall, no pause, no write.
	time.Sleep(4 * time.Second)
	got := f.GetSet()
	if got.Spec.UpdateStrategy.Paused || fixture.Condition(got.Status, v1alpha1.ConditionStalled) == metav1.ConditionTrue {
		t.Errorf("paused %v, Stalled %s: a pod on a lost node stalled the rollout", got.Spec.UpdateStrategy.Paused,
			fixture.Condition(got.Status, v1alpha1.ConditionStalled))
	}
	for _, p := range f.Pods() {
		if p.Name == "p03" && fixture.Image(&p, "exporter") != "exporter:v1" {
			t.Errorf("p03 on the lost node was written: exporter %s", fixture.Image(&p, "exporter"))
		}
	}

	setNodeReady(corev1.ConditionTrue)
	f.WaitPods("p03 written once its node is back", func(ps []corev1.Pod) bool {
		for _, p := range ps {
			if p.Name == "p03" {
				return fixture.Image(&p, "exporter") == "exporter:v2"
			}
		}
		return false
	})
}
