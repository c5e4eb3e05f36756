package scope_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
	"pgregory.net/rapid"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/scope"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

var system = []string{"kube-node-lease", "kube-public", "kube-system", "sidecarset-system"}

// webhook is a Scope as the apiserver reads it: its selectors, and its
// matchConditions compiled by the apiserver's own code, as for a new
// webhook configuration.
type webhook struct {
	ns, obj labels.Selector
	matcher matchconditions.Matcher
}

// tb is what both testing.T and rapid.T offer.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

func compileScope(t tb, sc scope.Scope) webhook {
	t.Helper()
	ns, err := metav1.LabelSelectorAsSelector(sc.NamespaceSelector)
	if err != nil {
		t.Fatalf("namespaceSelector: %v", err)
	}
	obj, err := metav1.LabelSelectorAsSelector(sc.ObjectSelector)
	if err != nil {
		t.Fatalf("objectSelector: %v", err)
	}
	accessors := make([]plugincel.ExpressionAccessor, len(sc.MatchConditions))
	for i, mc := range sc.MatchConditions {
		accessors[i] = &matchconditions.MatchCondition{Name: mc.Name, Expression: mc.Expression}
	}
	compiler := plugincel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	eval := compiler.CompileCondition(accessors, plugincel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.NewExpressions)
	if errs := eval.CompilationErrors(); len(errs) > 0 {
		t.Fatalf("matchConditions do not compile: %v\n%+v", errs, sc.MatchConditions)
	}
	fail := admissionregistrationv1.Fail
	return webhook{ns: ns, obj: obj, matcher: matchconditions.NewMatcher(eval, &fail, "webhook", "admit", "pods.sidecarset.dev")}
}

