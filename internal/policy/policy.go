// Package policy compiles a SidecarSet into a MutatingAdmissionPolicy and
// its binding (admissionregistration.k8s.io/v1): CEL that the apiserver runs
// itself, so pods keep getting their sidecars while the manager is down. It
// is pure (no client, no I/O); the controller applies what it returns.
//
// The policy injects what internal/inject would, for the one set it was
// compiled from, by these parts:
//
//   - matchConstraints: pods, CREATE only, in namespaces other than the
//     system ones and the manager's (unless the set carries
//     sidecarset.dev/allow-system-namespaces: "true");
//   - the binding's matchResources: the set's namespaceSelector and
//     selector, as namespaceSelector and objectSelector;
//   - matchConditions: the pod has not opted out, carries no record of the
//     set, uses none of its container names, declares every volume the
//     sidecars mount that the set does not, has no port the sidecars would
//     clash with;
//   - a canary and the base of canaries are Unsupported: the webhook, which
//     sees both, leaves the base out of the pods its canary selects; so is
//     a set with injectionStrategy.revision, whose revision the webhook
//     picks at each pod's creation, and one with a HotUpgrade sidecar;
//   - one JSONPatch mutation, empty when the namespace enforces a Pod
//     Security level the sidecars break (see podSecurityCondition): the
//     containers in place, volumes and
//     imagePullSecrets the pod lacks, the per-set record and
//     sidecarset.dev/injected, and the label sidecarset.dev/managed. For a
//     set with jobPods NativeSidecar and regular containers, the patch
//     chooses by the pod's restartPolicy: a Job's pod (Never, OnFailure)
//     gets the regular containers as native sidecars after the set's own
//     init containers and a record that lists them as init containers,
//     as inject.NativeInPod says; any other pod gets them in place.
//
// # Placement across sets
//
// The apiserver runs the policies of several sets in no fixed order, while
// the webhook takes sets in name order. Each policy therefore places its
// containers by the records of the sets injected before it: its
// BeforeAppContainer containers go after the leading containers that sets
// earlier by name recorded, its AfterAppContainer ones before the trailing
// containers of later sets, whatever order the policies ran in. Worked case
// (inject's, without its AfterAppContainer init container): pod [app],
// init [setup]; set "a" with proxy, log (After) and native mesh-init; set
// "b" with exporter and init wait. Whether a or b runs first, the pod gets
// [proxy exporter app log] and [mesh-init wait setup]. An AfterAppContainer
// init container is Unsupported: a pod often has no init container of its
// own to tell the sets' before and after init containers apart. Volumes and
// imagePullSecrets are appended in the order the policies ran.
//
// # Records
//
// CEL cannot rewrite one JSON annotation for several sets, so the policy
// writes the set's record under its own key, revision.PerSetKey (see
// revision.Decode, which reads both forms), and adds the set to the sorted
// list in sidecarset.dev/injected.
package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// LabelSet labels a policy and its binding with the name of the SidecarSet
// they were compiled from.
const LabelSet = "sidecarset.dev/set"

// namePrefix starts the names of a set's policy and binding.
const namePrefix = "sidecarset-"

// Options carries what the webhook's inject.Options carries that the policy
// needs.
type Options struct {
	// ManagerNamespace is the manager's own namespace, never injected
	// (the webhook is never called there). Empty means none beyond the
	// system ones.
	ManagerNamespace string
	// Excluded are the namespaces the installed pod webhook leaves out by
	// name (the chart's webhook.excludeNamespaces): the webhook is never
	// called there, so a policy never injects there either, whatever the
	// set allows.
	Excluded []string
	// Canaries names the canaries of the set being compiled
	// (inject.CanaryOf). A base with canaries is Unsupported.
	Canaries []string
}

// Compiled is a SidecarSet's policy and binding.
type Compiled struct {
	Policy  *admissionregistrationv1.MutatingAdmissionPolicy
	Binding *admissionregistrationv1.MutatingAdmissionPolicyBinding
	// Revision names the revision the policy injects.
	Revision string
}

// Unsupported is why a SidecarSet cannot be injected by a policy; such a set
// stays with the webhook.
type Unsupported struct {
	Reason string
}

func (e *Unsupported) Error() string {
	return "cannot be injected by a MutatingAdmissionPolicy: " + e.Reason
}

func unsupported(format string, args ...any) error {
	return &Unsupported{Reason: fmt.Sprintf(format, args...)}
}

// IsUnsupported reports whether err is, or wraps, an *Unsupported.
func IsUnsupported(err error) bool {
	var u *Unsupported
	return errors.As(err, &u)
}

// Name is the name of the policy and of the binding of the SidecarSet named
// setName.
func Name(setName string) string { return namePrefix + setName }

