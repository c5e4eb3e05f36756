package inject_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

func sized(name, image string, keep bool) v1alpha1.SidecarContainer {
	sc := testutil.Container(name, image).Sidecar("")
	sc.ResourcesPolicy = &v1alpha1.ResourcesPolicy{
		TargetContainersMode:      v1alpha1.TargetContainersModeSum,
		TargetContainersNameRegex: ".*",
		KeepQoSClass:              keep,
		ResourcesExpr: v1alpha1.ResourcesExpr{
			Limits:   &v1alpha1.ResourceExpressions{CPU: "cpu * 50%", Memory: "memory / 2"},
			Requests: &v1alpha1.ResourceExpressions{CPU: "cpu * 10%", Memory: "memory / 8"},
		},
	}
	return sc
}

func containerNamed(pod *corev1.Pod, name string) corev1.Container {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if c.Name == name {
				return c
			}
		}
	}
	return corev1.Container{}
}

func sameQuantities(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }

// TestInjectResourcesPolicy: the sidecar gets what its policy computes from
// the pod's own containers, never from another set's sidecar injected in
// the same call; with keepQoSClass a Guaranteed pod stays Guaranteed
// without a warning, and without it the QoS warning names the sidecar.
func TestInjectResourcesPolicy(t *testing.T) {
	proxySet := testutil.SidecarSet("a-proxy").Selector(dbLabels).
		Containers(testutil.Container("proxy", proxyImage).Requests("4", "4Gi").Limits("4", "4Gi").Sidecar("")).Obj()
	pod := testutil.Pod("shop", "db-0").Labels(dbLabels).
		Containers(testutil.Container("app", appImage).Requests("1", "1Gi").Limits("1", "1Gi").Obj(),
			testutil.Container("worker", appImage).Requests("1", "1Gi").Limits("1", "1Gi").Obj()).Obj()
	tests := []struct {
		name    string
		keep    bool
		want    corev1.ResourceRequirements
		warning string
	}{
		{
			name: "without keepQoSClass",
			want: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			},
			warning: `injection changes the pod's QoS class from Guaranteed to Burstable (SidecarSet "b-sized" container "meter")`,
		},
		{
			name: "with keepQoSClass",
			keep: true,
			want: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := testutil.SidecarSet("b-sized").Selector(dbLabels).Containers(sized("meter", exporterImage, tt.keep)).Obj()
			res := inject.Inject(pod, shop, []*v1alpha1.SidecarSet{set, proxySet}, opts)
			if diff := cmp.Diff([]string{"a-proxy", "b-sized"}, res.Injected); diff != "" {
				t.Fatalf("injected (-want +got):\n%s\nwarnings: %v", diff, res.Warnings)
			}
			got := containerNamed(res.Pod, "meter").Resources
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(sameQuantities)); diff != "" {
				t.Errorf("meter's resources (-want +got):\n%s", diff)
			}
			if set.Spec.Containers[0].Resources.Limits != nil {
				t.Errorf("the set was modified: %+v", set.Spec.Containers[0].Resources)
			}
			var warnings []string
			for _, w := range res.Warnings {
				if strings.Contains(w, "QoS") {
					warnings = append(warnings, w)
				}
			}
			switch {
			case tt.warning == "" && len(warnings) > 0:
				t.Errorf("unexpected QoS warnings: %v", warnings)
			case tt.warning != "" && (len(warnings) != 1 || !strings.HasPrefix(warnings[0], tt.warning)):
				t.Errorf("QoS warnings %v, want one starting %q", warnings, tt.warning)
			}
		})
	}
}

// TestInjectResourcesPolicySkips: a pod whose containers the regex does
// not select is created without the set, which is listed as skipped with
// the reason.
func TestInjectResourcesPolicySkips(t *testing.T) {
	sc := sized("meter", exporterImage, false)
	sc.ResourcesPolicy.TargetContainersNameRegex = "^main$"
	set := testutil.SidecarSet("sized").Selector(dbLabels).Containers(sc).Obj()
	res := inject.Inject(dbPod().Obj(), shop, []*v1alpha1.SidecarSet{set}, opts)
	want := []inject.Skip{{Set: "sized", Reason: `container "meter" resourcesPolicy: no container of the pod matches targetContainersNameRegex "^main$"`}}
	if diff := cmp.Diff(want, res.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if len(res.Injected) != 0 || len(res.Pod.Spec.Containers) != 1 {
		t.Errorf("the set went in: injected %v, containers %d", res.Injected, len(res.Pod.Spec.Containers))
	}
}

// TestSetWarningsResourcesPolicy: a sidecar whose resources are computed
// draws no warning about having none.
func TestSetWarningsResourcesPolicy(t *testing.T) {
	set := testutil.SidecarSet("sized").Selector(dbLabels).Containers(sized("meter", exporterImage, false)).Obj()
	if got := slices.DeleteFunc(inject.SetWarnings(set), isReadinessWarning); len(got) != 0 {
		t.Errorf("warnings %v, want none but the readiness one", got)
	}
}
