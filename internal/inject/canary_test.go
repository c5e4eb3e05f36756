package inject_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

// TestInjectCanary follows the package documentation's worked case: base
// "proxy" selects app=web, its canary "proxy-v2" app=web,track=canary.
func TestInjectCanary(t *testing.T) {
	web := map[string]string{"app": "web"}
	canaryLabels := map[string]string{"app": "web", "track": "canary"}
	base := testutil.SidecarSet("proxy").Selector(web).Container("proxy", "registry.example/proxy@sha256:01")
	canary := testutil.SidecarSet("proxy-v2").Selector(canaryLabels).Container("proxy", "registry.example/proxy@sha256:02").CanaryOf("proxy")
	other := testutil.SidecarSet("exporter").Selector(web).Container("exporter", exporterImage)
	pod := func(labels map[string]string) *testutil.PodBuilder {
		return testutil.Pod("shop", "web-0").Labels(labels).Container("app", appImage)
	}
	for _, tc := range []struct {
		name string
		pod  *testutil.PodBuilder
		sets []*v1alpha1.SidecarSet
		want []string
	}{
		{"a pod the canary does not select gets the base", pod(web),
			[]*v1alpha1.SidecarSet{base.Obj(), canary.Obj()}, []string{"proxy"}},
		{"a pod the canary selects gets the canary and not the base", pod(canaryLabels),
			[]*v1alpha1.SidecarSet{base.Obj(), canary.Obj()}, []string{"proxy-v2"}},
		{"a paused canary hands its pods back to the base", pod(canaryLabels),
			[]*v1alpha1.SidecarSet{base.Obj(), testutil.SidecarSet("proxy-v2").Selector(canaryLabels).
				Container("proxy", "registry.example/proxy@sha256:02").CanaryOf("proxy").Paused().Obj()}, []string{"proxy"}},
		{"other sets are not replaced", pod(canaryLabels),
			[]*v1alpha1.SidecarSet{base.Obj(), canary.Obj(), other.Obj()}, []string{"exporter", "proxy-v2"}},
		{"a canary whose base is gone is an ordinary set", pod(canaryLabels),
			[]*v1alpha1.SidecarSet{canary.Obj()}, []string{"proxy-v2"}},
		{"canary-of without canary \"true\" replaces nothing", pod(canaryLabels),
			[]*v1alpha1.SidecarSet{base.Obj(), testutil.SidecarSet("proxy-v2").Selector(canaryLabels).
				Container("proxy", "registry.example/proxy@sha256:02").
				Annotations(map[string]string{v1alpha1.AnnotationCanaryOf: "proxy"}).Obj()}, []string{"proxy"}},
		{"a canary that does not fit the pod still replaces the base", pod(canaryLabels).Container("proxy", appImage),
			[]*v1alpha1.SidecarSet{base.Obj(), canary.Obj()}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := inject.Inject(tc.pod.Obj(), shop, tc.sets, opts)
			if diff := cmp.Diff(tc.want, res.Injected); diff != "" {
				t.Errorf("injected (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCanaryOf(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{"both annotations", map[string]string{v1alpha1.AnnotationCanary: "true", v1alpha1.AnnotationCanaryOf: "proxy"}, "proxy"},
		{"canary false", map[string]string{v1alpha1.AnnotationCanary: "false", v1alpha1.AnnotationCanaryOf: "proxy"}, ""},
		{"no base", map[string]string{v1alpha1.AnnotationCanary: "true"}, ""},
		{"itself", map[string]string{v1alpha1.AnnotationCanary: "true", v1alpha1.AnnotationCanaryOf: "proxy-v2"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := testutil.SidecarSet("proxy-v2").Annotations(tc.annotations).Obj()
			if got := inject.CanaryOf(set); got != tc.want {
				t.Errorf("CanaryOf = %q, want %q", got, tc.want)
			}
		})
	}
}
