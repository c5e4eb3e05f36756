package integration

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// TestCanary: a canary that selects a new pod takes its base's place in it;
// the base keeps its own running pod even once the canary selects it too,
// and rolls it out; neither set counts the other's pod as unmanaged. The
// validating webhook refuses a canary that would not replace its base.
func TestCanary(t *testing.T) {
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.CreatePods(1, nil, nil)

	track := map[string]string{"example.com/track": "canary"}
	canary := f.SidecarSet("exporter:v2", 0)
	canary.Name = f.Set + "-canary"
	canary.Annotations = map[string]string{v1alpha1.AnnotationCanary: "true", v1alpha1.AnnotationCanaryOf: f.Set}
	for k, v := range track {
		canary.Spec.Selector.MatchLabels[k] = v
	}
	renamed := canary.DeepCopy()
	renamed.Spec.Containers[0].Name = "exporter-next"
	if err := f.Client.Create(t.Context(), renamed, client.DryRunAll); err == nil {
		t.Errorf("a canary with other container names than its base's was accepted")
	}
	c := *f.F
	c.Set = canary.Name
	c.CreateSet(canary)

	pod := f.NewPod("p02")
	for k, v := range track {
		pod.Labels[k] = v
	}
	f.CreatePod(pod)
	f.WaitReady(2)
	got := f.Pod("p02")
	if img := fixture.Image(got, "exporter"); img != "exporter:v2" {
		t.Errorf("the canary's pod runs exporter %s, want exporter:v2", img)
	}
	if names := got.Annotations[v1alpha1.AnnotationInjected]; names != canary.Name {
		t.Errorf("the canary's pod names %q injected, want %q", names, canary.Name)
	}

	// The base's running pod, now selected by the canary too, stays the
	// base's: a base update reaches it, and recounts the base's pods.
	base := f.Pod("p01")
	patch := client.MergeFrom(base.DeepCopy())
	for k, v := range track {
		base.Labels[k] = v
	}
	if err := f.Client.Patch(t.Context(), base, patch); err != nil {
		t.Fatal(err)
	}
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v3" })
	st := f.WaitComplete(1)
	if st.MatchedPods != 1 || st.UnmanagedPods != 0 {
		t.Errorf("base status %+v: want 1 matched pod (p01) and none unmanaged", st)
	}
	cst := c.WaitComplete(1)
	if cst.MatchedPods != 1 || cst.UnmanagedPods != 0 {
		t.Errorf("canary status %+v: want 1 matched pod (p02) and none unmanaged", cst)
	}
	images := map[string]string{}
	for _, p := range f.Pods() {
		images[p.Name] = fixture.Image(&p, "exporter")
	}
	if diff := cmp.Diff(map[string]string{"p01": "exporter:v3", "p02": "exporter:v2"}, images); diff != "" {
		t.Errorf("exporter images (-want +got):\n%s", diff)
	}
}

// TestCanaryRightAfterItsBase: a canary sent a moment after its base, as
// `kubectl apply` of one file sends them, finds the base: the validating
// webhook reads the other SidecarSets from the apiserver, not from a cache
// the base may not have reached yet.
func TestCanaryRightAfterItsBase(t *testing.T) {
	f := newFixture(t)
	for i := range 200 {
		base := f.SidecarSet("exporter:v1", 0)
		base.Name = fmt.Sprintf("%s-%02d", f.Set, i)
		base.Spec.Selector.MatchLabels["example.com/round"] = base.Name
		canary := f.SidecarSet("exporter:v2", 0)
		canary.Name = base.Name + "-canary"
		canary.Annotations = map[string]string{v1alpha1.AnnotationCanary: "true", v1alpha1.AnnotationCanaryOf: base.Name}
		canary.Spec.Selector.MatchLabels["example.com/round"] = base.Name
		canary.Spec.Selector.MatchLabels["example.com/track"] = "canary"
		if err := f.Client.Create(t.Context(), base); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := f.Client.Delete(context.Background(), base); client.IgnoreNotFound(err) != nil {
				t.Errorf("delete %s: %v", base.Name, err)
			}
		})
		if err := f.Client.Create(t.Context(), canary, client.DryRunAll); err != nil {
			t.Fatalf("round %d: the canary of a base created just before is refused: %v", i, err)
		}
	}
}
