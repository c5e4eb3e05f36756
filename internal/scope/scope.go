// Package scope decides which pod creations the pod webhook must see: the
// narrowest namespaceSelector, objectSelector and matchConditions of the
// webhook pods.sidecarset.dev under which every pod some SidecarSet can
// inject still reaches it. The manager writes the result into the webhook
// configuration as the SidecarSets change; the apiserver then never calls
// the webhook for the pods no set can match.
//
// The apiserver decides with what it holds at that moment: the namespace's
// labels (namespaceSelector), the pod's labels (objectSelector), and CEL over
// the request and the pod (matchConditions). Webhook matchConditions do not
// see the namespace object (the apiserver evaluates them without one), so a
// SidecarSet's namespaceSelector reaches CEL only where it names namespaces
// by kubernetes.io/metadata.name; its other terms are kept, where every set
// shares them, in the webhook's one namespaceSelector. The union of several
// sets' selectors is an OR that one label selector cannot say; CEL can, so
// the selectors' exact reading is in the matchConditions, and the two
// selectors only hold what every set requires, which the apiserver checks
// more cheaply.
//
// Scope never depends on which namespaces exist, so a namespace created
// just before its pods needs no update to be reached.
//
// A set whose MutatingAdmissionPolicy injects it (inject.ByPolicy) is left
// out like a paused one: the webhook would leave it alone anyway, and with
// it out a webhook outage cannot refuse the pods only such sets match.
package scope

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
)

// Names of the matchConditions Of writes.
const (
	// ConditionMatched holds the OR of the sets' selectors.
	ConditionMatched = "sidecarset-selectors"
	// ConditionNotOptedOut leaves out pods annotated
	// sidecarset.dev/inject: "false".
	ConditionNotOptedOut = "not-opted-out"
)

// Scope is what the pod webhook is called for: a pod whose namespace
// NamespaceSelector selects, whose labels ObjectSelector selects, and for
// which every one of MatchConditions is true.
type Scope struct {
	NamespaceSelector *metav1.LabelSelector
	ObjectSelector    *metav1.LabelSelector
	MatchConditions   []admissionregistrationv1.MatchCondition
}

// Of returns the scope that reaches every pod one of sets can inject, in a
// namespace not in excluded. It reaches others too, where the selectors'
// terms on namespace labels cannot be said exactly (see the package
// documentation), and pods that carry a record of an earlier injection
// (sidecarset.dev/state or sidecarset.dev/skipped), which injection checks
// for stale records.
//
// Left out, as injection leaves them out: sets with
// injectionStrategy.paused, sets whose selector is missing, empty or
// invalid (inject.Matches refuses them), pods opted out with
// sidecarset.dev/inject: "false". With no set left, the webhook is called
// for nothing.
//
// Worked cases (labels abbreviated):
//
//   - no sets: matchConditions [sidecarset-selectors: false, not-opted-out];
//     namespaceSelector holds the exclusion only, objectSelector is empty.
//   - a {app=db} and b {app In (db, web)}: objectSelector app In (db, web),
//     and CEL "a's labels OR b's labels".
//   - a {app=db} with namespaceSelector {team=x} and b {tier=front} with
//     none: nothing shared, so both selectors are empty but for the
//     exclusion; CEL "app == db OR tier == front".
//   - a with namespaceSelector {kubernetes.io/metadata.name In (shop)}:
//     CEL "request.namespace in [shop] && a's labels".
//
// Its output depends only on the sets by name order and on excluded, and
// is the same for the same input, so that an unchanged scope is never
// written again.
func Of(sets []*v1alpha1.SidecarSet, excluded []string) Scope {
	return of(sets, excluded, true)
}

// OfNamespaces is Of without the sets' pod selectors: the scope reaches
// every pod, whatever its labels, in a namespace some set can match. It is
// the scope to use while another mutating webhook may add the labels a set
// selects: the apiserver never calls a webhook for the first time on a
// reinvocation, so a pod whose labels did not match when ours was first
// considered would never be injected.
//
// Worked case: a {app=db} with namespaceSelector {kubernetes.io/metadata.name
// In (shop)} gives objectSelector empty and CEL "request.namespace in
// [shop]" (or a record).
func OfNamespaces(sets []*v1alpha1.SidecarSet, excluded []string) Scope {
	return of(sets, excluded, false)
}

// Installed is the scope the chart installs, which the manager writes back
// when it is told not to narrow the webhook: every pod creation in a
// namespace not in excluded, whatever its labels, with no matchConditions.
//
// Worked case: excluded [kube-system, sidecarset-system] gives
// namespaceSelector kubernetes.io/metadata.name NotIn (kube-system,
// sidecarset-system), an empty objectSelector and no matchConditions.
func Installed(excluded []string) Scope {
	var ns []metav1.LabelSelectorRequirement
	if ex := excludedExpression(excluded); ex != nil {
		ns = []metav1.LabelSelectorRequirement{*ex}
	}
	return Scope{
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: ns},
		ObjectSelector:    &metav1.LabelSelector{},
	}
}

