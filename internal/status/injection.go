package status

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// Mode is the injection path the manager was started for, as resolved
// against the apiserver.
type Mode string

const (
	// ModePolicy means SidecarSets a policy can express are injected by their
	// MutatingAdmissionPolicy, the others by the webhook.
	ModePolicy Mode = "Policy"
	// ModeWebhook is --injection=webhook: every set is injected by the webhook.
	ModeWebhook Mode = "Webhook"
	// ModeNotServed is --injection=auto against an apiserver that does not
	// serve MutatingAdmissionPolicy v1; every set is injected by the webhook.
	ModeNotServed Mode = "NotServed"
)

// Handover is how long both paths keep injecting a set when it moves from
// one to the other. The apiserver loads the policies and bindings it
// watches at most once a second (its policy source refreshes on that
// interval), and every manager replica's webhook reads the set's status
// from its own cache: until both have seen the change, the path being left
// must keep injecting, or a pod created in between would get neither. A pod
// that both inject is injected once: a set already in a pod's records is
// never injected again.
const Handover = 5 * time.Second

// InjectionInput is what Injection needs.
type InjectionInput struct {
	Mode Mode
	// Generation is the SidecarSet's metadata.generation.
	Generation int64
	// Paused is the set's injectionStrategy.paused.
	Paused bool
	// Unsupported, when not empty, is why a policy cannot express the set.
	Unsupported string
	// Policy names the set's MutatingAdmissionPolicy.
	Policy string
	// InStep: the set's policy and binding, as the controller reads them,
	// equal what it compiles for the set. InStepSince is when they last
	// became so (the controller's own write, or when it first saw them).
	InStep      bool
	InStepSince time.Time
	// Previous is status.injection as the set carries it; nil before the
	// first.
	Previous *v1alpha1.InjectionStatus
	Now      time.Time
}

// InjectionResult is the set's status.injection and what the controller
// does to its policy and binding.
type InjectionResult struct {
	Status v1alpha1.InjectionStatus
	// Write: the policy and binding must be written where they are not in
	// step. Otherwise they are left as they are, or deleted when Remove.
	Write  bool
	Remove bool
	// RecheckAfter, when not zero, is when a pending handover can go on.
	RecheckAfter time.Duration
}

// Injection decides which path injects a SidecarSet and what happens to its
// policy.
//
// The webhook leaves a set to its policy once status.injection.path says
// Policy, so that path is written only when the policy has been in step for
// Handover; when the set leaves the policy path, the policy is removed only
// once the path has said Webhook for Handover. Pausing removes it at once:
// nothing is to inject then.
//
// Worked cases, Handover 5s, now 12:00:10:
//
//	Mode Policy, not in step                            → Webhook PolicyPending, write, recheck 5s
//	Mode Policy, in step since 12:00:08                 → Webhook PolicyPending, write, recheck 3s
//	Mode Policy, in step since 12:00:05                 → Policy PolicyInjects, write
//	Mode Policy, previous Policy, not in step (an edit) → Policy PolicyInjects, write
//	Mode Policy, Unsupported                            → Webhook Unsupported; previous Policy: keep it, recheck 5s
//	Mode Webhook, previous Webhook since 12:00:06       → Webhook WebhookMode, keep it, recheck 1s
//	Mode Webhook, previous Webhook since 12:00:05       → Webhook WebhookMode, remove
//	Mode NotServed                                      → Webhook PolicyNotServed, remove (no policy can exist)
//	Paused, any mode                                    → None Paused, remove
func Injection(in InjectionInput) InjectionResult {
	var res InjectionResult
	switch {
	case in.Paused:
		res.Status = injectionStatus(v1alpha1.InjectionNone, v1alpha1.InjectionReasonPaused,
			"injectionStrategy.paused: new pods are not injected")
		res.Remove = true
	case in.Mode == ModeNotServed:
		res.Status = injectionStatus(v1alpha1.InjectionWebhook, v1alpha1.InjectionReasonPolicyNotServed,
			"--injection=auto and the apiserver does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy: the webhook injects")
		res.Remove = true
	case in.Mode == ModeWebhook:
		res.Status = injectionStatus(v1alpha1.InjectionWebhook, v1alpha1.InjectionReasonWebhookMode,
			"the manager runs with --injection=webhook: the webhook injects")
		res.Remove, res.RecheckAfter = leaving(in)
	case in.Unsupported != "":
		res.Status = injectionStatus(v1alpha1.InjectionWebhook, v1alpha1.InjectionReasonUnsupported,
			fmt.Sprintf("a MutatingAdmissionPolicy cannot express this SidecarSet (%s): the webhook injects", in.Unsupported))
		res.Remove, res.RecheckAfter = leaving(in)
	case in.Previous != nil && in.Previous.Path == v1alpha1.InjectionPolicy:
		// Already handed over: the policy injects, and an older version of
		// it keeps doing so until the write lands.
		res.Status = policyInjects(in.Policy)
		res.Write = true
	case in.InStep && !in.Now.Before(in.InStepSince.Add(Handover)):
		res.Status = policyInjects(in.Policy)
		res.Write = true
	default:
		res.Status = injectionStatus(v1alpha1.InjectionWebhook, v1alpha1.InjectionReasonPolicyPending,
			fmt.Sprintf("MutatingAdmissionPolicy %s is being written; the webhook injects until the apiserver has loaded it", in.Policy))
		res.Write = true
		res.RecheckAfter = Handover
		if in.InStep {
			res.RecheckAfter = in.InStepSince.Add(Handover).Sub(in.Now)
		}
	}
	res.Status.ObservedGeneration = in.Generation
	// In the precision the apiserver keeps, so that it reads back equal.
	res.Status.LastTransitionTime = metav1.NewTime(in.Now).Rfc3339Copy()
	if in.Previous != nil && in.Previous.Path == res.Status.Path {
		res.Status.LastTransitionTime = in.Previous.LastTransitionTime
	}
	return res
}

// leaving says whether a set whose webhook injects may lose its policy now,
// or when to look again: only once the path has said Webhook for Handover.
func leaving(in InjectionInput) (remove bool, recheck time.Duration) {
	prev := in.Previous
	switch {
	case prev == nil || prev.Path == v1alpha1.InjectionPolicy:
		// The path changes with this status: the handover starts now.
		return false, Handover
	case prev.Path == v1alpha1.InjectionNone:
		// Paused until now: its policy was removed then.
		return true, 0
	}
	if left := prev.LastTransitionTime.Add(Handover).Sub(in.Now); left > 0 {
		return false, left
	}
	return true, 0
}

func policyInjects(name string) v1alpha1.InjectionStatus {
	return injectionStatus(v1alpha1.InjectionPolicy, v1alpha1.InjectionReasonPolicyInjects,
		fmt.Sprintf("MutatingAdmissionPolicy %s and its binding inject new pods inside the apiserver", name))
}

func injectionStatus(path v1alpha1.InjectionPath, reason, message string) v1alpha1.InjectionStatus {
	return v1alpha1.InjectionStatus{Path: path, Reason: reason, Message: message}
}

// InjectionEqual says whether two status.injection values say the same;
// like condition times, the same instant may read back in another location.
func InjectionEqual(a, b *v1alpha1.InjectionStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Path == b.Path && a.Reason == b.Reason && a.Message == b.Message &&
		a.ObservedGeneration == b.ObservedGeneration && a.LastTransitionTime.Equal(&b.LastTransitionTime)
}
