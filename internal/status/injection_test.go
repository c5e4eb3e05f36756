package status

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// TestInjection has a row for every worked case of Injection's doc comment,
// and the cases around them.
func TestInjection(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 10, 0, time.UTC)
	at := func(sec int) time.Time { return time.Date(2026, 1, 1, 12, 0, sec, 0, time.UTC) }
	prev := func(path v1alpha1.InjectionPath, since int) *v1alpha1.InjectionStatus {
		return &v1alpha1.InjectionStatus{Path: path, Reason: "Before", LastTransitionTime: metav1.NewTime(at(since))}
	}
	type want struct {
		path           v1alpha1.InjectionPath
		reason         string
		write, remove  bool
		recheck        time.Duration
		transitionedAt time.Time
	}
	for _, tc := range []struct {
		name string
		in   InjectionInput
		want want
	}{{
		name: "policy mode, not in step: the webhook injects while the policy is written",
		in:   InjectionInput{Mode: ModePolicy},
		want: want{path: v1alpha1.InjectionWebhook, reason: v1alpha1.InjectionReasonPolicyPending, write: true, recheck: 5 * time.Second, transitionedAt: now},
	}, {
		name: "policy mode, in step for 2s of the 5s handover",
		in:   InjectionInput{Mode: ModePolicy, InStep: true, InStepSince: at(8), Previous: prev(v1alpha1.InjectionWebhook, 1)},
		want: want{path: v1alpha1.InjectionWebhook, reason: v1alpha1.InjectionReasonPolicyPending, write: true, recheck: 3 * time.Second, transitionedAt: at(1)},
	}, {
		name: "policy mode, in step for the whole handover: the policy injects",
		in:   InjectionInput{Mode: ModePolicy, InStep: true, InStepSince: at(5), Previous: prev(v1alpha1.InjectionWebhook, 1)},
		want: want{path: v1alpha1.InjectionPolicy, reason: v1alpha1.InjectionReasonPolicyInjects, write: true, transitionedAt: now},
	}, {
		name: "policy mode, already on the policy, an edit not written yet: its older version injects",
		in:   InjectionInput{Mode: ModePolicy, Previous: prev(v1alpha1.InjectionPolicy, 2)},
		want: want{path: v1alpha1.InjectionPolicy, reason: v1alpha1.InjectionReasonPolicyInjects, write: true, transitionedAt: at(2)},
	}, {
		name: "unsupported, leaving the policy: kept through the handover",
		in:   InjectionInput{Mode: ModePolicy, Unsupported: "x", InStep: true, InStepSince: at(0), Previous: prev(v1alpha1.InjectionPolicy, 2)},
		want: want{path: v1alpha1.InjectionWebhook, reason: v1alpha1.InjectionReasonUnsupported, recheck: 5 * time.Second, transitionedAt: now},
	}, {
		name: "unsupported from the start: nothing to hand over",
		in:   InjectionInput{Mode: ModePolicy, Unsupported: "x", Previous: prev(v1alpha1.InjectionWebhook, 0)},
		want: want{path: v1alpha1.InjectionWebhook, reason: v1alpha1.InjectionReasonUnsupported, remove: true, transitionedAt: at(0)},
	}, {
		name: "unsupported, first status: the handover starts now",
		in:   InjectionInput{Mode: ModePolicy, Unsupported: "x"},
		want: want{path: v1alpha1.InjectionWebhook, reason: v1alpha1.InjectionReasonUnsupported, recheck: 5 * time.Second, transitionedAt: now},
	}, {
		name: "webhook mode, webhook for 4s: the policy stays 1s more",
		in:   InjectionInput{Mode: ModeWebhook, Previous: prev(v1alpha1.InjectionWebhook, 6)},
		want: want{path: v1alpha1.InjectionWebhook, reason: v1alpha1.InjectionReasonWebhookMode, recheck: time.Second, transitionedAt: at(6)},
	}, {
		name: "webhook mode, webhook for 5s: the policy goes",
		in:   InjectionInput{Mode: ModeWebhook, Previous: prev(v1alpha1.InjectionWebhook, 5)},
		want: want{path: v1alpha1.InjectionWebhook, reason: v1alpha1.InjectionReasonWebhookMode, remove: true, transitionedAt: at(5)},
	}, {
		name: "webhook mode, resumed from a pause: no policy was left",
		in:   InjectionInput{Mode: ModeWebhook, Previous: prev(v1alpha1.InjectionNone, 9)},
		want: want{path: v1alpha1.InjectionWebhook, reason: v1alpha1.InjectionReasonWebhookMode, remove: true, transitionedAt: now},
	}, {
		name: "not served",
		in:   InjectionInput{Mode: ModeNotServed, Previous: prev(v1alpha1.InjectionPolicy, 0)},
		want: want{path: v1alpha1.InjectionWebhook, reason: v1alpha1.InjectionReasonPolicyNotServed, remove: true, transitionedAt: now},
	}, {
		name: "paused on the policy: removed at once",
		in:   InjectionInput{Mode: ModePolicy, Paused: true, InStep: true, Previous: prev(v1alpha1.InjectionPolicy, 0)},
		want: want{path: v1alpha1.InjectionNone, reason: v1alpha1.InjectionReasonPaused, remove: true, transitionedAt: now},
	}, {
		name: "paused in webhook mode",
		in:   InjectionInput{Mode: ModeWebhook, Paused: true, Previous: prev(v1alpha1.InjectionNone, 3)},
		want: want{path: v1alpha1.InjectionNone, reason: v1alpha1.InjectionReasonPaused, remove: true, transitionedAt: at(3)},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now, tc.in.Generation, tc.in.Policy = now, 7, "sidecarset-a"
			res := Injection(tc.in)
			got := want{
				path: res.Status.Path, reason: res.Status.Reason, write: res.Write, remove: res.Remove,
				recheck: res.RecheckAfter, transitionedAt: res.Status.LastTransitionTime.Time,
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if res.Status.ObservedGeneration != 7 || res.Status.Message == "" {
				t.Errorf("status %+v: want observedGeneration 7 and a message", res.Status)
			}
			if res.Write && res.Remove {
				t.Errorf("both write and remove")
			}
		})
	}
}

