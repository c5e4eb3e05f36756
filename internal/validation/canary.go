package validation

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
)

// validateCanaryMarks checks the canary annotations on their own: canary is
// "true" or "false" (any other spelling would silently mean "not a
// canary"), a canary names its base, and not itself.
func validateCanaryMarks(meta *metav1.ObjectMeta, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	v, ok := meta.Annotations[v1alpha1.AnnotationCanary]
	if ok && v != "true" && v != "false" {
		errs = append(errs, field.NotSupported(fld.Key(v1alpha1.AnnotationCanary), v, []string{"true", "false"}))
	}
	if v != "true" {
		return errs
	}
	basePath := fld.Key(v1alpha1.AnnotationCanaryOf)
	switch base := meta.Annotations[v1alpha1.AnnotationCanaryOf]; base {
	case "":
		errs = append(errs, field.Required(basePath, fmt.Sprintf("a SidecarSet annotated %s: \"true\" must name the SidecarSet it is the canary of", v1alpha1.AnnotationCanary)))
	case meta.Name:
		errs = append(errs, field.Invalid(basePath, base, "a SidecarSet cannot be the canary of itself"))
	}
	return errs
}

// validateCanaryUpdate refuses moving a canary to another base: the pods it
// injected would then take the place of a set they never replaced. Making
// a set a canary, or an ordinary set again, is fine (validateCanaries and
// the conflict checks judge the result).
func validateCanaryUpdate(oldSet, newSet *v1alpha1.SidecarSet, fld *field.Path) field.ErrorList {
	oldBase, newBase := inject.CanaryOf(oldSet), inject.CanaryOf(newSet)
	if oldBase == "" || newBase == "" || oldBase == newBase {
		return nil
	}
	return field.ErrorList{field.Forbidden(fld.Key(v1alpha1.AnnotationCanaryOf), fmt.Sprintf(
		"cannot change from %q to %q: delete this canary and create one of %q", oldBase, newBase, newBase))}
}

// pair reports whether one of a and b is the canary of the other.
func pair(a, b *v1alpha1.SidecarSet) bool {
	return inject.CanaryOf(a) == b.Name || inject.CanaryOf(b) == a.Name
}

// validateCanaries checks set against the other SidecarSets it forms a
// canary pair with (see inject.CanaryOf), as a canary and as a base:
//
//   - a canary's base exists and is no canary itself, and a canary has no
//     canaries: one level only, so that which set a pod gets never depends
//     on a chain;
//   - a canary declares exactly the container and init container names of
//     its base, so that it truly replaces the base in a pod and a pod never
//     lacks one of the base's containers, nor gets one the base never had;
//   - a canary selects only pods and namespaces its base selects: every
//     requirement of the base's selector (and of its namespaceSelector,
//     system namespaces included) follows from the canary's (see
//     selectorWithin); a canary that fails it repeats the base's
//     requirements and adds its own;
//   - two canaries of one base cannot select the same pod (their selectors
//     can overlap, as the conflict checks judge it): a pod could take only
//     one of them in the base's place.
//
// A base is checked against each of its canaries with the same rules, so
// changing the base's containers or widening a canary past it is refused
// until the canary is deleted. Deleting the base is allowed: its canaries
// are ordinary sets from then on, and creating the base again makes them
// its canaries again.
func validateCanaries(set *v1alpha1.SidecarSet, others []*v1alpha1.SidecarSet, opts Options) field.ErrorList {
	byName := map[string]*v1alpha1.SidecarSet{}
	var canaries []*v1alpha1.SidecarSet
	for _, o := range others {
		if o == nil || o.Name == set.Name {
			continue
		}
		byName[o.Name] = o
		if inject.CanaryOf(o) == set.Name {
			canaries = append(canaries, o)
		}
	}
	sort.Slice(canaries, func(i, j int) bool { return canaries[i].Name < canaries[j].Name })
	annotations := field.NewPath("metadata", "annotations")
	var errs field.ErrorList
	if baseName := inject.CanaryOf(set); baseName != "" {
		basePath := annotations.Key(v1alpha1.AnnotationCanaryOf)
		base, ok := byName[baseName]
		switch {
		case !ok:
			errs = append(errs, field.NotFound(basePath, baseName))
		case inject.CanaryOf(base) != "":
			errs = append(errs, field.Forbidden(basePath, fmt.Sprintf(
				"SidecarSet %q is itself a canary (of %q); the base of a canary must be an ordinary SidecarSet", baseName, inject.CanaryOf(base))))
		default:
			errs = append(errs, pairErrors(set, base, set, opts)...)
		}
		if len(canaries) > 0 {
			errs = append(errs, field.Forbidden(annotations.Key(v1alpha1.AnnotationCanary), fmt.Sprintf(
				"SidecarSet %q is a canary of this one; a canary cannot have canaries of its own", canaries[0].Name)))
		}
		errs = append(errs, siblingErrors(set, baseName, others, opts, basePath)...)
		return errs
	}
	for _, c := range canaries {
		errs = append(errs, pairErrors(c, set, set, opts)...)
	}
	return errs
}

