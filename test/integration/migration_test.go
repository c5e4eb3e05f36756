package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/adopt"
	"github.com/sidecarset/sidecarset/internal/cli"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// kruiseCRD is OpenKruise's SidecarSet resource, enough to store its objects:
// the steps of a migration read, patch and delete them. No OpenKruise
// controller or webhook runs; the pods it injected are created as it wrote
// them.
const kruiseCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: sidecarsets.apps.kruise.io
spec:
  group: apps.kruise.io
  scope: Cluster
  names: {kind: SidecarSet, listKind: SidecarSetList, plural: sidecarsets, singular: sidecarset}
  versions:
  - name: v1beta1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

var kruiseSidecarSet = schema.GroupVersionKind{Group: "apps.kruise.io", Version: "v1beta1", Kind: "SidecarSet"}

// installKruiseCRD creates OpenKruise's SidecarSet resource for the test and
// waits until it serves.
func (f *testFixture) installKruiseCRD() {
	f.T.Helper()
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(kruiseCRD), &crd.Object); err != nil {
		f.T.Fatal(err)
	}
	if err := f.Client.Create(f.T.Context(), crd); err != nil {
		f.T.Fatalf("create OpenKruise's SidecarSet resource: %v", err)
	}
	f.T.Cleanup(func() { _ = f.Client.Delete(context.Background(), crd) })
	err := wait.PollUntilContextTimeout(f.T.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(kruiseSidecarSet.GroupVersion().WithKind("SidecarSetList"))
		return f.Client.List(ctx, list) == nil, nil
	})
	if err != nil {
		f.T.Fatalf("OpenKruise's SidecarSet resource does not serve: %v", err)
	}
}

// kruiseSet returns the OpenKruise SidecarSet a user had, as the apiserver
// stores it after OpenKruise's SidecarSet webhook set its defaults and
// hashes: the exporter, an env var of its own and one transferred from the
// app container.
func (f *testFixture) kruiseSet(image string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{
			"name": f.Set,
			"annotations": map[string]any{
				"kruise.io/sidecarset-hash":               "7f9c4b2dx8w5v6z4",
				"kruise.io/sidecarset-hash-without-image": "4v2z7w5c8xd9b2f4",
			},
		},
		"spec": map[string]any{
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{corev1.LabelMetadataName: f.NS}},
			"selector":          map[string]any{"matchLabels": toAny(f.Labels)},
			"containers": []any{map[string]any{
				"name":              "exporter",
				"image":             image,
				"env":               []any{map[string]any{"name": "EXPORTER_PORT", "value": "9104"}},
				"podInjectPolicy":   "BeforeAppContainer",
				"upgradeStrategy":   map[string]any{"upgradeType": "ColdUpgrade"},
				"shareVolumePolicy": map[string]any{"type": "disabled"},
				"transferEnv":       []any{map[string]any{"sourceContainerName": fixture.AppContainer, "envName": "MYSQL_HOST"}},
			}},
			"updateStrategy":       map[string]any{"type": "RollingUpdate", "partition": int64(0), "maxUnavailable": int64(1)},
			"injectionStrategy":    map[string]any{},
			"revisionHistoryLimit": int64(10),
		},
	}}
	u.SetGroupVersionKind(kruiseSidecarSet)
	return u
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// kruisePod returns a pod as OpenKruise's webhook injected the exporter at
// image into it: before the app container (BeforeAppContainer), its
// declared env, then IS_INJECTED=true, then the app's MYSQL_HOST
// (transferEnv); and Kruise's pod annotations.
func (f *testFixture) kruisePod(name, image string) *corev1.Pod {
	pod := f.NewPod(name)
	host := corev1.EnvVar{Name: "MYSQL_HOST", Value: "127.0.0.1"}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{host}
	exporter := corev1.Container{Name: "exporter", Image: image, Env: []corev1.EnvVar{
		{Name: "EXPORTER_PORT", Value: "9104"},
		{Name: adopt.KruiseInjectedEnv, Value: "true"},
		host,
	}}
	pod.Spec.Containers = append([]corev1.Container{exporter}, pod.Spec.Containers...)
	record := func(extra string) string {
		return `{"` + f.Set + `":{"updateTimestamp":"2026-01-02T03:04:05Z","hash":"7f9c4b2dx8w5v6z4","sidecarSetName":"` + f.Set + `","sidecarList":["exporter"]` + extra + `}}`
	}
	pod.Annotations = map[string]string{
		adopt.KruiseHashAnnotation:                record(`,"controllerRevision":"` + f.Set + `-6d4f9c8b7"`),
		"kruise.io/sidecarset-hash-without-image": record(""),
		"kruise.io/sidecarset-injected-list":      f.Set,
	}
	return pod
}

