package rollout

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// Membership is what a pod is to one SidecarSet.
type Membership string

// Memberships, in the order MemberOf decides them.
const (
	// NotMatched: the set's selectors (or its namespace rules) do not select
	// the pod. It is none of the set's business.
	NotMatched Membership = "NotMatched"
	// Finished: matched, but being deleted or done (Succeeded, Failed). It
	// will never run again: it counts nowhere and is never written, so a
	// finished Job pod neither holds a rollout back nor shows as unmanaged.
	Finished Membership = "Finished"
	// Managed: matched and carrying the set's record. It counts in
	// matchedPods and takes part in the rollout.
	Managed Membership = "Managed"
	// Corrupt: the pod's marks say the set was injected, but its record
	// cannot be read or is incomplete. It counts in unmanagedPods (the set
	// cannot manage it), is told in an event, and is never written or
	// adopted: writing would guess at what the pod runs.
	Corrupt Membership = "Corrupt"
	// Replaced: no record of the set, which is the base of a canary (see
	// inject.CanaryOf) that carries the pod's record or would take the
	// set's place in it now (inject.Replaces). The pod is the canary's: the
	// base counts it nowhere, never writes nor adopts it.
	Replaced Membership = "Replaced"
	// KeptByBase: no record of the set, which is a canary, and the pod
	// carries its base's record: injected before the canary selected it. A
	// running pod cannot change sets in place, so it stays the base's until
	// it is recreated; the canary counts it nowhere, never writes nor
	// adopts it.
	KeptByBase Membership = "KeptByBase"
	// OptedOut: no record, and the pod refused injection
	// (sidecarset.dev/inject "false"). It counts in unmanagedPods; it is
	// never adopted, nor restarted by restart-unmanaged.
	OptedOut Membership = "OptedOut"
	// Skipped: no record, and the webhook could not inject the set when the
	// pod was created (sidecarset.dev/skipped names it). It counts in
	// skippedPods, not in unmanagedPods; only `restart --skipped` recreates
	// it, once the reason is fixed (a new pod would be skipped for it
	// again, which the command's dry run tells). With adoptionPolicy
	// SameName it may still be adopted (the webhook skips a set whose
	// container name the pod already has).
	Skipped Membership = "Skipped"
	// Unmanaged: no record (created before the set, or while the webhook was
	// down). It counts in unmanagedPods, may be adopted, and
	// restart-unmanaged recreates it through its owner.
	Unmanaged Membership = "Unmanaged"
)

// NotFinished is the field selector that leaves finished pods (Succeeded,
// Failed) out of a pod list. MemberOf needs it for lists of metadata, which
// carry no phase; the apiserver serves it for pods.
var NotFinished = fields.AndSelectors(
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
)

// CountsUnmanaged reports whether m counts in status.unmanagedPods.
func (m Membership) CountsUnmanaged() bool {
	return m == Unmanaged || m == OptedOut || m == Corrupt
}

// MayAdopt reports whether a pod of membership m is a candidate for
// adoption (still subject to Adoptable, which needs its containers).
func (m Membership) MayAdopt() bool {
	return m == Unmanaged || m == Skipped
}

// Member is a pod's Membership in a set, with what goes with it.
type Member struct {
	Membership
	// Record is the set's record in the pod; set for Managed only.
	Record revision.SetState
	// Err says why the record is Corrupt; nil otherwise.
	Err error
}

