package webhook

import (
	"encoding/json"
	"fmt"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

// tb is what both testing.T and rapid.T offer.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

var patchOptions = inject.Options{ManagerNamespace: "sidecarset-system", Cache: &inject.Cache{}}

// applied applies the patch podPatch writes for the injection of sets into
// pod to pod's JSON, and returns the result and the injected pod.
func applied(t tb, raw []byte, pod *corev1.Pod, sets ...*v1alpha1.SidecarSet) (got []byte, want *corev1.Pod) {
	t.Helper()
	res := inject.Inject(pod, testutil.Namespace(pod.Namespace, nil), sets, patchOptions)
	ops, err := podPatch(pod, res.Pod)
	if err != nil {
		t.Fatalf("podPatch: %v", err)
	}
	encoded, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatch.DecodePatch(encoded)
	if err != nil {
		t.Fatalf("decode the patch %s: %v", encoded, err)
	}
	got, err = patch.Apply(raw)
	if err != nil {
		t.Fatalf("apply the patch %s: %v", encoded, err)
	}
	return got, res.Pod
}

func checkApplied(t tb, pod *corev1.Pod, sets ...*v1alpha1.SidecarSet) {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	out, want := applied(t, raw, pod, sets...)
	got := &corev1.Pod{}
	if err := json.Unmarshal(out, got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the patched pod is not the injected one (-injected +patched):\n%s", diff)
	}
}

func TestPodPatch(t *testing.T) {
	db := map[string]string{"app": "db"}
	before := testutil.Container("proxy", "proxy:1").Sidecar(v1alpha1.BeforeAppContainer)
	after := testutil.Container("exporter", "exporter:1").Sidecar(v1alpha1.AfterAppContainer)
	native := testutil.Container("shipper", "shipper:1").RestartAlways().Sidecar("")
	pod := func() *testutil.PodBuilder { return testutil.Pod("shop", "db-0").Labels(db).Container("app", "app:1") }
	cases := []struct {
		name string
		pod  *corev1.Pod
		sets []*v1alpha1.SidecarSet
	}{
		{name: "one after, annotations absent", pod: pod().Obj(),
			sets: []*v1alpha1.SidecarSet{testutil.SidecarSet("a").Selector(db).Containers(after).Obj()}},
		{name: "one before, one after, two own containers",
			pod:  testutil.Pod("shop", "db-0").Labels(db).Container("app", "app:1").Container("log", "log:1").Obj(),
			sets: []*v1alpha1.SidecarSet{testutil.SidecarSet("a").Selector(db).Containers(before, after).Obj()}},
		{name: "two sets before the app, in name order",
			pod: pod().Obj(),
			sets: []*v1alpha1.SidecarSet{
				testutil.SidecarSet("b").Selector(db).Containers(before).Obj(),
				testutil.SidecarSet("a").Selector(db).Containers(testutil.Container("mesh", "mesh:1").Sidecar(v1alpha1.BeforeAppContainer)).Obj(),
			}},
		{name: "a native sidecar into a pod without init containers", pod: pod().Obj(),
			sets: []*v1alpha1.SidecarSet{testutil.SidecarSet("a").Selector(db).InitContainers(native).Obj()}},
		{name: "a native sidecar after the pod's init container",
			pod:  pod().InitContainers(testutil.Container("migrate", "migrate:1").Obj()).Obj(),
			sets: []*v1alpha1.SidecarSet{testutil.SidecarSet("a").Selector(db).InitContainers(native).Obj()}},
		{name: "volumes and pull secrets into a pod without",
			pod: pod().Obj(),
			sets: []*v1alpha1.SidecarSet{testutil.SidecarSet("a").Selector(db).Containers(after).
				Volumes(testutil.EmptyDirVolume("scratch")).ImagePullSecrets("registry").Obj()}},
		{name: "volumes and pull secrets after the pod's, a same-named volume kept",
			pod: pod().Volumes(testutil.EmptyDirVolume("data"), testutil.EmptyDirVolume("scratch")).ImagePullSecrets("own").Obj(),
			sets: []*v1alpha1.SidecarSet{testutil.SidecarSet("a").Selector(db).Containers(after).
				Volumes(testutil.HostPathVolume("scratch", "/tmp"), testutil.EmptyDirVolume("cache")).ImagePullSecrets("own", "registry").Obj()}},
		{name: "annotations present, a key with ~ and /",
			pod:  pod().Annotations(map[string]string{"example.com/a~b": "1"}).Obj(),
			sets: []*v1alpha1.SidecarSet{testutil.SidecarSet("a").Selector(db).Containers(after).Obj()}},
		{name: "a stale record removed, nothing injected",
			pod: pod().Annotations(map[string]string{
				v1alpha1.AnnotationState:    `{"gone":{"revision":"gone-1","containers":[{"name":"missing","image":"x:1"}]}}`,
				v1alpha1.AnnotationInjected: "gone",
				"keep":                      "me",
			}).Labels(map[string]string{v1alpha1.LabelManaged: "true"}).Obj(),
			sets: []*v1alpha1.SidecarSet{testutil.SidecarSet("a").Selector(map[string]string{"app": "web"}).Containers(after).Obj()}},
		{name: "a pod without labels: the managed label is a new map", pod: testutil.Pod("shop", "bare").Container("app", "app:1").Obj(),
			sets: []*v1alpha1.SidecarSet{testutil.SidecarSet("a").LabelSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}},
			}}).Containers(after).Obj()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkApplied(t, tc.pod, tc.sets...) })
	}
}

