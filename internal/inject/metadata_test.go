package inject_test

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

func patchOf(policy v1alpha1.PatchPolicy, annotations map[string]string) []v1alpha1.PatchPodMetadata {
	return []v1alpha1.PatchPodMetadata{{PatchPolicy: policy, Annotations: annotations}}
}

// TestPatchAnnotations mirrors the worked cases of PatchAnnotations's doc
// comment.
func TestPatchAnnotations(t *testing.T) {
	pod := func() map[string]string { return map[string]string{"a": "1", "m": `{"x":1,"y":{"p":1}}`} }
	with := func(kv map[string]string) map[string]string {
		m := pod()
		maps.Copy(m, kv)
		return m
	}
	cases := []struct {
		name     string
		pod      map[string]string
		patches  []v1alpha1.PatchPodMetadata
		want     map[string]string
		warnings []string
	}{
		{name: "Retain keeps the pod's value and adds what it lacks", pod: pod(),
			patches: patchOf(v1alpha1.PatchRetain, map[string]string{"a": "2", "b": "2"}), want: with(map[string]string{"b": "2"})},
		{name: "no policy is Retain", pod: pod(),
			patches: patchOf("", map[string]string{"a": "2"}), want: pod()},
		{name: "Retain keeps an empty value", pod: map[string]string{"a": ""},
			patches: patchOf(v1alpha1.PatchRetain, map[string]string{"a": "2"}), want: map[string]string{"a": ""}},
		{name: "Overwrite", pod: pod(),
			patches: patchOf(v1alpha1.PatchOverwrite, map[string]string{"a": "2"}), want: with(map[string]string{"a": "2"})},
		{name: "MergePatchJson merges objects and removes what is declared null", pod: pod(),
			patches: patchOf(v1alpha1.PatchMergePatchJSON, map[string]string{"m": `{"y":{"q":2},"x":null}`}), want: with(map[string]string{"m": `{"y":{"p":1,"q":2}}`})},
		{name: "MergePatchJson into no value", pod: nil,
			patches: patchOf(v1alpha1.PatchMergePatchJSON, map[string]string{"m": `{"x":1,"z":null}`}), want: map[string]string{"m": `{"x":1}`}},
		{name: "MergePatchJson into a value that is not an object keeps it", pod: pod(),
			patches:  patchOf(v1alpha1.PatchMergePatchJSON, map[string]string{"a": `{"z":1}`}),
			want:     pod(),
			warnings: []string{`patchPodMetadata: annotation "a" is left as the pod has it: MergePatchJson needs the pod's value to be a JSON object, and it is "1"`}},
		{name: "entries in order, keys sorted", pod: nil,
			patches: []v1alpha1.PatchPodMetadata{
				{PatchPolicy: v1alpha1.PatchRetain, Annotations: map[string]string{"b": "1", "a": "1"}},
				{PatchPolicy: v1alpha1.PatchOverwrite, Annotations: map[string]string{"c": "3"}},
			}, want: map[string]string{"a": "1", "b": "1", "c": "3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings := inject.PatchAnnotations(tc.pod, tc.patches)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.warnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInjectPatchesMetadata: an injected set writes its annotations next
// to the records, and a warning about one it cannot merge names the set;
// a set that is not injected writes none, and neither does one already
// injected when the webhook is called again.
func TestInjectPatchesMetadata(t *testing.T) {
	set := testutil.SidecarSet("mesh").Selector(dbLabels).Container("proxy", proxyImage).Obj()
	set.Spec.PatchPodMetadata = []v1alpha1.PatchPodMetadata{
		{PatchPolicy: v1alpha1.PatchOverwrite, Annotations: map[string]string{"example.com/mesh": "on"}},
		{PatchPolicy: v1alpha1.PatchMergePatchJSON, Annotations: map[string]string{"example.com/config": `{"mesh":true}`}},
	}
	pod := testutil.Pod("shop", "db-0").Labels(dbLabels).Container("app", appImage).
		Annotations(map[string]string{"example.com/mesh": "off", "example.com/config": "plain"}).Obj()

	res := inject.Inject(pod, shop, []*v1alpha1.SidecarSet{set}, opts)

	want := records(revision.State{"mesh": entry(set, ctr("proxy", proxyImage))})
	want["example.com/mesh"] = "on"
	want["example.com/config"] = "plain"
	if diff := cmp.Diff(want, res.Pod.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	warning := `SidecarSet "mesh" patchPodMetadata: annotation "example.com/config" is left as the pod has it: MergePatchJson needs the pod's value to be a JSON object, and it is "plain"`
	if diff := cmp.Diff([]string{warning}, res.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]inject.Event{{Set: "mesh", Reason: inject.ReasonInjectionWarning, Message: warning}}, res.Events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	again := res.Pod.DeepCopy()
	again.Annotations["example.com/mesh"] = "changed by the pod's creator meanwhile"
	if got := inject.Inject(again, shop, []*v1alpha1.SidecarSet{set}, opts); got.Pod.Annotations["example.com/mesh"] != "changed by the pod's creator meanwhile" {
		t.Errorf("reinvoked: example.com/mesh = %q, want the pod's value kept", got.Pod.Annotations["example.com/mesh"])
	}

	clash := testutil.Pod("shop", "db-1").Labels(dbLabels).Container("proxy", appImage).Obj()
	if got := inject.Inject(clash, shop, []*v1alpha1.SidecarSet{set}, opts); len(got.Injected) != 0 || got.Pod.Annotations["example.com/mesh"] != "" {
		t.Errorf("set not injected: injected %v, annotations %v, want neither", got.Injected, got.Pod.Annotations)
	}
}
