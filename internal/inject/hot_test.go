package inject

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

// A HotUpgrade sidecar goes in as two slots, equal but for the name, the
// image and the version variables; the version annotations say 1 and 0,
// and the record marks both slots.
func TestInjectHotUpgrade(t *testing.T) {
	set := testutil.SidecarSet("mesh").Selector(map[string]string{"app": "web"}).
		HotContainer("proxy", "proxy:v1", "proxy-empty:1").Obj()
	set.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "edge"}}
	set.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		Exec: &corev1.ExecAction{Command: []string{"test", "-e", "/tmp/serving"}}}}
	pod := testutil.Pod("ns", "web-0").Labels(map[string]string{"app": "web"}).Container("app", "app:1").Obj()

	res := Inject(pod, nil, []*v1alpha1.SidecarSet{set}, Options{})
	if diff := cmp.Diff([]string{"mesh"}, res.Injected); diff != "" {
		t.Fatalf("injected (-want +got):\n%s; warnings %v", diff, res.Warnings)
	}
	env := func(slot string) []corev1.EnvVar {
		ref := func(prefix string) *corev1.EnvVarSource {
			return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1",
				FieldPath: "metadata.annotations['" + prefix + slot + "']"}}
		}
		return []corev1.EnvVar{{Name: "MODE", Value: "edge"},
			{Name: "SIDECARSET_VERSION", ValueFrom: ref("version.sidecarset.dev/")},
			{Name: "SIDECARSET_VERSION_ALT", ValueFrom: ref("versionalt.sidecarset.dev/")}}
	}
	probe := set.Spec.Containers[0].ReadinessProbe
	want := []corev1.Container{
		{Name: "proxy-1", Image: "proxy:v1", Env: env("proxy-1"), ReadinessProbe: probe},
		{Name: "proxy-2", Image: "proxy-empty:1", Env: env("proxy-2"), ReadinessProbe: probe},
		{Name: "app", Image: "app:1"},
	}
	if diff := cmp.Diff(want, res.Pod.Spec.Containers); diff != "" {
		t.Errorf("containers (-want +got):\n%s", diff)
	}
	wantAnnotations := map[string]string{
		"version.sidecarset.dev/proxy-1": "1", "versionalt.sidecarset.dev/proxy-1": "0",
		"version.sidecarset.dev/proxy-2": "0", "versionalt.sidecarset.dev/proxy-2": "1",
	}
	for k, v := range wantAnnotations {
		if got := res.Pod.Annotations[k]; got != v {
			t.Errorf("annotation %s = %q, want %q", k, got, v)
		}
	}
	state, err := revision.Decode(res.Pod.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	wantRecord := []revision.ContainerState{
		{Name: "proxy-1", Image: "proxy:v1", Hot: &revision.HotSlot{Of: "proxy", Version: 1}},
		{Name: "proxy-2", Image: "proxy-empty:1", Hot: &revision.HotSlot{Of: "proxy", Version: 0}},
	}
	if diff := cmp.Diff(wantRecord, state["mesh"].Containers); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	if set.Spec.Containers[0].Name != "proxy" || len(set.Spec.Containers[0].Env) != 1 {
		t.Errorf("injection changed the set: %+v", set.Spec.Containers[0].Container)
	}
}

// A pod that already has a container named like a slot keeps it, and the
// set is not injected.
func TestInjectHotUpgradeNameTaken(t *testing.T) {
	set := testutil.SidecarSet("mesh").Selector(map[string]string{"app": "web"}).
		HotContainer("proxy", "proxy:v1", "proxy-empty:1").Obj()
	pod := testutil.Pod("ns", "web-0").Labels(map[string]string{"app": "web"}).Container("proxy-2", "mine:1").Obj()
	res := Inject(pod, nil, []*v1alpha1.SidecarSet{set}, Options{})
	if len(res.Injected) != 0 {
		t.Fatalf("injected %v into a pod with a container proxy-2", res.Injected)
	}
	want := `SidecarSet "mesh" not injected: the pod already has a container named "proxy-2", which it keeps`
	if diff := cmp.Diff([]string{want}, res.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}