// called reports whether the apiserver would call the webhook for pod's
// creation in ns.
func (w webhook) called(t tb, pod *corev1.Pod, ns *corev1.Namespace) bool {
	t.Helper()
	if !w.ns.Matches(labels.Set(ns.Labels)) || !w.obj.Matches(labels.Set(pod.Labels)) {
		return false
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	attr := admission.NewAttributesRecord(pod, nil, gvk, ns.Name, pod.Name, gvr, "", admission.Create, &metav1.CreateOptions{}, false, nil)
	res := w.matcher.Match(context.Background(), &admission.VersionedAttributes{
		Attributes: attr, VersionedObject: admission.NewLazyObject(pod), VersionedKind: gvk,
	}, nil, nil)
	if res.Error != nil {
		t.Fatalf("matchConditions fail on pod %+v: %v", pod.ObjectMeta, res.Error)
	}
	return res.Matches
}

func namespace(name string, l map[string]string) *corev1.Namespace {
	ns := testutil.Namespace(name, l)
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	// The apiserver sets it on every namespace.
	ns.Labels[corev1.LabelMetadataName] = name
	return ns
}

func TestOf(t *testing.T) {
	db := map[string]string{"app": "db"}
	exclusion := metav1.LabelSelectorRequirement{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: system}
	cases := []struct {
		name string
		sets []*v1alpha1.SidecarSet
		// want's MatchConditions are checked by name only here; what they
		// let through is checked by TestOfCalls.
		wantNS, wantObj []metav1.LabelSelectorRequirement
		wantMatched     string
	}{{
		name:        "no sets: nothing is called",
		wantNS:      []metav1.LabelSelectorRequirement{exclusion},
		wantMatched: "false",
	}, {
		name:        "a paused set is as none",
		sets:        []*v1alpha1.SidecarSet{testutil.SidecarSet("a").Selector(db).Paused().Obj()},
		wantNS:      []metav1.LabelSelectorRequirement{exclusion},
		wantMatched: "false",
	}, {
		name:        "a set a policy injects is as none",
		sets:        []*v1alpha1.SidecarSet{byPolicy(testutil.SidecarSet("a").Selector(db).Obj())},
		wantNS:      []metav1.LabelSelectorRequirement{exclusion},
		wantMatched: "false",
	}, {
		name:        "a set with an empty selector is as none",
		sets:        []*v1alpha1.SidecarSet{testutil.SidecarSet("a").LabelSelector(&metav1.LabelSelector{}).Obj()},
		wantNS:      []metav1.LabelSelectorRequirement{exclusion},
		wantMatched: "false",
	}, {
		name:    "one set: its labels in both the objectSelector and CEL",
		sets:    []*v1alpha1.SidecarSet{testutil.SidecarSet("a").Selector(db).Obj()},
		wantNS:  []metav1.LabelSelectorRequirement{exclusion},
		wantObj: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"db"}}},
		wantMatched: `(has(object.metadata.labels) ? ("app" in object.metadata.labels && object.metadata.labels["app"] == "db") : false) || ` +
			`(has(object.metadata.annotations) && ("sidecarset.dev/state" in object.metadata.annotations || "sidecarset.dev/skipped" in object.metadata.annotations))`,
	}, {
		name: "app=db and app In (db, web): the values' union",
		sets: []*v1alpha1.SidecarSet{
			testutil.SidecarSet("a").Selector(db).Obj(),
			testutil.SidecarSet("b").LabelSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "db"}},
			}}).Obj(),
		},
		wantNS:  []metav1.LabelSelectorRequirement{exclusion},
		wantObj: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"db", "web"}}},
		wantMatched: `(has(object.metadata.labels) ? (("app" in object.metadata.labels && object.metadata.labels["app"] == "db") || ` +
			`("app" in object.metadata.labels && object.metadata.labels["app"] in ["db", "web"])) : false) || ` +
			`(has(object.metadata.annotations) && ("sidecarset.dev/state" in object.metadata.annotations || "sidecarset.dev/skipped" in object.metadata.annotations))`,
	}, {
		name: "app=db and app Exists: Exists",
		sets: []*v1alpha1.SidecarSet{
			testutil.SidecarSet("a").Selector(db).Obj(),
			testutil.SidecarSet("b").LabelSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpExists},
			}}).Obj(),
		},
		wantNS:  []metav1.LabelSelectorRequirement{exclusion},
		wantObj: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}},
	}, {
		name: "nothing shared: only the exclusion; a namespace label does not reach CEL",
		sets: []*v1alpha1.SidecarSet{
			testutil.SidecarSet("a").Selector(db).NamespaceSelector(map[string]string{"team": "x"}).Obj(),
			testutil.SidecarSet("b").Selector(map[string]string{"tier": "front"}).Obj(),
		},
		wantNS: []metav1.LabelSelectorRequirement{exclusion},
		wantMatched: `(has(object.metadata.labels) ? (("app" in object.metadata.labels && object.metadata.labels["app"] == "db") || ` +
			`("tier" in object.metadata.labels && object.metadata.labels["tier"] == "front")) : false) || ` +
			`(has(object.metadata.annotations) && ("sidecarset.dev/state" in object.metadata.annotations || "sidecarset.dev/skipped" in object.metadata.annotations))`,
	}, {
		name: "every set needs team: the namespaceSelector holds it",
		sets: []*v1alpha1.SidecarSet{
			testutil.SidecarSet("a").Selector(db).NamespaceSelector(map[string]string{"team": "x"}).Obj(),
			testutil.SidecarSet("b").Selector(db).NamespaceSelector(map[string]string{"team": "y"}).Obj(),
		},
		wantNS:  []metav1.LabelSelectorRequirement{exclusion, {Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "y"}}},
		wantObj: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"db"}}},
		// The same pod selector, once.
		wantMatched: `(has(object.metadata.labels) ? ("app" in object.metadata.labels && object.metadata.labels["app"] == "db") : false) || ` +
			`(has(object.metadata.annotations) && ("sidecarset.dev/state" in object.metadata.annotations || "sidecarset.dev/skipped" in object.metadata.annotations))`,
	}, {
		name: "a namespace by name: CEL on request.namespace; a selector met without labels",
		sets: []*v1alpha1.SidecarSet{
			testutil.SidecarSet("a").LabelSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}},
			}}).NamespaceSelector(map[string]string{corev1.LabelMetadataName: "shop"}).Obj(),
		},
		wantNS: []metav1.LabelSelectorRequirement{exclusion, {Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: []string{"shop"}}},
		wantMatched: `(has(object.metadata.labels) ? ((request.namespace in ["shop"]) && ((!("app" in object.metadata.labels) || !(object.metadata.labels["app"] in ["web"])))) : (request.namespace in ["shop"])) || ` +
			`(has(object.metadata.annotations) && ("sidecarset.dev/state" in object.metadata.annotations || "sidecarset.dev/skipped" in object.metadata.annotations))`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := scope.Of(tc.sets, system)
			if diff := cmp.Diff(tc.wantNS, got.NamespaceSelector.MatchExpressions); diff != "" {
				t.Errorf("namespaceSelector (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantObj, got.ObjectSelector.MatchExpressions); diff != "" {
				t.Errorf("objectSelector (-want +got):\n%s", diff)
			}
			if len(got.MatchConditions) != 2 || got.MatchConditions[0].Name != scope.ConditionMatched || got.MatchConditions[1].Name != scope.ConditionNotOptedOut {
				t.Fatalf("matchConditions %+v, want %s and %s", got.MatchConditions, scope.ConditionMatched, scope.ConditionNotOptedOut)
			}
			if tc.wantMatched != "" {
				if diff := cmp.Diff(tc.wantMatched, got.MatchConditions[0].Expression); diff != "" {
					t.Errorf("%s (-want +got):\n%s", scope.ConditionMatched, diff)
				}
			}
			compileScope(t, got)
		})
	}
}

