package controller

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOtherPodWebhook: another configuration's webhook the apiserver may
// call on a pod's creation is found, whatever wildcards its rules use;
// ours, and webhooks on other resources or operations, are not.
func TestOtherPodWebhook(t *testing.T) {
	config := func(name string, rules ...admissionregistrationv1.RuleWithOperations) admissionregistrationv1.MutatingWebhookConfiguration {
		return admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Webhooks:   []admissionregistrationv1.MutatingWebhook{{Name: "w." + name, Rules: rules}},
		}
	}
	rule := func(groups, ops, resources []string) admissionregistrationv1.RuleWithOperations {
		r := admissionregistrationv1.RuleWithOperations{Rule: admissionregistrationv1.Rule{APIGroups: groups, Resources: resources}}
		for _, o := range ops {
			r.Operations = append(r.Operations, admissionregistrationv1.OperationType(o))
		}
		return r
	}
	core, create, pods := []string{""}, []string{"CREATE"}, []string{"pods"}
	tests := []struct {
		name    string
		configs []admissionregistrationv1.MutatingWebhookConfiguration
		want    string
	}{
		{"only ours", []admissionregistrationv1.MutatingWebhookConfiguration{config("sidecarset-mutating", rule(core, create, pods))}, ""},
		{"another on pod creates", []admissionregistrationv1.MutatingWebhookConfiguration{
			config("sidecarset-mutating", rule(core, create, pods)), config("mesh", rule(core, create, pods))}, "mesh/w.mesh"},
		{"wildcards", []admissionregistrationv1.MutatingWebhookConfiguration{config("policy", rule([]string{"*"}, []string{"*"}, []string{"*"}))}, "policy/w.policy"},
		{"every subresource", []admissionregistrationv1.MutatingWebhookConfiguration{config("audit", rule(core, create, []string{"*/*"}))}, "audit/w.audit"},
		{"pod updates only", []admissionregistrationv1.MutatingWebhookConfiguration{config("upd", rule(core, []string{"UPDATE"}, pods))}, ""},
		{"a subresource of pods", []admissionregistrationv1.MutatingWebhookConfiguration{config("exec", rule(core, create, []string{"pods/exec"}))}, ""},
		{"another group", []admissionregistrationv1.MutatingWebhookConfiguration{config("apps", rule([]string{"apps"}, create, []string{"*"}))}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := otherPodWebhook(tt.configs, "sidecarset-mutating"); got != tt.want {
				t.Errorf("otherPodWebhook = %q, want %q", got, tt.want)
			}
		})
	}
}
