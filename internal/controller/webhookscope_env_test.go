package controller_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/policy"
	"github.com/sidecarset/sidecarset/internal/status"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

// TestWebhookScopeWide: a manager told not to narrow the pod webhook
// writes back the scope as installed, undoing an earlier narrowing, and
// keeps the installed exclusions with its own namespace among them.
func TestWebhookScopeWide(t *testing.T) {
	c := directClient(t, env.Config)
	ns := namespace(t)
	name := "scope-" + ns
	cfg := scopeConfiguration(name)
	create(t, cfg)
	t.Cleanup(func() { _ = c.Delete(t.Context(), cfg) })
	set := testutil.SidecarSet("scope-"+ns).Selector(map[string]string{"example.com/app": ns}).
		Container("exporter", "exporter:v1").Obj()
	create(t, set)
	t.Cleanup(func() { _ = c.Delete(t.Context(), set) })

	webhook := func() admissionregistrationv1.MutatingWebhook {
		t.Helper()
		var got admissionregistrationv1.MutatingWebhookConfiguration
		if err := c.Get(t.Context(), client.ObjectKey{Name: name}, &got); err != nil {
			t.Fatal(err)
		}
		return got.Webhooks[0]
	}
	narrow := &controller.WebhookScope{Client: c, Configuration: name, Webhook: "pods.scope.test", Namespace: "sidecarset-system"}
	if err := narrow.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if w := webhook(); len(w.MatchConditions) == 0 || !strings.Contains(w.MatchConditions[0].Expression, ns) {
		t.Fatalf("narrowed: matchConditions %+v, want the set's selector", w.MatchConditions)
	}

	wide := &controller.WebhookScope{Client: c, Configuration: name, Webhook: "pods.scope.test", Namespace: "sidecarset-system", Wide: true}
	if err := wide.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	w := webhook()
	if len(w.MatchConditions) != 0 || len(w.ObjectSelector.MatchExpressions)+len(w.ObjectSelector.MatchLabels) != 0 {
		t.Errorf("wide: matchConditions %+v, objectSelector %v; want none, as installed", w.MatchConditions, w.ObjectSelector)
	}
	want := []metav1.LabelSelectorRequirement{{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "sidecarset-system"}}}
	if got := w.NamespaceSelector.MatchExpressions; len(got) != 1 || strings.Join(got[0].Values, ",") != strings.Join(want[0].Values, ",") || got[0].Operator != want[0].Operator {
		t.Errorf("wide: namespaceSelector %v, want %v", got, want)
	}
}

// TestScopeFailureHoldsObservedGeneration: while the pod webhook's scope
// cannot be written, a reconcile still writes the status, but with the
// generation it observed before, and fails so that it is retried; once
// the scope is written, the status observes the set's generation.
func TestScopeFailureHoldsObservedGeneration(t *testing.T) {
	c := directClient(t, env.Config)
	ns := namespace(t)
	set := testutil.SidecarSet("held-"+ns).Selector(map[string]string{"example.com/app": ns}).
		Container("exporter", "exporter:v1").Obj()
	create(t, set)
	t.Cleanup(func() { _ = c.Delete(t.Context(), set) })

	// No such configuration yet: every Sync fails.
	name := "held-" + ns
	sc := &controller.WebhookScope{Client: c, Configuration: name, Webhook: "pods.scope.test", Namespace: "sidecarset-system"}
	r := &controller.Reconciler{Client: c, APIReader: c, Recorder: &recorder{}, Namespace: ns,
		Clock: clock.RealClock{}, WebhookScope: sc}
	r.Init()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: set.Name}}
	if _, err := r.Reconcile(t.Context(), req); err == nil || !strings.Contains(err.Error(), "scope") {
		t.Fatalf("reconcile with the scope failing: error %v, want the scope's", err)
	}
	got := &v1alpha1.SidecarSet{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(set), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ObservedGeneration != 0 {
		t.Errorf("status.observedGeneration %d while the scope could not be written, want 0 (none observed before)", got.Status.ObservedGeneration)
	}

	create(t, scopeConfiguration(name))
	t.Cleanup(func() { _ = c.Delete(t.Context(), scopeConfiguration(name)) })
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatalf("reconcile with the scope written: %v", err)
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(set), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ObservedGeneration != got.Generation {
		t.Errorf("status.observedGeneration %d once the scope is written, want %d", got.Status.ObservedGeneration, got.Generation)
	}
}

// scopeConfiguration returns a MutatingWebhookConfiguration with one
// webhook, pods.scope.test, whose rules match no real resource: the
// package's other tests never reach it.
func scopeConfiguration(name string) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "pods.scope.test",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/pods")},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"none.scope.test"}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system"}}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}

// TestPolicyKeptUntilScopeTakesSetBack: a set handed back from its policy
// to the webhook keeps its policy while the pod webhook's scope cannot be
// written (the scope left the set out, and without the policy its new pods
// would get neither); once the scope is written, the policy goes.
func TestPolicyKeptUntilScopeTakesSetBack(t *testing.T) {
	c := directClient(t, env.Config)
	ns := namespace(t)
	set := testutil.SidecarSet("back-"+ns).Selector(map[string]string{"example.com/app": ns}).
		Container("exporter", "exporter:v1").Obj()
	create(t, set)
	t.Cleanup(func() { _ = c.Delete(t.Context(), set) })
	// The rollout's status first, then a path that says Webhook since a
	// minute: the handover is due.
	rec := &controller.Reconciler{Client: c, APIReader: c, Recorder: &recorder{}, Namespace: ns, Clock: clock.RealClock{}}
	rec.Init()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: set.Name}}
	if _, err := rec.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	since := metav1.NewTime(time.Now().Add(-time.Minute)).Rfc3339Copy()
	patch := fmt.Sprintf(`{"status":{"injection":{"path":"Webhook","reason":%q,"lastTransitionTime":%q}}}`,
		v1alpha1.InjectionReasonWebhookMode, since.Format(time.RFC3339))
	if err := c.Status().Patch(t.Context(), set, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{policy.LabelSet: set.Name}
	map1 := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name(set.Name), Labels: labels},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"none.scope.test"}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				}}}},
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "test", path: "/kind", value: "Pod"}]`}}},
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
		},
	}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name(set.Name), Labels: labels},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: policy.Name(set.Name)},
	}
	create(t, map1, binding)
	t.Cleanup(func() {
		_ = c.Delete(t.Context(), binding)
		_ = c.Delete(t.Context(), map1)
	})

	name := "back-" + ns
	r := &controller.PolicyReconciler{Client: c, Namespace: "sidecarset-system", Mode: status.ModeWebhook, Served: true,
		Clock:        clock.RealClock{},
		WebhookScope: &controller.WebhookScope{Client: c, Configuration: name, Webhook: "pods.scope.test", Namespace: "sidecarset-system"}}
	if _, err := r.Reconcile(t.Context(), req); err == nil {
		t.Fatal("the handover removed the policy with no scope written, or said nothing")
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(map1), &admissionregistrationv1.MutatingAdmissionPolicy{}); err != nil {
		t.Fatalf("the policy is gone while the scope could not be written: %v", err)
	}

	create(t, scopeConfiguration(name))
	t.Cleanup(func() { _ = c.Delete(t.Context(), scopeConfiguration(name)) })
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatalf("handover with the scope written: %v", err)
	}
	for _, obj := range []client.Object{map1, binding} {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s after the handover: %v, want not found", obj, obj.GetName(), err)
		}
	}
}
