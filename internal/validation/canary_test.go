package validation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

const (
	canaryOfPath = "metadata.annotations[sidecarset.dev/canary-of]"
	canaryPath   = "metadata.annotations[sidecarset.dev/canary]"
)

var (
	webLabels    = map[string]string{"app": "web"}
	canaryLabels = map[string]string{"app": "web", "track": "canary"}
)

// proxyBase is the base of the canary cases: proxy into app=web pods.
func proxyBase() *testutil.SidecarSetBuilder {
	return testutil.SidecarSet("proxy").Selector(webLabels).Container("proxy", "registry.example/proxy@sha256:01")
}

// proxyCanary is its canary: the same container, into app=web,track=canary.
func proxyCanary() *testutil.SidecarSetBuilder {
	return testutil.SidecarSet("proxy-v2").Selector(canaryLabels).Container("proxy", "registry.example/proxy@sha256:02").CanaryOf("proxy")
}

func TestValidateCanary(t *testing.T) {
	cases := []struct {
		name   string
		set    *v1alpha1.SidecarSet
		others []*v1alpha1.SidecarSet
		want   []errSummary
		reason string
	}{
		{
			name:   "a canary of its base: the shared container name is no conflict",
			set:    proxyCanary().Obj(),
			others: []*v1alpha1.SidecarSet{proxyBase().Obj()},
		},
		{
			name:   "the base, created again while its canary exists",
			set:    proxyBase().Obj(),
			others: []*v1alpha1.SidecarSet{proxyCanary().Obj()},
		},
		{
			name:   "canary false is an ordinary set, and conflicts",
			set:    proxyCanary().Annotations(map[string]string{v1alpha1.AnnotationCanary: "false"}).Obj(),
			others: []*v1alpha1.SidecarSet{proxyBase().Obj()},
			want:   err(field.ErrorTypeForbidden, "spec.containers[0].name"),
		},
		{
			name:   "canary must be true or false",
			set:    proxyCanary().Annotations(map[string]string{v1alpha1.AnnotationCanary: "yes"}).Obj(),
			others: []*v1alpha1.SidecarSet{proxyBase().Obj()},
			want:   errs(err(field.ErrorTypeNotSupported, canaryPath), err(field.ErrorTypeForbidden, "spec.containers[0].name")),
		},
		{
			name:   "a canary names its base",
			set:    testutil.SidecarSet("proxy-v2").Selector(canaryLabels).Container("proxy", "p:2").Annotations(map[string]string{v1alpha1.AnnotationCanary: "true"}).Obj(),
			want:   err(field.ErrorTypeRequired, canaryOfPath),
			reason: "must name the SidecarSet it is the canary of",
		},
		{
			name:   "not its own canary",
			set:    proxyCanary().CanaryOf("proxy-v2").Obj(),
			want:   err(field.ErrorTypeInvalid, canaryOfPath),
			reason: "canary of itself",
		},
		{
			name: "the base must exist",
			set:  proxyCanary().Obj(),
			want: err(field.ErrorTypeNotFound, canaryOfPath),
		},
		{
			name:   "no chains: the base is a canary",
			set:    testutil.SidecarSet("proxy-v3").Selector(canaryLabels).Container("proxy", "p:3").CanaryOf("proxy-v2").Obj(),
			others: []*v1alpha1.SidecarSet{proxyBase().Obj(), proxyCanary().Obj()},
			// proxy is not its base: their shared container conflicts.
			want:   errs(err(field.ErrorTypeForbidden, canaryOfPath), err(field.ErrorTypeForbidden, "spec.containers[0].name")),
			reason: `SidecarSet "proxy-v2" is itself a canary (of "proxy")`,
		},
		{
			name: "no chains: a set with canaries becomes a canary",
			set:  proxyCanary().Obj(),
			others: []*v1alpha1.SidecarSet{proxyBase().Obj(),
				testutil.SidecarSet("proxy-v3").Selector(map[string]string{"app": "web", "track": "canary", "v": "3"}).Container("proxy", "p:3").CanaryOf("proxy-v2").Obj()},
			want:   err(field.ErrorTypeForbidden, canaryPath),
			reason: "a canary cannot have canaries of its own",
		},
		{
			name:   "the canary declares the base's container names",
			set:    proxyCanary().Container("debug", "debug:1").Obj(),
			others: []*v1alpha1.SidecarSet{proxyBase().Obj()},
			want:   err(field.ErrorTypeInvalid, "spec.containers"),
			reason: "(canary [debug proxy], base [proxy])",
		},
		{
			name:   "and its init container names",
			set:    proxyCanary().InitContainers(testutil.Container("mesh-init", "m:1").RestartAlways().Sidecar("")).Obj(),
			others: []*v1alpha1.SidecarSet{proxyBase().Obj()},
			want:   err(field.ErrorTypeInvalid, "spec.initContainers"),
			reason: "(canary [mesh-init], base none)",
		},
		{
			name:   "the canary selects only pods the base selects",
			set:    proxyCanary().Selector(map[string]string{"track": "canary"}).Obj(),
			others: []*v1alpha1.SidecarSet{proxyBase().Obj()},
			want:   err(field.ErrorTypeInvalid, "spec.selector"),
			reason: "does not require app in (web)",
		},
		{
			name: "a narrower selector written with expressions",
			set: proxyCanary().LabelSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "track", Operator: metav1.LabelSelectorOpExists}}}).Obj(),
			others: []*v1alpha1.SidecarSet{proxyBase().Obj()},
		},
		{
			name:   "and only namespaces the base selects",
			set:    proxyCanary().Annotations(map[string]string{v1alpha1.AnnotationAllowSystemNamespaces: "true"}).Obj(),
			others: []*v1alpha1.SidecarSet{proxyBase().Obj()},
			want:   err(field.ErrorTypeInvalid, "spec.namespaceSelector"),
			reason: "does not require kubernetes.io/metadata.name notin",
		},
		{
			name:   "two canaries of one base cannot select the same pods",
			set:    proxyCanary().Obj(),
			others: []*v1alpha1.SidecarSet{proxyBase().Obj(), proxyCanary().Named("proxy-v3").Selector(map[string]string{"app": "web", "zone": "a"}).Obj()},
			want:   errs(err(field.ErrorTypeForbidden, canaryOfPath), err(field.ErrorTypeForbidden, "spec.containers[0].name")),
			reason: `SidecarSet "proxy-v3" is also a canary of "proxy"`,
		},
		{
			name: "two canaries of one base that exclude each other",
			set:  proxyCanary().Obj(),
			others: []*v1alpha1.SidecarSet{proxyBase().Obj(),
				proxyCanary().Named("proxy-v3").Selector(map[string]string{"app": "web", "track": "beta"}).Obj()},
		},
		{
			name:   "the base cannot change the containers its canary replaces",
			set:    proxyBase().Container("debug", "debug:1").Obj(),
			others: []*v1alpha1.SidecarSet{proxyCanary().Obj()},
			want:   err(field.ErrorTypeInvalid, "spec.containers"),
			reason: `as the base of the canary SidecarSet "proxy-v2" (delete the canary first to change this)`,
		},
		{
			name:   "nor narrow its selector past its canary's",
			set:    proxyBase().Selector(map[string]string{"app": "web", "tier": "front"}).Obj(),
			others: []*v1alpha1.SidecarSet{proxyCanary().Obj()},
			want:   err(field.ErrorTypeInvalid, "spec.selector"),
			reason: "does not require tier in (front)",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ValidateCreate(tc.set, tc.others, Options{})
			if diff := cmp.Diff(tc.want, summarize(got)); diff != "" {
				t.Errorf("errors (-want +got):\n%s\n%v", diff, got)
			}
			if tc.reason != "" && !strings.Contains(got.ToAggregate().Error(), tc.reason) {
				t.Errorf("errors %q do not say %q", got.ToAggregate().Error(), tc.reason)
			}
		})
	}
}