// TestPodPatchKeepsUnknownFields: a field the pod's JSON holds that this
// version of the API does not know stays as sent (the diff of two
// serialised pods removed it).
func TestPodPatchKeepsUnknownFields(t *testing.T) {
	pod := testutil.Pod("shop", "db-0").Labels(map[string]string{"app": "db"}).Container("app", "app:1").Obj()
	set := testutil.SidecarSet("a").Selector(map[string]string{"app": "db"}).Container("exporter", "exporter:1").Obj()
	raw := []byte(`{"metadata":{"name":"db-0","namespace":"shop","labels":{"app":"db"}},"spec":{"futureField":{"x":1},"containers":[{"name":"app","image":"app:1"}]}}`)
	out, _ := applied(t, raw, pod, set)
	var got struct {
		Spec struct {
			FutureField map[string]int     `json:"futureField"`
			Containers  []corev1.Container `json:"containers"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.FutureField["x"] != 1 || len(got.Spec.Containers) != 2 {
		t.Errorf("patched pod %s: want futureField kept and 2 containers", out)
	}
}

// TestPodPatchProperty: for generated pods and sets, the patch applied to
// the pod is the injected pod.
func TestPodPatchProperty(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	rapid.Check(t, func(t *rapid.T) {
		b := testutil.Pod("shop", "p").Labels(map[string]string{"app": "db"})
		for i := range rapid.IntRange(1, 3).Draw(t, "containers") {
			b = b.Container(fmt.Sprintf("own-%d", i), "app:1")
		}
		for i := range rapid.IntRange(0, 2).Draw(t, "init") {
			b = b.InitContainers(testutil.Container(fmt.Sprintf("own-init-%d", i), "init:1").Obj())
		}
		for _, v := range rapid.SliceOfDistinct(rapid.SampledFrom(names), rapid.ID).Draw(t, "volumes") {
			b = b.Volumes(testutil.EmptyDirVolume("v-" + v))
		}
		if s := rapid.SliceOfDistinct(rapid.SampledFrom(names), rapid.ID).Draw(t, "secrets"); len(s) > 0 {
			b = b.ImagePullSecrets(s...)
		}
		if rapid.Bool().Draw(t, "annotated") {
			b = b.Annotations(map[string]string{"example.com/x": "1"})
		}
		var sets []*v1alpha1.SidecarSet
		for i := range rapid.IntRange(1, 3).Draw(t, "sets") {
			sb := testutil.SidecarSet(fmt.Sprintf("set-%d", i)).Selector(map[string]string{"app": "db"})
			for j := range rapid.IntRange(0, 2).Draw(t, fmt.Sprintf("sidecars-%d", i)) {
				policy := rapid.SampledFrom([]v1alpha1.PodInjectPolicy{v1alpha1.BeforeAppContainer, v1alpha1.AfterAppContainer}).Draw(t, fmt.Sprintf("policy-%d-%d", i, j))
				sb = sb.Containers(testutil.Container(fmt.Sprintf("s-%d-%d", i, j), "sidecar:1").Sidecar(policy))
			}
			if rapid.Bool().Draw(t, fmt.Sprintf("native-%d", i)) {
				sb = sb.InitContainers(testutil.Container(fmt.Sprintf("n-%d", i), "native:1").RestartAlways().Sidecar(""))
			}
			for _, v := range rapid.SliceOfDistinct(rapid.SampledFrom(names), rapid.ID).Draw(t, fmt.Sprintf("set-volumes-%d", i)) {
				sb = sb.Volumes(testutil.EmptyDirVolume("v-" + v))
			}
			if s := rapid.SliceOfDistinct(rapid.SampledFrom(names), rapid.ID).Draw(t, fmt.Sprintf("set-secrets-%d", i)); len(s) > 0 {
				sb = sb.ImagePullSecrets(s...)
			}
			sets = append(sets, sb.Obj())
		}
		checkApplied(t, b.Obj(), sets...)
	})
}

// BenchmarkPodPatch compares the patch written from the injection with the
// diff of the two serialised pods the handler made before, for one pod
// injected by two sets, each way up to the encoded patch the response
// carries.
func BenchmarkPodPatch(b *testing.B) {
	db := map[string]string{"app": "db"}
	pod := testutil.Pod("shop", "db-0").Labels(db).Annotations(map[string]string{"example.com/owner": "team"}).
		Containers(testutil.Container("app", "app:1").Requests("100m", "128Mi").VolumeMount("data", "/data").Obj()).
		Volumes(testutil.EmptyDirVolume("data")).Obj()
	sets := []*v1alpha1.SidecarSet{
		testutil.SidecarSet("exporter").Selector(db).Containers(testutil.Container("exporter", "exporter:1").Requests("10m", "16Mi").Sidecar(v1alpha1.AfterAppContainer)).Obj(),
		testutil.SidecarSet("proxy").Selector(db).Containers(testutil.Container("proxy", "proxy:1").Requests("10m", "16Mi").Sidecar(v1alpha1.BeforeAppContainer)).
			Volumes(testutil.EmptyDirVolume("certs")).ImagePullSecrets("registry").Obj(),
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	res := inject.Inject(pod, testutil.Namespace("shop", nil), sets, patchOptions)
	b.Run("diff", func(b *testing.B) {
		for b.Loop() {
			out, err := json.Marshal(res.Pod)
			if err != nil {
				b.Fatal(err)
			}
			resp := admission.PatchResponseFromRaw(raw, out)
			if _, err := json.Marshal(resp.Patches); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			ops, err := podPatch(pod, res.Pod)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(ops); err != nil {
				b.Fatal(err)
			}
		}
	})
}
