// Package fuzz fuzzes the pod mutator apart from the webhook package's
// tests: those start a control plane in TestMain, which every fuzz worker
// would run again.
package fuzz

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/webhook"
)

// setsReader serves a fixed list of SidecarSets and an empty namespace: all
// the pod mutator reads. The fuzz target is about what the mutator does with
// arbitrary request bytes, not about the cache. Like the informer cache
// listed without deep copies, as the mutator lists it, it hands out its own
// sets' fields.
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

// FuzzPodMutator feeds arbitrary pod JSON to the mutator. It must never
// panic and must answer every request: it denies, with a message, only a
// pod that does not decode, since a SidecarSet never makes a pod's creation
// fail. The pod as the apiserver sends it (its own encoding of the decoded
// pod) is always allowed, and a patch in the answer applies to it, giving a
// pod that keeps every container and every annotation and label of its own
// (other than the records) as they were. The sets it read are left as they
// were, as they are the cache's own.
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
	sets := m.Reader.(setsReader).sets
	pristine := make([]v1alpha1.SidecarSet, len(sets))
	for i := range sets {
		sets[i].DeepCopyInto(&pristine[i])
	}
	handle := func(t *testing.T, raw []byte) admission.Response {
		t.Helper()
		resp := m.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "fuzz", Operation: admissionv1.Create, Namespace: "db",
			Object: runtime.RawExtension{Raw: raw},
		}})
		if !apiequality.Semantic.DeepEqual(pristine, sets) {
			t.Fatal("the mutator changed the SidecarSets it read")
		}
		return resp
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		resp := handle(t, raw)
		pod := &corev1.Pod{}
		if json.Unmarshal(raw, pod) != nil {
			if resp.Allowed || resp.Result == nil || resp.Result.Message == "" || len(resp.Patches) > 0 {
				t.Fatalf("a pod that does not decode: want a denial with a message and no patch, got %+v", resp)
			}
			return
		}
		if !resp.Allowed {
			t.Fatalf("denied a pod that decodes: %+v", resp.Result)
		}

		sent, err := json.Marshal(pod)
		if err != nil {
			t.Skipf("the decoded pod does not encode, so the apiserver could not send it: %v", err)
		}
		resp = handle(t, sent)
		if !resp.Allowed {
			t.Fatalf("denied the pod as the apiserver sends it: %+v", resp.Result)
		}
		if len(resp.Patches) == 0 {
			return
		}
		ops, err := json.Marshal(resp.Patches)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatalf("the answer's patch %s does not decode: %v", ops, err)
		}
		out, err := patch.Apply(sent)
		if err != nil {
			t.Fatalf("the answer's patch %s does not apply to %s: %v", ops, sent, err)
		}
		patched := &corev1.Pod{}
		if err := json.Unmarshal(out, patched); err != nil {
			t.Fatalf("the patched pod does not decode: %v\n%s", err, out)
		}
		checkOwnKept(t, pod, patched)
	})
}

// checkOwnKept fails unless patched holds every container of pod, unchanged
// and in the same order, and every annotation and label of pod that is not
// one of the records.
func checkOwnKept(t *testing.T, pod, patched *corev1.Pod) {
	t.Helper()
	for _, lists := range [][2][]corev1.Container{
		{pod.Spec.Containers, patched.Spec.Containers},
		{pod.Spec.InitContainers, patched.Spec.InitContainers},
	} {
		own, all := lists[0], lists[1]
		i := 0
		for j := range all {
			if i < len(own) && all[j].Name == own[i].Name {
				if !apiequality.Semantic.DeepEqual(own[i], all[j]) {
					t.Fatalf("container %q changed by the patch", own[i].Name)
				}
				i++
			}
		}
		if i < len(own) {
			t.Fatalf("container %q lost or moved by the patch", own[i].Name)
		}
	}
	for k, v := range pod.Annotations {
		record := k == v1alpha1.AnnotationInjected || k == v1alpha1.AnnotationState || k == v1alpha1.AnnotationSkipped ||
			k == v1alpha1.AnnotationSkippedReasons || strings.HasPrefix(k, revision.PerSetPrefix)
		if !record && patched.Annotations[k] != v {
			t.Fatalf("annotation %s changed by the patch", k)
		}
	}
	for k, v := range pod.Labels {
		if k != v1alpha1.LabelManaged && patched.Labels[k] != v {
			t.Fatalf("label %s changed by the patch", k)
		}
	}
}
