package cli_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/cli"
)

// probeSets lists the probe SidecarSets left in the cluster.
func probeSets(t *testing.T) []string {
	t.Helper()
	var list v1alpha1.SidecarSetList
	if err := env.Client.List(t.Context(), &list, client.HasLabels{cli.LabelPreflight}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		if s.DeletionTimestamp == nil {
			names = append(names, s.Name)
		}
	}
	return names
}

func TestPreflight(t *testing.T) {
	f := newFixture(t)
	// A pod that happens to carry the probe label is a user's: preflight's
	// probe pods are dry runs, and it deletes no pod.
	mine := f.NewPod("mine")
	mine.Labels[cli.LabelPreflight] = "mine"
	f.CreatePod(mine)
	r := ok(t, "preflight", "-n", f.NS, "--timeout", "30s")
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(mine), &corev1.Pod{}); err != nil {
		t.Errorf("a pod labelled %s after preflight: %v", cli.LabelPreflight, err)
	}
	ls := lines(r.out)
	if len(ls) != 3 {
		t.Fatalf("want 3 lines, got:\n%s", r.out)
	}
	// A pass reads as one: no refusal quoted, no warnings about the probes.
	if !regexp.MustCompile(`^SidecarSet validating webhook: answered \(\d+ tr(y|ies)\): refused the invalid probe SidecarSet \(empty selector, dry run\), as it should$`).MatchString(ls[0]) {
		t.Errorf("first line %q, want the validating webhook's answer as a pass", ls[0])
	}
	mustContain(t, ls[1], "pod mutating webhook: answered (", "injected probe SidecarSet sidecarset-preflight-", "into a dry-run pod in namespace "+f.NS)
	mustContain(t, ls[2], "preflight passed: both webhooks answer")
	if r.errOut != "" {
		t.Errorf("a passing preflight wrote to stderr:\n%s", r.errOut)
	}
	if left := probeSets(t); len(left) > 0 {
		t.Errorf("probe SidecarSets left behind: %v", left)
	}

	r = kubectl(t, false, "preflight", "-n", "kube-system")
	if r.err == nil || !strings.Contains(r.err.Error(), "-n kube-system: the pod webhook never sees system namespaces") {
		t.Errorf("preflight in kube-system: %v", r.err)
	}
	r = kubectl(t, false, "preflight", "-n", "no-such-namespace")
	if r.err == nil || !strings.Contains(r.err.Error(), "-n no-such-namespace: the probe pod needs an existing namespace") {
		t.Errorf("preflight in a missing namespace: %v", r.err)
	}
}

func TestPreflightManagerDown(t *testing.T) {
	f := newFixture(t)
	if err := sys.StopManager(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sys.StartManager(); err != nil {
			t.Fatalf("restart the manager: %v", err)
		}
	}()

	r := kubectl(t, false, "preflight", "-n", f.NS, "--timeout", "2s")
	if !errors.Is(r.err, cli.ErrPreflight) {
		t.Fatalf("error %v, want one wrapping ErrPreflight", r.err)
	}
	mustContain(t, r.err.Error(), "a webhook did not answer within --timeout 2s")
	ls := lines(r.out)
	if len(ls) != 2 {
		t.Fatalf("want 2 lines, got:\n%s", r.out)
	}
	mustContain(t, ls[0], "SidecarSet validating webhook: did NOT answer (", "registered but not answering", "failed calling webhook")
	mustContain(t, ls[1], "pod mutating webhook: did NOT answer (", "could not create the probe SidecarSet, so injection was not tried")
	if left := probeSets(t); len(left) > 0 {
		t.Errorf("probe SidecarSets left behind: %v", left)
	}
}

