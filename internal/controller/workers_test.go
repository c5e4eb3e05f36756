package controller_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// TestWorkers: one SidecarSet whose reconcile hangs (here its unmanaged
// count, held at the apiserver) does not keep the others from being
// reconciled. Run with -race, it also has several sets reconciled at once
// over the Reconciler's shared memory.
func TestWorkers(t *testing.T) {
	ns := namespace(t)
	slow := "slow-" + ns
	held := make(chan struct{}, 1)
	release := make(chan struct{})
	reqs := newRequests()
	reqs.hold = func(req *http.Request) <-chan struct{} {
		if podRequest(req) != "LIST pods" || !strings.Contains(req.URL.RawQuery, slow) {
			return nil
		}
		select {
		case held <- struct{}{}:
		default:
		}
		return release
	}
	// Cleanups run last first: the held request is let go before the
	// manager waits for its reconciles to end.
	startController(t, reqs, ns)
	t.Cleanup(func() { close(release) })

	newSet := func(name string) *v1alpha1.SidecarSet {
		set := &v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: "c", Image: "c:1"}}},
		}}
		create(t, set)
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), set) })
		return set
	}
	newSet(slow)
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow set was never reconciled")
	}
	others := []string{"a-" + ns, "b-" + ns, "c-" + ns, "d-" + ns, "e-" + ns}
	for _, name := range others {
		newSet(name)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, name := range others {
			set := &v1alpha1.SidecarSet{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, set); err != nil {
				return false, err
			}
			if set.Status.ObservedGeneration != set.Generation {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("while one set's reconcile hangs, the others got no status (%d worker(s) by default): %v", controller.DefaultWorkers, err)
	}
}

// startController runs the SidecarSet controller, with its default
// workers, through reqs; revisions go to namespace.
func startController(t *testing.T, reqs *requests, namespace string) {
	t.Helper()
	mgr, err := ctrl.NewManager(reqs.config(env.Config), ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &controller.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: &recorder{}, Namespace: namespace}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// TestSharedBudgetAcrossWorkers: two SidecarSets whose pods share a
// PodDisruptionBudget that allows one disruption, reconciled by different
// workers at once, disrupt one pod between them, not one each. The first
// pod write is held at the apiserver for a while, so that without a lock
// the other set plans meanwhile from the same unspent budget.
func TestSharedBudgetAcrossWorkers(t *testing.T) {
	ns := namespace(t)
	reqs := newRequests()
	var once sync.Once
	hold := make(chan struct{})
	reqs.hold = func(req *http.Request) <-chan struct{} {
		if podRequest(req) != "PATCH pod" || strings.HasSuffix(req.URL.Path, "/status") {
			return nil
		}
		var ch <-chan struct{}
		once.Do(func() {
			ch = hold
			time.AfterFunc(3*time.Second, func() { close(hold) })
		})
		return ch
	}
	create(t, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: new(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": ns}}}})
	pdb := &policyv1.PodDisruptionBudget{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "shared"}, pdb); err != nil {
		t.Fatal(err)
	}
	// What the disruption controller would write: four healthy pods, one
	// may go.
	pdb.Status = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 4, DesiredHealthy: 3, ExpectedPods: 4}
	if err := env.Client.Status().Update(t.Context(), pdb); err != nil {
		t.Fatal(err)
	}

	var sets []*v1alpha1.SidecarSet
	for _, name := range []string{"a-" + ns, "b-" + ns} {
		set := &v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"set": name}},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: "exporter-" + name[:1], Image: "exporter:v1"}}},
		}}
		// Created first: the records are made from the spec as stored,
		// with the API's defaults.
		create(t, set)
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), set) })
		sets = append(sets, set)
		for i := range 2 {
			runningPod(t, ns, fmt.Sprintf("%s-%d", name[:1], i), map[string]string{"app": ns, "set": name}, set)
		}
	}
	// The manager's namespace is never matched: revisions go elsewhere.
	startController(t, reqs, namespace(t))
	waitSets := func(what string, cond func(v1alpha1.SidecarSetStatus) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			for _, set := range sets {
				got := &v1alpha1.SidecarSet{}
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(set), got); err != nil {
					return false, err
				}
				if got.Status.ObservedGeneration != got.Generation || !cond(got.Status) {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("wait for %s: %v", what, err)
		}
	}
	waitSets("both sets' pods updated and ready", func(st v1alpha1.SidecarSetStatus) bool { return st.UpdatedReadyPods == 2 })
	// Both sets at v2 at once: each would update one pod (maxUnavailable 1).
	for _, set := range sets {
		patch := client.MergeFrom(set.DeepCopy())
		set.Spec.Containers[0].Image = "exporter:v2"
		if err := env.Client.Patch(t.Context(), set, patch); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-hold:
	case <-time.After(20 * time.Second):
		for _, set := range sets {
			got := &v1alpha1.SidecarSet{}
			_ = env.Client.Get(context.Background(), client.ObjectKeyFromObject(set), got)
			t.Logf("%s: status %+v", set.Name, got.Status)
		}
		t.Fatal("no set wrote a pod")
	}
	// Let both sets reconcile again after the held write landed.
	time.Sleep(2 * time.Second)
	var list corev1.PodList
	if err := env.Client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var written []string
	for _, p := range list.Items {
		for _, c := range p.Spec.Containers {
			if c.Image == "exporter:v2" {
				written = append(written, p.Name)
			}
		}
	}
	if len(written) != 1 {
		t.Errorf("pods written %v, want one: the budget allows one disruption across both sets", written)
	}
}

// runningPod creates a pod into which set's sidecar was injected at its
// current spec, and gives it the status of a ready pod running it.
func runningPod(t *testing.T, ns, name string, labels map[string]string, set *v1alpha1.SidecarSet) {
	t.Helper()
	rec := revision.SetState{Revision: revision.Name(set.Name, &set.Spec), Hash: revision.Hash(&set.Spec),
		ImagelessHash: revision.ImagelessHash(&set.Spec)}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1alpha1.LabelManaged: "true"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
	maps.Copy(pod.Labels, labels)
	for _, sc := range set.Spec.Containers {
		pod.Spec.Containers = append(pod.Spec.Containers, sc.Container)
		rec.Containers = append(rec.Containers, revision.ContainerState{Name: sc.Name, Image: sc.Image})
	}
	pod.Annotations = map[string]string{
		v1alpha1.AnnotationInjected: set.Name,
		v1alpha1.AnnotationState:    revision.Encode(revision.State{set.Name: rec}),
	}
	create(t, pod)
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "docker.io/library/" + c.Image + "@sha256:" + strings.Repeat("0", 64),
			ContainerID: "containerd://" + name + c.Name, Ready: true, Started: new(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
		})
	}
	if err := env.Client.Status().Update(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
}