// TestOfCalls reads worked cases through the apiserver's own evaluation of
// the scope.
func TestOfCalls(t *testing.T) {
	sets := []*v1alpha1.SidecarSet{
		testutil.SidecarSet("db").Selector(map[string]string{"app": "db"}).NamespaceSelector(map[string]string{"team": "x"}).Obj(),
		testutil.SidecarSet("front").Selector(map[string]string{"tier": "front"}).NamespaceSelector(map[string]string{corev1.LabelMetadataName: "shop"}).Obj(),
	}
	w := compileScope(t, scope.Of(sets, system))
	teamX := namespace("stock", map[string]string{"team": "x"})
	shop := namespace("shop", nil)
	pod := func(l, a map[string]string) *corev1.Pod {
		return testutil.Pod("", "p").Labels(l).Annotations(a).Obj()
	}
	cases := []struct {
		name string
		pod  *corev1.Pod
		ns   *corev1.Namespace
		want bool
	}{
		{name: "db's labels, in its namespace", pod: pod(map[string]string{"app": "db"}, nil), ns: teamX, want: true},
		{name: "db's labels elsewhere: called, namespace labels are not in CEL", pod: pod(map[string]string{"app": "db"}, nil), ns: shop, want: true},
		{name: "front's labels in shop", pod: pod(map[string]string{"tier": "front"}, nil), ns: shop, want: true},
		{name: "front's labels outside shop: not called", pod: pod(map[string]string{"tier": "front"}, nil), ns: teamX, want: false},
		{name: "other labels: not called", pod: pod(map[string]string{"app": "web"}, nil), ns: teamX, want: false},
		{name: "no labels: not called", pod: pod(nil, nil), ns: teamX, want: false},
		{name: "opted out: not called", pod: pod(map[string]string{"app": "db"}, map[string]string{v1alpha1.AnnotationInject: "false"}), ns: teamX, want: false},
		{name: "inject: true is no opt-out", pod: pod(map[string]string{"app": "db"}, map[string]string{v1alpha1.AnnotationInject: "true"}), ns: teamX, want: true},
		{name: "a record copied from another pod: called", pod: pod(map[string]string{"app": "web"}, map[string]string{v1alpha1.AnnotationState: "{}"}), ns: teamX, want: true},
		{name: "a system namespace: not called", pod: pod(map[string]string{"app": "db"}, nil), ns: namespace("kube-system", map[string]string{"team": "x"}), want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := w.called(t, tc.pod, tc.ns); got != tc.want {
				t.Errorf("called %v, want %v", got, tc.want)
			}
		})
	}
}

