package integration

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/examples"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// TestResourcesPolicy: the example's SidecarSet, through the webhooks,
// gives its sidecar resources computed from the app container: in a
// Guaranteed pod, limits with requests equal to them (keepQoSClass), so the
// apiserver still classes the pod Guaranteed; in a pod whose app has no
// limits, the requests' formula and no limits. A new image then goes into
// both pods in place, the computed resources not making them not
// upgradable.
func TestResourcesPolicy(t *testing.T) {
	const pods = 2
	f := newFixture(t)
	b, err := examples.SidecarSets.ReadFile("sidecarsets/resources-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	set := &v1alpha1.SidecarSet{}
	if err := yaml.UnmarshalStrict(b, set); err != nil {
		t.Fatalf("decode the example: %v", err)
	}
	set.Name = f.Set
	set.Spec.Selector = &metav1.LabelSelector{MatchLabels: f.Labels}
	metrics := &set.Spec.Containers[0]
	metrics.Image = "exporter:v1"
	metrics.ResourcesPolicy.TargetContainersNameRegex = "^" + fixture.AppContainer + "$"
	f.CreateSet(set)

	res := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	app := res("cpu", "500m", "memory", "256Mi")
	want := map[string]struct {
		app     corev1.ResourceRequirements
		sidecar corev1.ResourceRequirements
		qos     corev1.PodQOSClass
	}{
		"p01": {
			app:     corev1.ResourceRequirements{Requests: app, Limits: app},
			sidecar: corev1.ResourceRequirements{Requests: res("cpu", "50m", "memory", "32Mi"), Limits: res("cpu", "50m", "memory", "32Mi")},
			qos:     corev1.PodQOSGuaranteed,
		},
		"p02": {
			app:     corev1.ResourceRequirements{Requests: app},
			sidecar: corev1.ResourceRequirements{Requests: res("cpu", "25m", "memory", "16Mi")},
			qos:     corev1.PodQOSBurstable,
		},
	}
	for _, name := range []string{"p01", "p02"} {
		pod := f.NewPod(name)
		pod.Spec.Containers[0].Resources = want[name].app
		f.CreatePod(pod)
	}
	f.WaitReady(pods)
	before := fixture.AppIDs(f.Pods())
	sameQuantity := cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })
	for _, p := range f.Pods() {
		var got *corev1.Container
		for i := range p.Spec.Containers {
			if p.Spec.Containers[i].Name == metrics.Name {
				got = &p.Spec.Containers[i]
			}
		}
		if got == nil {
			t.Fatalf("pod %s has no container %s", p.Name, metrics.Name)
		}
		if diff := cmp.Diff(want[p.Name].sidecar, got.Resources, sameQuantity); diff != "" {
			t.Errorf("pod %s sidecar resources (-want +got):\n%s", p.Name, diff)
		}
		if p.Status.QOSClass != want[p.Name].qos {
			t.Errorf("pod %s is %s, want %s", p.Name, p.Status.QOSClass, want[p.Name].qos)
		}
	}
	f.WaitComplete(pods)

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	st := f.WaitComplete(pods)
	if st.NotUpgradablePods != 0 {
		t.Errorf("status %+v: want no pod not upgradable", st)
	}
	for _, p := range f.Pods() {
		if img := fixture.Image(&p, metrics.Name); img != "exporter:v2" {
			t.Errorf("pod %s %s = %s, want exporter:v2", p.Name, metrics.Name, img)
		}
	}
	f.AssertAppsUntouched(before)
}
