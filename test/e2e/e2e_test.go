//go:build e2e

// Package e2e runs the whole loop on a real node: a real kubelet, containerd
// and runc (internal/realnode) against a real apiserver. `make e2e` runs it,
// as root.
package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/realnode"
	"github.com/sidecarset/sidecarset/internal/stack"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

const (
	imageV1 = "sidecarset.test/busybox:v1"
	imageV2 = "sidecarset.test/busybox:v2"
)

// startNode starts the whole stack on a real node, without simulated
// nodes; the node stops first, the control plane last. Their logs are
// printed if the test failed. On SIGINT or SIGTERM both stop, in that
// order, and the test binary exits non-zero.
func startNode(t *testing.T) (*stack.Stack, *realnode.Node) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the end-to-end tests run a real kubelet, containerd and runc and need root: run `make e2e` as root")
	}
	testenv.SetLogger()
	if err := realnode.RecoverLeftovers(); err != nil {
		t.Fatal(err)
	}
	if err := realnode.EnsurePackages(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs last: once everything has stopped.
	before := realnode.HostState()
	t.Cleanup(func() {
		if diff := cmp.Diff(before, realnode.HostState()); diff != "" {
			t.Errorf("the node left this behind on the machine (-before +after):\n%s", diff)
		}
	})
	logs := &fixture.Logs{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane and node logs:\n%s", logs.String())
		}
	})
	start := time.Now()
	sys, err := stack.Start(context.Background(), stack.Options{
		// For the default ServiceAccount, which the ServiceAccount
		// admission on a real node's apiserver requires of every pod.
		ControllerManager: true,
		RealNode:          true,
		RealImages: []realnode.Image{
			{Ref: imageV1, Version: "v1"},
			{Ref: imageV2, Version: "v2"},
			{Ref: exporterImage, Version: exporterVersion, Exporter: true},
		},
		Output: logs,
	})
	if err != nil {
		t.Fatal(err)
	}
	stopSys := fixture.OnInterrupt(sys.Stop)
	t.Cleanup(func() {
		start := time.Now()
		if err := stopSys(); err != nil {
			t.Error(err)
		}
		t.Logf("node and control plane stopped in %v", time.Since(start).Round(time.Millisecond))
	})
	t.Logf("node, control plane and manager up in %v", time.Since(start).Round(time.Millisecond))
	node := sys.Node
	return sys, node
}