func of(sets []*v1alpha1.SidecarSet, excluded []string, podLabels bool) Scope {
	active := make([]compiled, 0, len(sets))
	for _, set := range sets {
		if c, ok := compile(set); ok {
			if !podLabels {
				c.pod = nil
			}
			active = append(active, c)
		}
	}
	slices.SortFunc(active, func(a, b compiled) int { return strings.Compare(a.name, b.name) })

	nsSelectors := make([]labels.Requirements, len(active))
	podSelectors := make([]labels.Requirements, len(active))
	for i, c := range active {
		nsSelectors[i], podSelectors[i] = c.namespace, c.pod
	}
	nsExpressions := common(nsSelectors, active != nil && allNamespaced(active))
	if ex := excludedExpression(excluded); ex != nil {
		nsExpressions = append([]metav1.LabelSelectorRequirement{*ex}, nsExpressions...)
	}
	return Scope{
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: nsExpressions},
		ObjectSelector:    &metav1.LabelSelector{MatchExpressions: common(podSelectors, len(active) > 0)},
		MatchConditions: []admissionregistrationv1.MatchCondition{
			{Name: ConditionMatched, Expression: matchedExpression(active)},
			{Name: ConditionNotOptedOut, Expression: notOptedOut},
		},
	}
}

// Excluded returns the namespaces that selector leaves out by name, with a
// kubernetes.io/metadata.name NotIn term: the webhook configuration as
// installed says which namespaces are never injected (the chart's
// webhook.excludedNamespaces), and Of keeps them out.
func Excluded(selector *metav1.LabelSelector) []string {
	if selector == nil {
		return nil
	}
	var out []string
	for _, r := range selector.MatchExpressions {
		if r.Key == corev1.LabelMetadataName && r.Operator == metav1.LabelSelectorOpNotIn {
			out = append(out, r.Values...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func excludedExpression(excluded []string) *metav1.LabelSelectorRequirement {
	values := slices.Clone(excluded)
	slices.Sort(values)
	values = slices.Compact(values)
	if len(values) == 0 {
		return nil
	}
	return &metav1.LabelSelectorRequirement{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: values}
}

// compiled is one set's selectors as requirements. namespaced says the set
// has a namespaceSelector: without one it selects every namespace.
type compiled struct {
	name       string
	namespaced bool
	namespace  labels.Requirements
	pod        labels.Requirements
}

// compile returns set's selectors, and false for a set that the webhook
// injects into no new pod.
func compile(set *v1alpha1.SidecarSet) (compiled, bool) {
	if set.Spec.InjectionStrategy.Paused || set.Spec.Selector == nil || inject.ByPolicy(set) {
		return compiled{}, false
	}
	if len(set.Spec.Selector.MatchLabels) == 0 && len(set.Spec.Selector.MatchExpressions) == 0 {
		return compiled{}, false
	}
	pod, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return compiled{}, false
	}
	c := compiled{name: set.Name}
	c.pod, _ = pod.Requirements()
	if set.Spec.NamespaceSelector != nil {
		ns, err := metav1.LabelSelectorAsSelector(set.Spec.NamespaceSelector)
		if err != nil {
			return compiled{}, false
		}
		c.namespaced = true
		c.namespace, _ = ns.Requirements()
	}
	return c, true
}

func allNamespaced(sets []compiled) bool {
	for _, c := range sets {
		if !c.namespaced {
			return false
		}
	}
	return true
}

// common returns the terms every one of selectors implies, one per key:
// "key In (the union of their values)" where each selector pins the key to
// values (In or =), "key Exists" where each one at least needs it. any says
// there are selectors to take terms from; with none, or some false, nothing
// is common.
//
// Worked cases:
//
//   - {app=db}, {app In (db, web), tier=x}: app In (db, web).
//   - {app=db}, {app Exists}: app Exists.
//   - {app=db}, {tier=x}: nothing.
//   - {app NotIn (db)}, {app NotIn (db)}: nothing (a NotIn is met by a pod
//     without the key, so it cannot be kept without a pod-by-pod reading).
func common(selectors []labels.Requirements, some bool) []metav1.LabelSelectorRequirement {
	if !some || len(selectors) == 0 {
		return nil
	}
	type need struct {
		values []string // nil: the key must exist, with any value
		pinned bool
	}
	var acc map[string]need
	for i, reqs := range selectors {
		own := map[string]need{}
		for _, r := range reqs {
			switch r.Operator() {
			case selection.In, selection.Equals, selection.DoubleEquals:
				n := own[r.Key()]
				values := r.Values().UnsortedList()
				if n.pinned {
					values = slices.DeleteFunc(values, func(v string) bool { return !slices.Contains(n.values, v) })
					if len(values) == 0 {
						// Never met; keeping what came first is still implied.
						continue
					}
				}
				own[r.Key()] = need{values: values, pinned: true}
			case selection.Exists:
				if _, ok := own[r.Key()]; !ok {
					own[r.Key()] = need{}
				}
			}
		}
		if i == 0 {
			acc = own
			continue
		}
		for key, n := range acc {
			o, ok := own[key]
			switch {
			case !ok:
				delete(acc, key)
			case n.pinned && o.pinned:
				acc[key] = need{values: append(n.values, o.values...), pinned: true}
			default:
				acc[key] = need{}
			}
		}
	}
	keys := make([]string, 0, len(acc))
	for k := range acc {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]metav1.LabelSelectorRequirement, 0, len(keys))
	for _, k := range keys {
		n := acc[k]
		if !n.pinned {
			out = append(out, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpExists})
			continue
		}
		values := slices.Clone(n.values)
		slices.Sort(values)
		out = append(out, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: slices.Compact(values)})
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// The CEL the matchConditions are written in. object is the pod as created,
// request the AdmissionRequest; an absent labels or annotations map must be
// tested with has() before it is read.
const (
	podLabels      = "object.metadata.labels"
	podAnnotations = "object.metadata.annotations"
	namespaceName  = "request.namespace"
)

var notOptedOut = fmt.Sprintf("!has(%[1]s) || !(%[2]s in %[1]s) || %[1]s[%[2]s] != %[3]s",
	podAnnotations, quote(v1alpha1.AnnotationInject), quote("false"))

// hasRecords is true for a pod that carries a record of an earlier
// injection: injection checks those for records copied from another pod.
var hasRecords = fmt.Sprintf("(has(%[1]s) && (%[2]s in %[1]s || %[3]s in %[1]s))",
	podAnnotations, quote(v1alpha1.AnnotationState), quote(v1alpha1.AnnotationSkipped))

// matchedExpression is the OR over sets of "the namespace's name meets the
// set's namespaceSelector terms on it, and the pod's labels meet its
// selector". A pod without labels has no labels map at all, so the sets
// are read twice: against the labels when there are some, against no
// labels otherwise (decided here, so that CEL never reads a missing map).
func matchedExpression(sets []compiled) string {
	if len(sets) == 0 {
		return "false"
	}
	var withLabels, withoutLabels []string
	for _, c := range sets {
		ns := namespaceTerms(c.namespace)
		withLabels = appendNew(withLabels, and(append(slices.Clone(ns), labelTerms(c.pod)...)))
		if labels.NewSelector().Add(c.pod...).Matches(labels.Set{}) {
			withoutLabels = appendNew(withoutLabels, and(ns))
		}
	}
	return fmt.Sprintf("(has(%s) ? %s : %s) || %s", podLabels, or(withLabels), or(withoutLabels), hasRecords)
}

// namespaceTerms are the CEL terms of a namespaceSelector's requirements
// on kubernetes.io/metadata.name, which the apiserver sets to the
// namespace's name: the request's namespace. Terms on other labels are not
// visible to CEL and are left out, which only widens the scope.
func namespaceTerms(reqs labels.Requirements) []string {
	var out []string
	for _, r := range reqs {
		if r.Key() != corev1.LabelMetadataName {
			continue
		}
		values := r.Values().List()
		switch r.Operator() {
		case selection.In, selection.Equals, selection.DoubleEquals:
			out = append(out, fmt.Sprintf("%s in %s", namespaceName, list(values)))
		case selection.NotIn, selection.NotEquals:
			out = append(out, fmt.Sprintf("!(%s in %s)", namespaceName, list(values)))
		case selection.DoesNotExist:
			// Every namespace carries the label.
			out = append(out, "false")
		}
	}
	return out
}

// labelTerms are the CEL terms of a pod selector's requirements, over a
// labels map that exists.
func labelTerms(reqs labels.Requirements) []string {
	out := make([]string, 0, len(reqs))
	for _, r := range reqs {
		key := quote(r.Key())
		has := fmt.Sprintf("%s in %s", key, podLabels)
		value := fmt.Sprintf("%s[%s]", podLabels, key)
		values := r.Values().List()
		switch r.Operator() {
		case selection.In, selection.Equals, selection.DoubleEquals:
			if len(values) == 1 {
				out = append(out, fmt.Sprintf("%s && %s == %s", has, value, quote(values[0])))
			} else {
				out = append(out, fmt.Sprintf("%s && %s in %s", has, value, list(values)))
			}
		case selection.NotIn, selection.NotEquals:
			out = append(out, fmt.Sprintf("(!(%s) || !(%s in %s))", has, value, list(values)))
		case selection.Exists:
			out = append(out, has)
		case selection.DoesNotExist:
			out = append(out, fmt.Sprintf("!(%s)", has))
		}
	}
	return out
}

func and(terms []string) string {
	switch len(terms) {
	case 0:
		return "true"
	case 1:
		return terms[0]
	}
	return "(" + strings.Join(terms, ") && (") + ")"
}

func or(terms []string) string {
	switch len(terms) {
	case 0:
		return "false"
	case 1:
		return "(" + terms[0] + ")"
	}
	return "((" + strings.Join(terms, ") || (") + "))"
}

// appendNew appends s unless it is there already: sets with the same
// selectors need one term.
func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

func list(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = quote(v)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// quote writes s as a CEL string literal. CEL's escapes are Go's; label
// keys and values hold none of the characters that need one.
func quote(s string) string { return strconv.Quote(s) }
