//go:build e2e

// Package e2e runs the whole loop on a real node: a real kubelet, containerd
// and runc (internal/realnode) against a real apiserver. `make e2e` runs it,
// as root.
package e2e

import (
	"bytes"
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/internal/realnode"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

const (
	imageV1 = "sidecarset.test/busybox:v1"
	imageV2 = "sidecarset.test/busybox:v2"
)

// startNode starts an apiserver and a real node against it, stopped in
// that order's reverse when the test ends; their logs are printed if the
// test failed.
func startNode(t *testing.T) (*testenv.Env, *realnode.Node) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the end-to-end tests run a real kubelet, containerd and runc and need root: run `make e2e` as root")
	}
	logs := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane and node logs:\n%s", logs.String())
		}
	})
	start := time.Now()
	env, err := testenv.Start(testenv.Options{APIServerFlags: realnode.APIServerFlags(), Output: logs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	assets, err := testenv.Assets()
	if err != nil {
		t.Fatal(err)
	}
	node, err := realnode.Start(context.Background(), realnode.Options{
		Assets:     assets,
		KubeConfig: env.KubeConfig,
		Images:     []realnode.Image{{Ref: imageV1, Version: "v1"}, {Ref: imageV2, Version: "v2"}},
		Output:     logs,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		start := time.Now()
		if err := node.Stop(); err != nil {
			t.Error(err)
		}
		t.Logf("node stopped in %v", time.Since(start).Round(time.Millisecond))
	})
	t.Logf("control plane and node Ready in %v", time.Since(start).Round(time.Millisecond))
	return env, node
}

// TestOnlyChangedSidecarRestarts is the seed's experiment on a real
// kubelet: a pod with an app container and two sidecars; a new image for
// one sidecar restarts that container alone, in place.
func TestOnlyChangedSidecarRestarts(t *testing.T) {
	env, node := startNode(t)
	ctx := context.Background()
	c := env.Client

	container := func(name string) corev1.Container {
		return corev1.Container{Name: name, Image: imageV1, ImagePullPolicy: corev1.PullNever}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "seed"},
		Spec: corev1.PodSpec{
			NodeName:                      realnode.NodeName,
			DNSPolicy:                     corev1.DNSDefault,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers:                    []corev1.Container{container("app"), container("sidecar-a"), container("sidecar-b")},
		},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	before := waitPod(t, c, pod, func(p *corev1.Pod) bool { return allReady(p, imageV1) })
	if before.Status.PodIP == "" {
		t.Fatalf("pod %s is running without an IP", pod.Name)
	}

	patch := client.MergeFrom(before.DeepCopy())
	updated := before.DeepCopy()
	updated.Spec.Containers[1].Image = imageV2
	start := time.Now()
	if err := c.Patch(ctx, updated, patch); err != nil {
		t.Fatal(err)
	}
	after := waitPod(t, c, pod, func(p *corev1.Pod) bool {
		s := status(p, "sidecar-a")
		return s.Ready && s.ImageID == node.ImageIDs[imageV2]
	})
	t.Logf("sidecar-a running the new image after %v", time.Since(start).Round(time.Millisecond))

	if diff := cmp.Diff([]types.UID{before.UID}, []types.UID{after.UID}); diff != "" {
		t.Errorf("pod UID changed (-before +after):\n%s", diff)
	}
	if after.Status.PodIP != before.Status.PodIP {
		t.Errorf("pod IP changed from %s to %s", before.Status.PodIP, after.Status.PodIP)
	}
	type seen struct {
		ContainerID  string
		ImageID      string
		RestartCount int32
	}
	want := map[string]seen{}
	for _, s := range before.Status.ContainerStatuses {
		want[s.Name] = seen{s.ContainerID, s.ImageID, s.RestartCount}
	}
	got := map[string]seen{}
	for _, s := range after.Status.ContainerStatuses {
		got[s.Name] = seen{s.ContainerID, s.ImageID, s.RestartCount}
	}
	if got["sidecar-a"].ContainerID == want["sidecar-a"].ContainerID {
		t.Errorf("sidecar-a kept container %s: it was not restarted", want["sidecar-a"].ContainerID)
	}
	want["sidecar-a"] = seen{got["sidecar-a"].ContainerID, node.ImageIDs[imageV2], 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("containers after the patch (-want +got):\n%s", diff)
	}
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

func allReady(p *corev1.Pod, image string) bool {
	if len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, s := range p.Status.ContainerStatuses {
		if !s.Ready || s.Image != image {
			return false
		}
	}
	return true
}

func status(p *corev1.Pod, name string) corev1.ContainerStatus {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == name {
			return s
		}
	}
	return corev1.ContainerStatus{}
}

// syncBuffer collects the logs of several processes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
