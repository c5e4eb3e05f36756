package inject

import (
	"testing"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// TestByPolicy has a row for every worked case of ByPolicy's doc comment.
func TestByPolicy(t *testing.T) {
	for _, tc := range []struct {
		injection *v1alpha1.InjectionStatus
		want      bool
	}{
		{nil, false},
		{&v1alpha1.InjectionStatus{Path: v1alpha1.InjectionWebhook, Reason: v1alpha1.InjectionReasonPolicyPending}, false},
		{&v1alpha1.InjectionStatus{Path: v1alpha1.InjectionWebhook, Reason: v1alpha1.InjectionReasonUnsupported}, false},
		{&v1alpha1.InjectionStatus{Path: v1alpha1.InjectionNone, Reason: v1alpha1.InjectionReasonPaused}, false},
		{&v1alpha1.InjectionStatus{Path: v1alpha1.InjectionPolicy, Reason: v1alpha1.InjectionReasonPolicyInjects}, true},
	} {
		set := &v1alpha1.SidecarSet{Status: v1alpha1.SidecarSetStatus{Injection: tc.injection}}
		if got := ByPolicy(set); got != tc.want {
			t.Errorf("ByPolicy(injection %+v) = %v, want %v", tc.injection, got, tc.want)
		}
	}
}
