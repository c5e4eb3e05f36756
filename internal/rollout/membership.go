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
	// NotMatched means the set's selectors or namespace rules skip the pod.
	NotMatched Membership = "NotMatched"
	// Finished means matched, but being deleted or done: it counts nowhere
	// and is never written, so a finished Job pod holds no rollout back.
	Finished Membership = "Finished"
	// Managed means matched and carrying the set's record: it counts in
	// matchedPods and takes part in the rollout.
	Managed Membership = "Managed"
	// Corrupt means the pod's marks say the set was injected, but its record
	// cannot be read or is incomplete. It counts as unmanaged, is told in an
	// event, and is never written or adopted: that would guess at what it runs.
	Corrupt Membership = "Corrupt"
	// Replaced means no record of the set, a canary's base whose canary
	// carries the pod's record or would take its place: the canary's pod,
	// which the base counts nowhere.
	Replaced Membership = "Replaced"
	// KeptByBase means no record of the set, a canary, and the pod carries
	// its base's record: a running pod cannot change sets in place, so it
	// stays the base's, counted nowhere here, until it is recreated.
	KeptByBase Membership = "KeptByBase"
	// OptedOut means no record, and the pod refused injection: unmanaged,
	// never adopted nor restarted by restart-unmanaged.
	OptedOut Membership = "OptedOut"
	// Skipped means no record, and the webhook could not inject the set at
	// creation (sidecarset.dev/skipped). It counts in skippedPods; only
	// `restart --skipped` recreates it, and SameName adoption may take it.
	Skipped Membership = "Skipped"
	// Unmanaged means no record (created before the set, or while the webhook
	// was down): it may be adopted, or recreated by restart-unmanaged.
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

// MayAdopt reports whether a pod of membership m may be adopted (Adoptable).
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

// MemberOf says which pods belong to set, for every caller. pod may carry
// metadata only, its phase then taken as running: such lists must leave
// finished pods out (NotFinished). canaries are the sets that may be
// canaries of set; only a base needs them. The rules, in order:
//
//  1. NotMatched unless inject.Matches selects the pod.
//  2. Finished when the pod is being deleted, Succeeded or Failed.
//  3. Managed when sidecarset.dev/injected names the set, its
//     sidecarset.dev/state entry reads, and the label sidecarset.dev/managed
//     is "true" (the manager watches only those); Corrupt when only some
//     hold (another set's unreadable entry does not matter).
//  4. KeptByBase when set is a canary and the pod carries its base's record.
//  5. Replaced when a canary of set carries the pod's record or replaces
//     set in it (inject.Replaces).
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
	// unreadable: the entry may be there but unreadable (so for every set when
	// the annotation is not JSON); damaged: it is there, unreadable.
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
	// A canary's pod is the canary's while the canary selects it;
	// after, it is the base's unmanaged pod.
	matches := func(c *v1alpha1.SidecarSet) bool {
		ok, err := inject.Matches(c, pod, ns, opts)
		return err == nil && ok
	}
	if base := inject.CanaryOf(set); base != "" && carries(base) {
		return Member{Membership: KeptByBase}
	}
	for _, c := range canaries {
		if inject.CanaryOf(c) == set.Name && (carries(c.Name) && matches(c) || inject.Replaces(c, pod, ns, opts)) {
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
