package integration

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/examples"
)

// TestPatchPodMetadata: the example's SidecarSet, through the validating
// webhook of a manager that allows keys under example.com/ (stack.Start),
// writes its annotations into a new pod by each policy; the webhook
// refuses a set writing a key the manager does not allow, and one writing
// a key the first set writes differently into the same pods.
func TestPatchPodMetadata(t *testing.T) {
	f := newFixture(t)
	b, err := examples.SidecarSets.ReadFile("sidecarsets/patch-pod-metadata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	set := &v1alpha1.SidecarSet{}
	if err := yaml.UnmarshalStrict(b, set); err != nil {
		t.Fatalf("decode the example: %v", err)
	}
	set.Name = f.Set
	set.Spec.Selector = &metav1.LabelSelector{MatchLabels: f.Labels}
	set.Spec.Containers[0].Image = "exporter:v1"
	f.CreateSet(set)

	refused := func(what string, s *v1alpha1.SidecarSet, want ...string) {
		t.Helper()
		err := f.Client.Create(t.Context(), s)
		if err == nil {
			_ = f.Client.Delete(t.Context(), s)
			t.Errorf("%s: created, want it refused", what)
			return
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: refused with %q, want it to say %q", what, err, w)
			}
		}
	}
	other := func(name string, p v1alpha1.PatchPodMetadata) *v1alpha1.SidecarSet {
		s := f.SidecarSet("exporter:v1", 0)
		s.Name = f.Set + "-" + name
		s.Spec.Containers[0].Name = name
		s.Spec.PatchPodMetadata = []v1alpha1.PatchPodMetadata{p}
		return s
	}
	refused("a key the manager does not allow", other("x", v1alpha1.PatchPodMetadata{Annotations: map[string]string{"other.example.org/x": "1"}}),
		"spec.patchPodMetadata[0].annotations[other.example.org/x]", `annotation key "other.example.org/x"`, "--patch-pod-metadata-allowed-keys", "allowed: example.com/")
	refused("another value for the same pods", other("y", v1alpha1.PatchPodMetadata{PatchPolicy: v1alpha1.PatchOverwrite, Annotations: map[string]string{"example.com/scrape-port": "9999"}}),
		"spec.patchPodMetadata[0].annotations[example.com/scrape-port]", `conflicts with SidecarSet "`+f.Set+`"`)

	pod := f.NewPod("p01")
	pod.Annotations = map[string]string{
		"example.com/scrape-port":       "80",
		"example.com/default-container": "app",
		"example.com/sidecars":          `{"mesh":"v2"}`,
	}
	f.CreatePod(pod)
	got := map[string]string{}
	for k, v := range pod.Annotations {
		if strings.HasPrefix(k, "example.com/") {
			got[k] = v
		}
	}
	want := map[string]string{
		"example.com/scrape-port":       "9104",
		"example.com/default-container": "app",
		"example.com/sidecars":          `{"mesh":"v2","exporter":"v0.15.1"}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pod annotations (-want +got):\n%s", diff)
	}
	if pod.Annotations[v1alpha1.AnnotationInjected] != f.Set {
		t.Errorf("pod injected with %q, want %q", pod.Annotations[v1alpha1.AnnotationInjected], f.Set)
	}
}