// Compile returns the policy and binding that inject set.Spec as it is, or
// an *Unsupported saying why a policy cannot. It does not look at
// injectionStrategy.paused (a paused set gets no policy at all) nor at the
// rollout's fallback: to inject the revision inject.FallbackRevision names,
// pass a copy of set declaring it, as the webhook does.
func Compile(set *v1alpha1.SidecarSet, opts Options) (Compiled, error) {
	if errs := validation.IsDNS1123Label(set.Name); len(errs) > 0 {
		// The per-set record's key and the label value hold the name.
		return Compiled{}, unsupported("the name %q is not usable in an annotation key and a label value: %s", set.Name, strings.Join(errs, "; "))
	}
	// A canary pair stays with the webhook, which sees both sets and leaves
	// the base out of the pods its canary selects: the policies run apart,
	// each on its own set, so the base's could not.
	if base := inject.CanaryOf(set); base != "" {
		return Compiled{}, unsupported("it is a canary of SidecarSet %q (%s); the webhook injects a canary and its base", base, v1alpha1.AnnotationCanaryOf)
	}
	if len(opts.Canaries) > 0 {
		return Compiled{}, unsupported("it is the base of the canary SidecarSet(s) %s; the webhook injects a canary and its base", strings.Join(opts.Canaries, ", "))
	}
	// The revision a new pod gets is read from the set's history, and with
	// Partial from the status counts, at each pod's creation; a policy is
	// compiled from one revision.
	if set.Spec.InjectionStrategy.Revision != nil {
		return Compiled{}, unsupported("spec.injectionStrategy.revision names the revision new pods get, which the webhook reads at each pod's creation")
	}
	sel := set.Spec.Selector
	if sel == nil || len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		return Compiled{}, unsupported("spec.selector is empty; the webhook refuses such a set with a warning")
	}
	for field, s := range map[string]*metav1.LabelSelector{"spec.selector": sel, "spec.namespaceSelector": set.Spec.NamespaceSelector} {
		if s == nil {
			continue
		}
		if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
			return Compiled{}, unsupported("%s: %v", field, err)
		}
	}
	m, err := newMutation(set)
	if err != nil {
		return Compiled{}, err
	}
	conds, err := matchConditions(set)
	if err != nil {
		return Compiled{}, err
	}

	name := Name(set.Name)
	meta := metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelSet: set.Name}}
	if set.UID != "" {
		meta.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: "SidecarSet",
			Name: set.Name, UID: set.UID, Controller: new(true),
		}}
	}
	// Ignore: a SidecarSet never makes a pod's creation fail.
	ignore := admissionregistrationv1.Ignore
	policy := &admissionregistrationv1.MutatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicy"},
		ObjectMeta: *meta.DeepCopy(),
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: allowedNamespaces(set, opts),
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
						},
					},
				}},
			},
			Variables:       m.variables(),
			MatchConditions: conds,
			FailurePolicy:   &ignore,
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: m.expression()},
			}},
			// The matchConditions make a second run a no-op, so there is
			// nothing to gain from one.
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
		},
	}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicyBinding"},
		ObjectMeta: meta,
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName: name,
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: orEverything(set.Spec.NamespaceSelector),
				ObjectSelector:    sel.DeepCopy(),
			},
		},
	}
	return Compiled{Policy: policy, Binding: binding, Revision: m.record.Revision}, nil
}

// systemNamespaces are those inject never injects unless the set allows
// them (inject.Matches, rule 1).
var systemNamespaces = []string{metav1.NamespaceSystem, metav1.NamespacePublic, "kube-node-lease"}

// allowedNamespaces selects the namespaces inject allows for set, by the
// label the apiserver puts on every namespace.
// The annotation sidecarset.dev/allow-system-namespaces lifts the system
// namespaces only: the manager's and those the installed webhook excludes
// stay out, as the webhook is never called there.
func allowedNamespaces(set *v1alpha1.SidecarSet, opts Options) *metav1.LabelSelector {
	var excluded []string
	if set.Annotations[v1alpha1.AnnotationAllowSystemNamespaces] != "true" {
		excluded = append(excluded, systemNamespaces...)
	}
	if opts.ManagerNamespace != "" {
		excluded = append(excluded, opts.ManagerNamespace)
	}
	excluded = append(excluded, opts.Excluded...)
	slices.Sort(excluded)
	excluded = slices.Compact(excluded)
	if len(excluded) == 0 {
		return &metav1.LabelSelector{}
	}
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: excluded,
	}}}
}

// orEverything returns a copy of s, or the selector of every namespace for
// nil (the API defaults a missing selector to that too).
func orEverything(s *metav1.LabelSelector) *metav1.LabelSelector {
	if s == nil {
		return &metav1.LabelSelector{}
	}
	return s.DeepCopy()
}

// recordOf returns set's record as inject writes it on injection.
func recordOf(set *v1alpha1.SidecarSet) revision.SetState {
	rec := revision.SetState{
		Revision:      revision.Name(set.Name, &set.Spec),
		Hash:          revision.Hash(&set.Spec),
		ImagelessHash: revision.ImagelessHash(&set.Spec),
		Containers:    []revision.ContainerState{},
	}
	for _, c := range set.Spec.Containers {
		rec.Containers = append(rec.Containers, revision.ContainerState{Name: c.Name, Image: c.Image})
	}
	for _, c := range set.Spec.InitContainers {
		rec.Containers = append(rec.Containers, revision.ContainerState{Name: c.Name, Init: true, Image: c.Image})
	}
	return rec
}