func TestValidateCanaryUpdate(t *testing.T) {
	others := []*v1alpha1.SidecarSet{proxyBase().Obj(), proxyBase().Named("proxy-b").Obj()}
	for _, tc := range []struct {
		name     string
		old, new *v1alpha1.SidecarSet
		want     []errSummary
	}{
		// proxy is no longer its base, so their shared container conflicts.
		{"moving a canary to another base", proxyCanary().Obj(), proxyCanary().CanaryOf("proxy-b").Obj(),
			errs(err(field.ErrorTypeForbidden, canaryOfPath), err(field.ErrorTypeForbidden, "spec.containers[0].name"))},
		{"making an ordinary set a canary", proxyCanary().Annotations(map[string]string{v1alpha1.AnnotationCanary: "false"}).Obj(),
			proxyCanary().Obj(), nil},
		{"an annotation-only change is validated", proxyCanary().Obj(),
			proxyCanary().Annotations(map[string]string{v1alpha1.AnnotationCanaryOf: "gone"}).Obj(),
			errs(err(field.ErrorTypeForbidden, canaryOfPath), err(field.ErrorTypeNotFound, canaryOfPath),
				err(field.ErrorTypeForbidden, "spec.containers[0].name"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ValidateUpdate(tc.old, tc.new, others, Options{})
			if diff := cmp.Diff(tc.want, summarize(got)); diff != "" {
				t.Errorf("errors (-want +got):\n%s\n%v", diff, got)
			}
		})
	}
}

// TestSelectorWithin holds selectorWithin's rules, each way.
func TestSelectorWithin(t *testing.T) {
	sel := func(labels map[string]string, exprs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: labels, MatchExpressions: exprs}
	}
	req := func(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	in, notIn := metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn
	exists, absent := metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist
	for _, tc := range []struct {
		name         string
		inner, outer *metav1.LabelSelector
		want         bool
	}{
		{"In: app=web within app in (web,api)", sel(webLabels), sel(nil, req("app", in, "web", "api")), true},
		{"In: app in (web,api) not within app=web", sel(nil, req("app", in, "web", "api")), sel(webLabels), false},
		{"In: NotIn narrows inner's values", sel(nil, req("app", in, "web", "api"), req("app", notIn, "api")), sel(webLabels), true},
		{"NotIn: the key forbidden", sel(nil, req("app", absent)), sel(nil, req("app", notIn, "db")), true},
		{"NotIn: values outside", sel(webLabels), sel(nil, req("app", notIn, "db")), true},
		{"NotIn: all of them forbidden", sel(nil, req("app", notIn, "db", "cache")), sel(nil, req("app", notIn, "db")), true},
		{"NotIn: not all forbidden", sel(nil, req("app", notIn, "cache")), sel(nil, req("app", notIn, "db")), false},
		{"Exists: required by matchLabels", sel(webLabels), sel(nil, req("app", exists)), true},
		{"Exists: NotIn does not require it", sel(nil, req("app", notIn, "db")), sel(nil, req("app", exists)), false},
		{"DoesNotExist", sel(nil, req("app", absent)), sel(nil, req("app", absent)), true},
		{"DoesNotExist: Exists is not", sel(nil, req("app", exists)), sel(nil, req("app", absent)), false},
		{"an inner that matches nothing", sel(webLabels, req("app", absent)), sel(map[string]string{"x": "y"}), true},
		{"a nil outer selects everything", sel(webLabels), nil, true},
		{"a nil inner selects everything", nil, sel(webLabels), false},
		{"another key implies nothing", sel(map[string]string{"tier": "front"}), sel(webLabels), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := selectorWithin(tc.inner, tc.outer); got != tc.want {
				t.Errorf("selectorWithin = %v, want %v", got, tc.want)
			}
		})
	}
}
