package inject

import "github.com/sidecarset/sidecarset/api/v1alpha1"

// ByPolicy says whether set's MutatingAdmissionPolicy injects it, so that
// the webhook leaves it out. The controller says Policy in
// status.injection only once the apiserver has had time to load the policy,
// and keeps the policy until the path has said Webhook for as long
// (status.Injection), so the webhook starts before the policy stops: a pod
// both inject is injected once, since a set already in its records is never
// injected again.
//
// Worked cases:
//
//	no status.injection (a manager without the policy path) → false
//	path Webhook (any reason, PolicyPending included)        → false
//	path None (paused: Inject skips the set anyway)          → false
//	path Policy                                              → true
func ByPolicy(set *v1alpha1.SidecarSet) bool {
	in := set.Status.Injection
	return in != nil && in.Path == v1alpha1.InjectionPolicy
}
