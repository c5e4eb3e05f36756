// Package fuzz fuzzes the pod mutator apart from the webhook package's
// tests: those start a control plane in TestMain, which every fuzz worker
// would run again.
package fuzz

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/webhook"
)

// setsReader serves a fixed list of SidecarSets and an empty namespace: all
// the pod mutator reads. The fuzz target is about what the mutator does with
// arbitrary request bytes, not about the cache.
type setsReader struct{ sets []v1alpha1.SidecarSet }

func (r setsReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return nil
	}
	ns.Name = key.Name
	ns.Labels = map[string]string{"example.com/managed": "true"}
	return nil
}

func (r setsReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	if l, ok := list.(*v1alpha1.SidecarSetList); ok {
		l.Items = append([]v1alpha1.SidecarSet(nil), r.sets...)
	}
	return nil
}

// FuzzPodMutator feeds arbitrary pod JSON to the mutator: it must never
// panic, must answer every request, and an allowed answer with patches must
// come from a pod that decoded.
func FuzzPodMutator(f *testing.F) {
	for _, seed := range []string{
		`{"metadata":{"name":"db","labels":{"app":"db"}},"spec":{"containers":[{"name":"mysql","image":"mysql:8"}]}}`,
		`{"metadata":{"name":"db","labels":{"app":"db"},"annotations":{"sidecarset.dev/state":"{broken"}},"spec":{"containers":[{"name":"exporter","image":"x"}]}}`,
		`{"metadata":{"labels":{"app":"db"}},"spec":{"restartPolicy":"Never","initContainers":[{"name":"init","image":"i"}]}}`,
		`{"spec":{"containers":"not a list"}}`,
		`null`,
		``,
	} {
		f.Add([]byte(seed))
	}
	m := &webhook.PodMutator{
		Reader: setsReader{sets: []v1alpha1.SidecarSet{{
			ObjectMeta: metav1.ObjectMeta{Name: "exporter"},
			Spec: v1alpha1.SidecarSetSpec{
				Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
				Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: "exporter", Image: "exporter:1"}}},
				InitContainers: []v1alpha1.SidecarContainer{{Container: corev1.Container{
					Name: "shipper", Image: "shipper:1", RestartPolicy: new(corev1.ContainerRestartPolicyAlways)}}},
			},
		}}},
		Options: inject.Options{ManagerNamespace: "sidecarset-system"},
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		resp := m.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "fuzz", Operation: admissionv1.Create, Namespace: "db",
			Object: runtime.RawExtension{Raw: raw},
		}})
		if resp.Result == nil && !resp.Allowed {
			t.Fatalf("denied without a reason")
		}
		if len(resp.Patches) > 0 && json.Unmarshal(raw, &corev1.Pod{}) != nil {
			t.Fatalf("patched a pod that does not decode")
		}
	})
}