// pairErrors checks canary against base, reporting at the paths of on,
// which is one of them, and naming the other.
func pairErrors(canary, base, on *v1alpha1.SidecarSet, opts Options) field.ErrorList {
	spec := field.NewPath("spec")
	why := fmt.Sprintf("as the canary of SidecarSet %q", base.Name)
	if on == base {
		why = fmt.Sprintf("as the base of the canary SidecarSet %q (delete the canary first to change this)", canary.Name)
	}
	var errs field.ErrorList
	for _, l := range []struct {
		name         string
		canary, base []v1alpha1.SidecarContainer
	}{
		{"containers", canary.Spec.Containers, base.Spec.Containers},
		{"initContainers", canary.Spec.InitContainers, base.Spec.InitContainers},
	} {
		c, b := containerNames(l.canary), containerNames(l.base)
		if c.Equal(b) {
			continue
		}
		errs = append(errs, field.Invalid(spec.Child(l.name), strings.Join(sets.List(containerNames(pick(on == canary, l.canary, l.base))), ", "), fmt.Sprintf(
			"%s: the canary must declare the same %s names as its base, so that it replaces all of them (canary %s, base %s)",
			why, l.name, nameList(c), nameList(b))))
	}
	if r, ok := selectorWithin(canary.Spec.Selector, base.Spec.Selector); !ok {
		errs = append(errs, field.Invalid(spec.Child("selector"), describe(pick(on == canary, canary.Spec.Selector, base.Spec.Selector)), fmt.Sprintf(
			"%s: the canary must select only pods its base selects, but it does not require %s; repeat the base's selector in the canary's and add to it",
			why, requirementString(r))))
	}
	if r, ok := selectorWithin(effectiveNamespaceSelector(canary, opts), effectiveNamespaceSelector(base, opts)); !ok {
		errs = append(errs, field.Invalid(spec.Child("namespaceSelector"), describe(pick(on == canary, canary.Spec.NamespaceSelector, base.Spec.NamespaceSelector)), fmt.Sprintf(
			"%s: the canary must select only namespaces its base selects, but it does not require %s (system namespaces count: both or neither carry %s)",
			why, requirementString(r), v1alpha1.AnnotationAllowSystemNamespaces)))
	}
	return errs
}

