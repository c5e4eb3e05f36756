package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/webhook"
)

// BenchmarkPodMutator times the pod mutator's answer to one pod creation,
// from its informer cache, with 20 SidecarSets of which 2 match the pod,
// up to the encoded AdmissionReview response.
func BenchmarkPodMutator(b *testing.B) {
	ctx := b.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	const sets = 20
	for i := range sets {
		value := fmt.Sprintf("other-%02d", i)
		if i < 2 {
			value = "match"
		}
		set := sidecarSet(fmt.Sprintf("bench-mutator-%02d", i), map[string]string{"example.com/bench": value},
			corev1.Container{Name: fmt.Sprintf("sidecar-%02d", i), Image: "exporter@sha256:" + fmt.Sprintf("%064d", i)})
		if err := env.Client.Create(ctx, set); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = env.Client.Delete(context.Background(), set) })
	}
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	for _, obj := range []client.Object{&v1alpha1.SidecarSet{}, &corev1.Namespace{}} {
		if _, err := c.GetInformer(cctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	go func() { _ = c.Start(cctx) }()
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("the cache did not sync")
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var list v1alpha1.SidecarSetList
		if err := c.List(ctx, &list); err != nil {
			return false, err
		}
		return len(list.Items) >= sets, nil
	})
	if err != nil {
		b.Fatalf("wait for the cache: %v", err)
	}
	m := &webhook.PodMutator{Reader: c, Options: inject.Options{ManagerNamespace: "sidecarset-system", Cache: &inject.Cache{}}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, GenerateName: "web-", Labels: map[string]string{"example.com/bench": "match", "app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "app:1",
			Env:   []corev1.EnvVar{{Name: "MODE", Value: "production"}},
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
		}}},
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "bench", Operation: admissionv1.Create, Namespace: ns.Name,
		Kind:   metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Object: runtime.RawExtension{Raw: raw},
	}}
	for b.Loop() {
		resp := m.Handle(ctx, req)
		if !resp.Allowed || len(resp.Patches) == 0 {
			b.Fatalf("not injected: %+v", resp.Result)
		}
		if err := resp.Complete(req); err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(admissionv1.AdmissionReview{Response: &resp.AdmissionResponse}); err != nil {
			b.Fatal(err)
		}
	}
}