// TestOfReachesEveryMatch: for any sets, pod and namespace, the webhook is
// called whenever a set would be injected into the pod, and never when no
// set is active.
func TestOfReachesEveryMatch(t *testing.T) {
	keys := []string{"app", "tier", "example.com/db"}
	values := []string{"a", "b", "c"}
	labelMap := func(t *rapid.T, label string) map[string]string {
		return rapid.MapOfN(rapid.SampledFrom(keys), rapid.SampledFrom(values), 0, 3).Draw(t, label)
	}
	requirement := func(t *rapid.T, label string, keys []string) metav1.LabelSelectorRequirement {
		op := rapid.SampledFrom([]metav1.LabelSelectorOperator{
			metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist,
		}).Draw(t, label+"-op")
		r := metav1.LabelSelectorRequirement{Key: rapid.SampledFrom(keys).Draw(t, label+"-key"), Operator: op}
		if op == metav1.LabelSelectorOpIn || op == metav1.LabelSelectorOpNotIn {
			r.Values = rapid.SliceOfNDistinct(rapid.SampledFrom(append(values, "shop", "stock")), 1, 3, rapid.ID).Draw(t, label+"-values")
		}
		return r
	}
	selector := func(t *rapid.T, label string, keys []string) *metav1.LabelSelector {
		s := &metav1.LabelSelector{MatchLabels: rapid.MapOfN(rapid.SampledFrom(keys), rapid.SampledFrom(values), 0, 2).Draw(t, label+"-labels")}
		for i := range rapid.IntRange(0, 2).Draw(t, label+"-n") {
			s.MatchExpressions = append(s.MatchExpressions, requirement(t, fmt.Sprintf("%s-%d", label, i), keys))
		}
		return s
	}
	nsKeys := append([]string{corev1.LabelMetadataName}, keys...)
	rapid.Check(t, func(t *rapid.T) {
		var sets []*v1alpha1.SidecarSet
		for i := range rapid.IntRange(0, 4).Draw(t, "sets") {
			b := testutil.SidecarSet(fmt.Sprintf("s%d", i)).Container(fmt.Sprintf("c%d", i), "exporter:1").
				LabelSelector(selector(t, fmt.Sprintf("sel%d", i), keys))
			if rapid.Bool().Draw(t, fmt.Sprintf("namespaced%d", i)) {
				b = b.NamespaceLabelSelector(selector(t, fmt.Sprintf("nssel%d", i), nsKeys))
			}
			if rapid.IntRange(0, 5).Draw(t, fmt.Sprintf("paused%d", i)) == 0 {
				b = b.Paused()
			}
			sets = append(sets, b.Obj())
		}
		ns := namespace(rapid.SampledFrom([]string{"shop", "stock", "kube-system"}).Draw(t, "ns"), labelMap(t, "nslabels"))
		annotations := map[string]string{}
		if rapid.IntRange(0, 4).Draw(t, "optout") == 0 {
			annotations[v1alpha1.AnnotationInject] = rapid.SampledFrom([]string{"false", "true"}).Draw(t, "inject")
		}
		pod := testutil.Pod("", "p").Container("app", "app:1").Labels(labelMap(t, "labels")).Annotations(annotations).Obj()
		if len(pod.Labels) == 0 && rapid.Bool().Draw(t, "nil-labels") {
			pod.Labels = nil
		}

		w := compileScope(t, scope.Of(sets, system))
		called := w.called(t, pod, ns)
		podInNS := pod.DeepCopy()
		podInNS.Namespace = ns.Name
		res := inject.Inject(podInNS, ns, sets, inject.Options{ManagerNamespace: "sidecarset-system"})
		if len(res.Injected) > 0 && !called {
			t.Fatalf("sets %v are injected into the pod (labels %v, annotations %v) in namespace %v, but the webhook is not called",
				res.Injected, pod.Labels, pod.Annotations, ns.Labels)
		}
		active := false
		for _, s := range sets {
			active = active || !s.Spec.InjectionStrategy.Paused
		}
		if !active && called {
			t.Fatalf("no set is active, but the webhook is called")
		}
	})
}

// byPolicy returns set with the status of a set its MutatingAdmissionPolicy
// injects.
func byPolicy(set *v1alpha1.SidecarSet) *v1alpha1.SidecarSet {
	set.Status.Injection = &v1alpha1.InjectionStatus{Path: v1alpha1.InjectionPolicy}
	return set
}

// TestOfNamespaces: without the pod selectors, the scope goes by namespace
// only: no objectSelector, and CEL that names no pod label.
func TestOfNamespaces(t *testing.T) {
	set := testutil.SidecarSet("a").Selector(map[string]string{"app": "db"}).
		NamespaceLabelSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: []string{"shop"}}}}).Obj()
	got := scope.OfNamespaces([]*v1alpha1.SidecarSet{set}, []string{"kube-system"})
	if len(got.ObjectSelector.MatchExpressions) != 0 {
		t.Errorf("objectSelector %v, want empty", got.ObjectSelector)
	}
	matched := got.MatchConditions[0].Expression
	if strings.Contains(matched, `"app"`) || !strings.Contains(matched, `"shop"`) {
		t.Errorf("matchConditions %s: want the namespace shop and no pod label", matched)
	}
	if none := scope.OfNamespaces([]*v1alpha1.SidecarSet{byPolicy(set.DeepCopy())}, nil); none.MatchConditions[0].Expression != "false" {
		t.Errorf("a set a policy injects: %s, want false", none.MatchConditions[0].Expression)
	}
}

// TestInstalled: the scope as the chart installs it, the exclusion only.
func TestInstalled(t *testing.T) {
	got := scope.Installed([]string{"sidecarset-system", "kube-system", "kube-system"})
	want := scope.Scope{
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "sidecarset-system"}}}},
		ObjectSelector: &metav1.LabelSelector{},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Installed (-want +got):\n%s", diff)
	}
	if none := scope.Installed(nil); len(none.NamespaceSelector.MatchExpressions) != 0 || none.MatchConditions != nil {
		t.Errorf("nothing excluded: %+v, want empty selectors and no matchConditions", none)
	}
}
