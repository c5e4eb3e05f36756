package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/webhook"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countingMutator returns a pod mutator reading from its own informer cache,
// and a counter of the requests other than watches that cache sends to the
// apiserver.
func countingMutator(t *testing.T) (*webhook.PodMutator, *atomic.Int64) {
	t.Helper()
	var requests atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Query().Get("watch") != "true" {
				requests.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	c, err := cache.New(cfg, cache.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, obj := range []client.Object{&v1alpha1.SidecarSet{}, &corev1.Namespace{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	return &webhook.PodMutator{Reader: c, Options: inject.Options{ManagerNamespace: "sidecarset-system"}}, &requests
}

func podRequest(t *testing.T, ns string, pod *corev1.Pod) admission.Request {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "test",
		Operation: admissionv1.Create,
		Namespace: ns,
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Object:    runtime.RawExtension{Raw: raw},
	}}
}

func TestPodMutatorMakesNoAPICalls(t *testing.T) {
	labels := map[string]string{"example.com/mysql": "counted"}
	createSet(t, sidecarSet("counted-exporter", labels, corev1.Container{Name: "exporter", Image: "exporter:1"}))
	ns := namespace(t, nil)
	mutator, requests := countingMutator(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mysql", Image: "mysql:8.4"}}},
	}
	before := requests.Load()
	for i := range 50 {
		resp := mutator.Handle(t.Context(), podRequest(t, ns, pod))
		if !resp.Allowed || len(resp.Patches) == 0 {
			t.Fatalf("admission %d: allowed %v, %d patches, result %v; want the sidecar injected", i, resp.Allowed, len(resp.Patches), resp.Result)
		}
	}
	if n := requests.Load() - before; n != 0 {
		t.Errorf("50 admissions sent %d requests to the apiserver, want 0", n)
	}
}

func TestPodMutatorBadInput(t *testing.T) {
	mutator, _ := countingMutator(t)
	ctx := t.Context()

	t.Run("malformed object is denied with 400", func(t *testing.T) {
		req := podRequest(t, "default", &corev1.Pod{})
		req.Object.Raw = []byte(`{"spec": {"containers": "not a list"}}`)
		resp := mutator.Handle(ctx, req)
		if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest {
			t.Errorf("response = allowed %v result %+v, want denied with 400", resp.Allowed, resp.Result)
		}
	})
	t.Run("non-create passes through", func(t *testing.T) {
		req := podRequest(t, "default", &corev1.Pod{})
		req.Operation = admissionv1.Update
		req.Object.Raw = []byte("garbage")
		if resp := mutator.Handle(ctx, req); !resp.Allowed || len(resp.Patches) != 0 {
			t.Errorf("update: allowed %v, %d patches; want passthrough", resp.Allowed, len(resp.Patches))
		}
	})
	t.Run("huge pod passes through with a warning", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "huge"}}
		for i := range webhook.MaxPodContainers + 1 {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "x:1"})
		}
		resp := mutator.Handle(ctx, podRequest(t, "default", pod))
		if !resp.Allowed || len(resp.Patches) != 0 || !strings.Contains(strings.Join(resp.Warnings, " "), "containers") {
			t.Errorf("allowed %v, %d patches, warnings %v; want passthrough with a warning", resp.Allowed, len(resp.Patches), resp.Warnings)
		}
	})
	t.Run("huge annotation is handled", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big", Annotations: map[string]string{
			v1alpha1.AnnotationState: strings.Repeat("x", 1<<20)}}}
		pod.Spec.Containers = []corev1.Container{{Name: "main", Image: "main:1"}}
		if resp := mutator.Handle(ctx, podRequest(t, "default", pod)); !resp.Allowed {
			t.Errorf("pod with a 1 MiB garbage state annotation denied: %+v", resp.Result)
		}
	})
}