// MemberOf answers, for every caller, which pods belong to set: the
// controller's matched and unmanaged counts, `kubectl sidecarset pods` and
// `restart-unmanaged`. pod may carry metadata only (a metadata list): its
// phase is then unknown and taken as running, so such lists must leave out
// finished pods themselves (NotFinished). ns is the
// pod's namespace, as inject.Matches takes it. canaries are the sets that
// may be canaries of set (any others are ignored, so a caller may pass
// every SidecarSet); only a base needs them.
//
// The rules, in order:
//
//  1. NotMatched unless inject.Matches selects the pod (a selector it
//     cannot parse selects nothing; validation refuses those).
//  2. Finished when the pod is being deleted or its phase is Succeeded or
//     Failed.
//  3. A pod carries the set's record when its sidecarset.dev/injected
//     annotation names the set, its sidecarset.dev/state annotation holds a
//     readable entry for it, and it has the label sidecarset.dev/managed
//     "true" (without which the manager, which watches labelled pods only,
//     would never see it): Managed. Any part of that without the rest is
//     Corrupt: an entry without the name, the name without a readable entry
//     (a state annotation that is not JSON at all has none; another set's
//     unreadable entry does not matter), or both without the label.
//  4. KeptByBase when set is a canary and the pod carries its base's
//     record (named in sidecarset.dev/injected or an entry in the state).
//  5. Replaced when one of set's canaries carries the pod's record or
//     replaces set in it (inject.Replaces).
//  6. OptedOut when sidecarset.dev/inject is "false".
//  7. Skipped when sidecarset.dev/skipped names the set.
//  8. Unmanaged otherwise.
func MemberOf(pod *corev1.Pod, set *v1alpha1.SidecarSet, canaries []*v1alpha1.SidecarSet, ns *corev1.Namespace, opts inject.Options) Member {
	if ok, err := inject.Matches(set, pod, ns, opts); err != nil || !ok {
		return Member{Membership: NotMatched}
	}
	if !Active(pod) {
		return Member{Membership: Finished}
	}
	named := listed(pod.Annotations[v1alpha1.AnnotationInjected], set.Name)
	state, err := revision.Decode(pod.Annotations)
	rec, readable := state[set.Name]
	var corrupt *revision.CorruptError
	errors.As(err, &corrupt)
	// unreadable: the entry may be there but cannot be read, which a whole
	// annotation that is not JSON says of every set; damaged: an entry of
	// this name is there and cannot be read.
	unreadable := corrupt != nil && corrupt.Of(set.Name)
	damaged := corrupt != nil && slices.Contains(corrupt.Sets, set.Name)
	switch {
	case named && readable && pod.Labels[v1alpha1.LabelManaged] == "true":
		return Member{Membership: Managed, Record: rec}
	case named && readable:
		return Member{Membership: Corrupt, Err: fmt.Errorf("the record of %s lacks the label %s=true", set.Name, v1alpha1.LabelManaged)}
	case named && unreadable:
		return Member{Membership: Corrupt, Err: err}
	case named:
		return Member{Membership: Corrupt, Err: fmt.Errorf("annotation %s names %s but %s holds no entry for it",
			v1alpha1.AnnotationInjected, set.Name, v1alpha1.AnnotationState)}
	case readable || damaged:
		return Member{Membership: Corrupt, Err: fmt.Errorf("annotation %s holds an entry for %s but %s does not name it",
			v1alpha1.AnnotationState, set.Name, v1alpha1.AnnotationInjected)}
	}
	carries := func(name string) bool {
		_, ok := state[name]
		return ok || listed(pod.Annotations[v1alpha1.AnnotationInjected], name)
	}
	if base := inject.CanaryOf(set); base != "" && carries(base) {
		return Member{Membership: KeptByBase}
	}
	for _, c := range canaries {
		if inject.CanaryOf(c) == set.Name && (carries(c.Name) || inject.Replaces(c, pod, ns, opts)) {
			return Member{Membership: Replaced}
		}
	}
	switch {
	case pod.Annotations[v1alpha1.AnnotationInject] == "false":
		return Member{Membership: OptedOut}
	case listed(pod.Annotations[v1alpha1.AnnotationSkipped], set.Name):
		return Member{Membership: Skipped}
	}
	return Member{Membership: Unmanaged}
}

// listed reports whether the comma-separated list names name.
func listed(list, name string) bool {
	return list != "" && slices.Contains(strings.Split(list, ","), name)
}