// exporterEnv returns the env of the pod's exporter as JSON.
func exporterEnv(pod *corev1.Pod) string {
	for _, c := range pod.Spec.Containers {
		if c.Name == "exporter" {
			env, _ := json.Marshal(c.Env)
			return string(env)
		}
	}
	return ""
}

// patchKruiseSet applies a merge patch to the OpenKruise SidecarSet, as
// `kubectl patch sidecarsets.apps.kruise.io NAME --type merge -p PATCH`.
func (f *testFixture) patchKruiseSet(patch string) {
	f.T.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kruiseSidecarSet)
	u.SetName(f.Set)
	if err := f.Client.Patch(f.T.Context(), u, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		f.T.Fatalf("patch the OpenKruise SidecarSet with %s: %v", patch, err)
	}
}

// TestMigration follows docs/migrating-from-openkruise.md step by step: pods
// OpenKruise injected are adopted by the converted SidecarSet without a
// restart, and so is one it injects while both webhooks run; OpenKruise's
// set is paused and deleted, new pods are injected by sidecarset, and an
// image change updates every pod in place.
func TestMigration(t *testing.T) {
	f := newFixture(t)
	f.installKruiseCRD()
	// Before: the OpenKruise SidecarSet and three pods it injected.
	if err := f.Client.Create(t.Context(), f.kruiseSet("exporter:v1")); err != nil {
		t.Fatalf("create the OpenKruise SidecarSet: %v", err)
	}
	for _, name := range []string{"p01", "p02", "p03"} {
		f.CreatePod(f.kruisePod(name, "exporter:v1"))
	}
	f.WaitReady(3)
	apps := fixture.AppIDs(f.Pods())
	exporters := map[string]string{}
	for _, p := range f.Pods() {
		exporters[p.Name] = fixture.ContainerStatus(&p, "exporter").ContainerID
	}

	// Step 1: kubectl get sidecarsets.apps.kruise.io NAME -o yaml |
	// kubectl sidecarset convert -f - > NAME.yaml
	exported := &unstructured.Unstructured{}
	exported.SetGroupVersionKind(kruiseSidecarSet)
	if err := f.Client.Get(t.Context(), client.ObjectKey{Name: f.Set}, exported); err != nil {
		t.Fatalf("get the OpenKruise SidecarSet: %v", err)
	}
	asYAML, err := yaml.Marshal(exported.Object)
	if err != nil {
		t.Fatal(err)
	}
	var converted, warnings bytes.Buffer
	if err := cli.Convert(bytes.NewReader(asYAML), &converted, &warnings, cli.ConvertOptions{Source: "-f -", ManagerNamespace: cli.DefaultManagerNamespace}); err != nil {
		t.Fatalf("convert: %v\n%s", err, warnings.String())
	}
	for _, want := range []string{
		"kubectl patch sidecarsets.apps.kruise.io " + f.Set + ` --type merge -p '{"spec":{"updateStrategy":{"paused":true}}}'`,
		"kubectl patch sidecarsets.apps.kruise.io " + f.Set + ` --type merge -p '{"spec":{"injectionStrategy":{"paused":true}}}'`,
		"kubectl delete sidecarsets.apps.kruise.io " + f.Set,
	} {
		if !strings.Contains(warnings.String(), want) {
			t.Errorf("convert's stderr does not say %q:\n%s", want, warnings.String())
		}
	}
	set := &v1alpha1.SidecarSet{}
	if err := yaml.UnmarshalStrict(converted.Bytes(), set); err != nil {
		t.Fatalf("converted SidecarSet: %v\n%s", err, converted.String())
	}
	if set.Spec.AdoptionPolicy != v1alpha1.AdoptSameName || len(set.Annotations) != 0 {
		t.Fatalf("converted SidecarSet: adoptionPolicy %q, annotations %v; want SameName and none of OpenKruise's", set.Spec.AdoptionPolicy, set.Annotations)
	}
	if te := set.Spec.Containers[0].TransferEnv; len(te) != 1 || te[0].SourceContainerName != fixture.AppContainer || te[0].EnvName != "MYSQL_HOST" {
		t.Errorf("converted SidecarSet: transferEnv %+v, want MYSQL_HOST from %s carried over", te, fixture.AppContainer)
	}

	// Step 2: stop OpenKruise's in-place updates.
	f.patchKruiseSet(`{"spec":{"updateStrategy":{"paused":true}}}`)

	// Step 3: kubectl apply -f NAME.yaml; kubectl sidecarset status NAME
	// counts the pods matched, none unmanaged; nothing restarted.
	f.CreateSet(set)
	f.WaitStatus("the pods OpenKruise injected adopted", func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Complete(3)(s) && s.UnmanagedPods == 0 && s.SkippedPods == 0
	})
	for _, p := range f.Pods() {
		state, err := revision.Decode(p.Annotations)
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		if _, ok := state[f.Set]; !ok || p.Labels[v1alpha1.LabelManaged] != "true" {
			t.Errorf("pod %s carries no record of %s: annotations %v", p.Name, f.Set, p.Annotations)
		}
		f.WaitPodEvent(p.Name, controller.ReasonAdopted)
	}
	f.AssertNothingRestarted()

	// Until step 4 OpenKruise's webhook, called first, still injects new
	// pods: sidecarset's skips such a pod for the name clash, and the
	// controller adopts it.
	f.CreatePod(f.kruisePod("p04", "exporter:v1"))
	f.WaitReady(4)
	f.WaitStatus("the pod OpenKruise injected meanwhile adopted", func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Complete(4)(s) && s.UnmanagedPods == 0 && s.SkippedPods == 0
	})
	f.WaitPodEvent("p04", controller.ReasonAdopted)
	if env := exporterEnv(f.Pod("p04")); !strings.Contains(env, adopt.KruiseInjectedEnv) {
		t.Errorf("pod p04: exporter env %s, want OpenKruise's, untouched by sidecarset's webhook", env)
	}

	// Step 4: stop OpenKruise's injection; a new pod gets sidecarset's,
	// with the declared env alone: its app has no MYSQL_HOST to transfer.
	f.patchKruiseSet(`{"spec":{"injectionStrategy":{"paused":true}}}`)
	f.CreatePod(f.NewPod("p05"))
	f.WaitReady(5)
	f.WaitStatus("the new pod injected", fixture.Complete(5))
	p05 := f.Pod("p05")
	if p05.Annotations[v1alpha1.AnnotationInjected] != f.Set {
		t.Errorf("new pod p05 annotations %v, want %s injected", p05.Annotations, f.Set)
	}
	if env := exporterEnv(p05); env != `[{"name":"EXPORTER_PORT","value":"9104"}]` {
		t.Errorf("new pod p05: exporter env %s, want the declared EXPORTER_PORT alone", env)
	}

	// Step 5: kubectl delete sidecarsets.apps.kruise.io NAME; the pods keep
	// running as they are.
	if err := f.Client.Delete(t.Context(), exported); err != nil {
		t.Fatalf("delete the OpenKruise SidecarSet: %v", err)
	}
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(f.Client.Get(ctx, client.ObjectKey{Name: f.Set}, exported.DeepCopy())), nil
	})
	if err != nil {
		t.Fatalf("the OpenKruise SidecarSet is not gone: %v", err)
	}
	f.AssertNothingRestarted()

	// Step 6: an image change rolls out in place, the adopted pods too.
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	f.WaitStatus("every pod on exporter:v2", func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Complete(5)(s) && fixture.CountImage(f.Pods(), "exporter:v2") == 5
	})
	restarts := fixture.Restarts(f.Pods(), "exporter")
	for _, p := range f.Pods() {
		if restarts[p.Name] != 1 {
			t.Errorf("pod %s: exporter restartCount %d, want 1 (one in-place update)", p.Name, restarts[p.Name])
		}
		if id := fixture.ContainerStatus(&p, "exporter").ContainerID; exporters[p.Name] != "" && id == exporters[p.Name] {
			t.Errorf("pod %s: exporter still the container OpenKruise started (%s)", p.Name, id)
		}
	}
	f.AssertAppsUntouched(apps)
}