// TestInjectionNeverLeavesAGap walks a set from the webhook to the policy and
// back, a reconcile a second, and checks that at every instant the webhook
// (path not Policy) or an in-step policy injects it.
func TestInjectionNeverLeavesAGap(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var prev *v1alpha1.InjectionStatus
	exists, inStep := false, false
	var since time.Time
	mode := ModePolicy
	for sec := 0; sec < 40; sec++ {
		now := start.Add(time.Duration(sec) * time.Second)
		if sec == 20 {
			mode = ModeWebhook
		}
		res := Injection(InjectionInput{Mode: mode, InStep: inStep, InStepSince: since, Previous: prev, Now: now, Policy: "p"})
		switch {
		case res.Write && !inStep:
			exists, inStep, since = true, true, now
		case res.Remove:
			exists, inStep = false, false
		}
		prev = &res.Status
		webhookInjects := res.Status.Path != v1alpha1.InjectionPolicy
		policyInjects := exists && now.Sub(since) >= time.Second
		if !webhookInjects && !policyInjects {
			t.Fatalf("at %ds neither path injects: status %+v, policy exists %v", sec, res.Status, exists)
		}
	}
	if exists || prev.Path != v1alpha1.InjectionWebhook {
		t.Errorf("after the switch to webhook: policy exists %v, path %s", exists, prev.Path)
	}
}

func TestInjectionEqual(t *testing.T) {
	a := &v1alpha1.InjectionStatus{Path: v1alpha1.InjectionPolicy, Reason: "R", LastTransitionTime: metav1.NewTime(time.Unix(10, 0).UTC())}
	sameInstant := a.DeepCopy()
	sameInstant.LastTransitionTime = metav1.NewTime(time.Unix(10, 0).In(time.FixedZone("x", 3600)))
	other := a.DeepCopy()
	other.Reason = "S"
	for _, tc := range []struct {
		a, b *v1alpha1.InjectionStatus
		want bool
	}{{nil, nil, true}, {a, nil, false}, {a, sameInstant, true}, {a, other, false}} {
		if got := InjectionEqual(tc.a, tc.b); got != tc.want {
			t.Errorf("InjectionEqual(%+v, %+v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