// TestOnlyChangedSidecarRestarts is the seed's experiment on a real
// kubelet: a pod with an app container and two injected sidecars; a
// SidecarSet rollout of a new image for one sidecar restarts that container
// alone, in place.
func TestOnlyChangedSidecarRestarts(t *testing.T) {
	sys, node := startNode(t)
	ctx := context.Background()
	c := sys.Env.Client

	labels := map[string]string{"app": "seed"}
	// Each sidecar logs the version its image holds, so that its logs,
	// fetched from the kubelet through the apiserver, say what runs.
	sidecar := func(name string) v1alpha1.SidecarContainer {
		return v1alpha1.SidecarContainer{Container: corev1.Container{
			Name:            name,
			Image:           imageV1,
			ImagePullPolicy: corev1.PullNever,
			Command:         []string{"/bin/sh", "-c", "cat /version; trap 'exit 0' TERM; sleep 2147483647 & wait"},
		}}
	}
	set := &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "seed"},
		Spec: v1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: labels},
			Containers: []v1alpha1.SidecarContainer{sidecar("sidecar-a"), sidecar("sidecar-b")},
		},
	}
	if err := c.Create(ctx, set); err != nil {
		t.Fatal(err)
	}
	if err := testenv.WaitObserved(ctx, c, set.Name); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "seed", Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:                      realnode.NodeName,
			DNSPolicy:                     corev1.DNSDefault,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers:                    []corev1.Container{{Name: "app", Image: imageV1, ImagePullPolicy: corev1.PullNever}},
		},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	before := waitPod(t, c, pod, func(p *corev1.Pod) bool { return allReady(p, imageV1, 3) })
	if before.Status.PodIP == "" {
		t.Fatalf("pod %s is running without an IP", pod.Name)
	}

	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(set), set); err != nil {
			return false, err
		}
		set.Spec.Containers[0].Image = imageV2
		err := c.Update(ctx, set)
		return err == nil, ignoreConflict(err)
	})
	if err != nil {
		t.Fatalf("update SidecarSet: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(set), set); err != nil {
			return false, err
		}
		s := set.Status
		return s.ObservedGeneration >= set.Generation && s.MatchedPods == 1 && s.UpdatedPods == 1 && s.UpdatedReadyPods == 1, nil
	})
	if err != nil {
		t.Fatalf("wait for the rollout to complete: %v; status %+v", err, set.Status)
	}
	t.Logf("rollout complete after %v", time.Since(start).Round(time.Millisecond))
	after := waitPod(t, c, pod, func(*corev1.Pod) bool { return true })

	if after.UID != before.UID {
		t.Errorf("pod UID changed from %s to %s", before.UID, after.UID)
	}
	if after.Status.PodIP != before.Status.PodIP {
		t.Errorf("pod IP changed from %s to %s", before.Status.PodIP, after.Status.PodIP)
	}
	// The sandbox stays: the kubelet turns PodReadyToStartContainers False
	// when the pod's sandbox is gone, and records SandboxChanged when it
	// makes a new one.
	sandbox := func(p *corev1.Pod) corev1.PodCondition {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReadyToStartContainers {
				return c
			}
		}
		return corev1.PodCondition{}
	}
	if b, a := sandbox(before), sandbox(after); a.Status != corev1.ConditionTrue || !a.LastTransitionTime.Equal(&b.LastTransitionTime) {
		t.Errorf("PodReadyToStartContainers %s since %v, before %s since %v: the sandbox was replaced", a.Status, a.LastTransitionTime, b.Status, b.LastTransitionTime)
	}
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(pod.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.InvolvedObject.UID == pod.UID && e.Reason == "SandboxChanged" {
			t.Errorf("event %s: %s", e.Reason, e.Message)
		}
	}
	type seen struct {
		Image        string
		ContainerID  string
		ImageID      string
		RestartCount int32
		Ready        bool
	}
	observe := func(p *corev1.Pod) map[string]seen {
		m := map[string]seen{}
		for _, s := range p.Status.ContainerStatuses {
			m[s.Name] = seen{s.Image, s.ContainerID, s.ImageID, s.RestartCount, s.Ready}
		}
		return m
	}
	cs, err := kubernetes.NewForConfig(sys.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "sidecar-a"}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of sidecar-a: %v", err)
	}
	if string(logs) != "v2\n" {
		t.Errorf("sidecar-a logged %q, want the new image's version %q", logs, "v2\n")
	}

	want, got := observe(before), observe(after)
	if got["sidecar-a"].ContainerID == want["sidecar-a"].ContainerID {
		t.Errorf("sidecar-a kept container %s: it was not restarted", want["sidecar-a"].ContainerID)
	}
	want["sidecar-a"] = seen{imageV2, got["sidecar-a"].ContainerID, node.ImageIDs[imageV2], 1, true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("containers after the rollout (-want +got):\n%s", diff)
	}
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// waitPod polls the pod until done holds and returns it.
func waitPod(t *testing.T, c client.Client, pod *corev1.Pod, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	got := &corev1.Pod{}
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			return false, err
		}
		return done(got), nil
	})
	if err != nil {
		t.Fatalf("wait for pod %s: %v; its status: %+v", pod.Name, err, got.Status)
	}
	return got
}

// allReady says whether the pod runs n containers, all Ready on image.
func allReady(p *corev1.Pod, image string, n int) bool {
	if len(p.Status.ContainerStatuses) != n {
		return false
	}
	for _, s := range p.Status.ContainerStatuses {
		if !s.Ready || s.Image != image {
			return false
		}
	}
	return true
}