// TestPreflightRestrictedNamespace: in a namespace enforcing Pod Security
// "restricted" under a ResourceQuota on requests and limits, the probe is
// admitted and preflight passes; a probe SidecarSet an earlier, killed run
// left behind is deleted first, one of a run still going on is kept.
func TestPreflightRestrictedNamespace(t *testing.T) {
	f := newFixture(t)
	ns := &corev1.Namespace{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: f.NS}, ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if err := env.Client.Update(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	small := resource.MustParse("1")
	f.Create(&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "quota"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		corev1.ResourceRequestsCPU: small, corev1.ResourceLimitsCPU: small,
		corev1.ResourceRequestsMemory: resource.MustParse("1Gi"), corev1.ResourceLimitsMemory: resource.MustParse("1Gi"),
	}}})
	// The quota controller must have counted the namespace before the
	// quota admits anything.
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		q := &corev1.ResourceQuota{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.NS, Name: "quota"}, q)
		return err == nil && len(q.Status.Hard) > 0, err
	}); err != nil {
		t.Fatal(err)
	}

	leftover := func(name string, expires time.Time) {
		set := &v1alpha1.SidecarSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{cli.LabelPreflight: "probe"},
				Annotations: map[string]string{cli.AnnotationPreflightExpires: expires.UTC().Format(time.RFC3339)}},
			Spec: v1alpha1.SidecarSetSpec{
				Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{cli.LabelPreflight: name}},
				Containers:     []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: "probe", Image: "exporter:v1"}}},
				UpdateStrategy: v1alpha1.UpdateStrategy{Type: v1alpha1.NotUpdateStrategy},
			},
		}
		if err := env.Client.Create(t.Context(), set); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), set) })
	}
	leftover(f.NS+"-old", time.Now().Add(-time.Minute))
	leftover(f.NS+"-running", time.Now().Add(time.Hour))

	r := ok(t, "preflight", "-n", f.NS, "--timeout", "20s")
	mustContain(t, r.out, "deleted probe SidecarSet "+f.NS+"-old, left by an earlier run",
		"pod mutating webhook: answered (", "preflight passed: both webhooks answer")
	if strings.Contains(r.out, f.NS+"-running") {
		t.Errorf("deleted the probe of a run still going on:\n%s", r.out)
	}
	if diff := cmp.Diff([]string{f.NS + "-running"}, probeSets(t)); diff != "" {
		t.Errorf("probe SidecarSets left (-want +got):\n%s", diff)
	}
}

// TestPreflightOtherWebhook: another webhook's "denied" is not taken for
// the manager's answer, and is reported as that webhook's.
func TestPreflightOtherWebhook(t *testing.T) {
	f := newFixture(t)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(req.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: false,
			Result: &metav1.Status{Code: http.StatusForbidden, Message: "forbidden by example policy"}}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	defer srv.Close()
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	hook := func(name string, rule admissionregv1.RuleWithOperations, ns *metav1.LabelSelector, obj *metav1.LabelSelector) admissionregv1.MutatingWebhook {
		return admissionregv1.MutatingWebhook{
			Name: name, AdmissionReviewVersions: []string{"v1"},
			ClientConfig:      admissionregv1.WebhookClientConfig{URL: ptr.To(srv.URL + "/deny"), CABundle: caBundle},
			Rules:             []admissionregv1.RuleWithOperations{rule},
			NamespaceSelector: ns, ObjectSelector: obj,
			SideEffects: ptr.To(admissionregv1.SideEffectClassNone), FailurePolicy: ptr.To(admissionregv1.Fail),
		}
	}
	rule := func(group, resource string, scope admissionregv1.ScopeType) admissionregv1.RuleWithOperations {
		return admissionregv1.RuleWithOperations{Operations: []admissionregv1.OperationType{admissionregv1.Create},
			Rule: admissionregv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}, Scope: &scope}}
	}
	// Named to sort before the manager's configurations: the apiserver
	// calls mutating webhooks in name order, so this one refuses first.
	cfg := &admissionregv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "aaa-" + f.NS},
		Webhooks: []admissionregv1.MutatingWebhook{
			hook("sidecarsets.policy.example.com", rule(v1alpha1.GroupVersion.Group, "sidecarsets", admissionregv1.ClusterScope), nil,
				&metav1.LabelSelector{MatchLabels: map[string]string{cli.LabelPreflight: "invalid"}}),
			hook("pods.policy.example.com", rule("", "pods", admissionregv1.NamespacedScope),
				&metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: f.NS}},
				&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: cli.LabelPreflight, Operator: metav1.LabelSelectorOpExists}}}),
		},
	}
	if err := env.Client.Create(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Client.Delete(context.Background(), cfg) }()

	r := kubectl(t, false, "preflight", "-n", f.NS, "--timeout", "2s")
	if !errors.Is(r.err, cli.ErrPreflight) {
		t.Fatalf("error %v, want ErrPreflight: another webhook's refusal was taken for ours", r.err)
	}
	ls := lines(r.out)
	if len(ls) != 2 {
		t.Fatalf("want 2 lines, got:\n%s", r.out)
	}
	mustContain(t, ls[0], "SidecarSet validating webhook: did NOT answer (", `another admission webhook, "sidecarsets.policy.example.com", refused the probe SidecarSet before ours answered`, "forbidden by example policy")
	mustContain(t, ls[1], "pod mutating webhook: did NOT answer (", `another admission webhook, "pods.policy.example.com", refused the probe pod, so the pod webhook's answer is unknown`)
}