// siblingErrors refuses a canary that can select a pod another canary of
// the same base selects.
func siblingErrors(set *v1alpha1.SidecarSet, baseName string, others []*v1alpha1.SidecarSet, opts Options, fld *field.Path) field.ErrorList {
	var names []string
	for _, o := range others {
		if o == nil || o.Name == set.Name || inject.CanaryOf(o) != baseName {
			continue
		}
		if selectorsCanOverlap(set.Spec.Selector, o.Spec.Selector) &&
			selectorsCanOverlap(effectiveNamespaceSelector(set, opts), effectiveNamespaceSelector(o, opts)) {
			names = append(names, o.Name)
		}
	}
	slices.Sort(names)
	var errs field.ErrorList
	for _, n := range names {
		errs = append(errs, field.Forbidden(fld, fmt.Sprintf(
			"SidecarSet %q is also a canary of %q and can select the same pods; the selectors of two canaries of one base must exclude each other", n, baseName)))
	}
	return errs
}

func pick[T any](first bool, a, b T) T {
	if first {
		return a
	}
	return b
}

func containerNames(cs []v1alpha1.SidecarContainer) sets.Set[string] {
	out := sets.New[string]()
	for _, c := range cs {
		out.Insert(c.Name)
	}
	return out
}

func nameList(names sets.Set[string]) string {
	if names.Len() == 0 {
		return "none"
	}
	return "[" + strings.Join(sets.List(names), " ") + "]"
}

// describe renders a selector as kubectl does, or "nil".
func describe(sel *metav1.LabelSelector) string {
	if sel == nil {
		return "nil"
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return err.Error()
	}
	return s.String()
}

func requirementString(r metav1.LabelSelectorRequirement) string {
	return describe(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{r}})
}

// selectorWithin reports whether every label set that inner matches also
// matches outer: each requirement of outer (matchLabels read as In)
// follows from what inner asks of the same key, taken together:
//
//   - In S: inner allows only values in S (app=web within app in (web,api));
//   - NotIn S: inner forbids the key, or allows only values outside S, or
//     forbids all of S;
//   - Exists: inner requires the key (matchLabels, In, Exists);
//   - DoesNotExist: inner forbids the key.
//
// An inner selector that matches nothing is within anything; a nil outer
// selects everything. When the answer is no, the first requirement of
// outer that does not follow is returned. Reading each key alone loses
// nothing: keys are independent and each admits infinitely many values, so,
// as for selectorsCanOverlap, the rule is exact for valid selectors.
func selectorWithin(inner, outer *metav1.LabelSelector) (metav1.LabelSelectorRequirement, bool) {
	in := keyConstraints{}
	in.add(inner)
	if !in.satisfiable() {
		return metav1.LabelSelectorRequirement{}, true
	}
	for _, r := range requirements(outer) {
		if !in.implies(r) {
			return r, false
		}
	}
	return metav1.LabelSelectorRequirement{}, true
}

// requirements lists sel's matchLabels, by key, as In requirements, then
// its matchExpressions.
func requirements(sel *metav1.LabelSelector) []metav1.LabelSelectorRequirement {
	if sel == nil {
		return nil
	}
	keys := make([]string, 0, len(sel.MatchLabels))
	for k := range sel.MatchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]metav1.LabelSelectorRequirement, 0, len(keys)+len(sel.MatchExpressions))
	for _, k := range keys {
		out = append(out, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{sel.MatchLabels[k]}})
	}
	return append(out, sel.MatchExpressions...)
}

// implies reports whether every label set satisfying cs satisfies r.
func (cs keyConstraints) implies(r metav1.LabelSelectorRequirement) bool {
	c := cs[r.Key]
	if c == nil {
		return false
	}
	var allowed sets.Set[string]
	if c.allowed != nil {
		allowed = c.allowed.Difference(c.forbidden)
	}
	switch r.Operator {
	case metav1.LabelSelectorOpIn:
		return allowed != nil && sets.New(r.Values...).IsSuperset(allowed)
	case metav1.LabelSelectorOpNotIn:
		switch {
		case c.absent:
			return true
		case allowed != nil:
			return !allowed.HasAny(r.Values...)
		}
		return c.forbidden.HasAll(r.Values...)
	case metav1.LabelSelectorOpExists:
		return c.present
	case metav1.LabelSelectorOpDoesNotExist:
		return c.absent
	}
	return false
}
