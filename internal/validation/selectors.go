package validation

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// selectorsCanOverlap reports whether some label set can match both a and b.
// A nil selector matches everything.
//
// The rule: the two selectors cannot overlap only when, for some label key,
// the requirements both put on that key contradict each other:
//
//   - one requires the key (matchLabels, In, Exists) and the other forbids it
//     (DoesNotExist);
//   - the values allowed by matchLabels and In, intersected, leave nothing
//     that NotIn does not exclude: app=a against app=b; In [a,b] against
//     In [c]; app=a against app NotIn [a].
//
// Keys are independent of each other and every key admits infinitely many
// values, so when no single key contradicts, a label set matching both can be
// built: this is exact, not merely conservative, for valid selectors. A
// requirement that is not valid (unknown operator, In or NotIn without values)
// is ignored, which can only make the answer "can overlap": for the conflict
// checks, a wrong "can overlap" refuses a SidecarSet, while a wrong "cannot"
// would let two sets inject the same container name into one pod.
func selectorsCanOverlap(a, b *metav1.LabelSelector) bool {
	c := keyConstraints{}
	c.add(a)
	c.add(b)
	return c.satisfiable()
}

// selectorCanMatch reports whether some label set matches sel.
func selectorCanMatch(sel *metav1.LabelSelector) bool {
	return selectorsCanOverlap(sel, nil)
}

// keyConstraint is what a conjunction of requirements asks of one label key.
type keyConstraint struct {
	present bool
	absent  bool
	// allowed is nil when any value will do.
	allowed   sets.Set[string]
	forbidden sets.Set[string]
}

// keyConstraints holds the constraint of every key some requirement names.
type keyConstraints map[string]*keyConstraint

func (cs keyConstraints) add(sel *metav1.LabelSelector) {
	if sel == nil {
		return
	}
	for k, v := range sel.MatchLabels {
		cs.addRequirement(metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
	}
	for _, r := range sel.MatchExpressions {
		cs.addRequirement(r)
	}
}

func (cs keyConstraints) addRequirement(r metav1.LabelSelectorRequirement) {
	c := cs[r.Key]
	if c == nil {
		c = &keyConstraint{forbidden: sets.New[string]()}
	}
	switch r.Operator {
	case metav1.LabelSelectorOpIn:
		if len(r.Values) == 0 {
			return
		}
		c.present = true
		if c.allowed == nil {
			c.allowed = sets.New(r.Values...)
		} else {
			c.allowed = c.allowed.Intersection(sets.New(r.Values...))
		}
	case metav1.LabelSelectorOpNotIn:
		// NotIn also matches a pod without the key, so it does not require it.
		if len(r.Values) == 0 {
			return
		}
		c.forbidden.Insert(r.Values...)
	case metav1.LabelSelectorOpExists:
		c.present = true
	case metav1.LabelSelectorOpDoesNotExist:
		c.absent = true
	default:
		return
	}
	cs[r.Key] = c
}

func (cs keyConstraints) satisfiable() bool {
	for _, c := range cs {
		if c.present && c.absent {
			return false
		}
		if c.allowed != nil && c.allowed.Difference(c.forbidden).Len() == 0 {
			return false
		}
	}
	return true
}

// builtinSystemNamespaces are never injected without the
// sidecarset.dev/allow-system-namespaces annotation: a broken sidecar there
// could take down the control plane's own pods.
var builtinSystemNamespaces = []string{metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// systemNamespaces returns the system namespaces of the installation, sorted.
func (o Options) systemNamespaces() []string {
	ns := sets.New(builtinSystemNamespaces...)
	if o.ManagerNamespace != "" {
		ns.Insert(o.ManagerNamespace)
	}
	return sets.List(ns)
}

// allowsSystemNamespaces reports whether set carries the annotation that lets
// it inject into system namespaces.
func allowsSystemNamespaces(set *v1alpha1.SidecarSet) bool {
	return set.Annotations[v1alpha1.AnnotationAllowSystemNamespaces] == "true"
}

// effectiveNamespaceSelector returns the namespaces set really injects into,
// as one selector: its namespaceSelector (nil meaning all), minus the system
// namespaces unless set is allowed into them. The apiserver labels every
// namespace with kubernetes.io/metadata.name, its own name, so "minus" is a
// NotIn requirement on that label.
func effectiveNamespaceSelector(set *v1alpha1.SidecarSet, opts Options) *metav1.LabelSelector {
	sel := set.Spec.NamespaceSelector.DeepCopy()
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	if !allowsSystemNamespaces(set) {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key:      corev1.LabelMetadataName,
			Operator: metav1.LabelSelectorOpNotIn,
			Values:   opts.systemNamespaces(),
		})
	}
	return sel
}

// validateSystemNamespaces refuses a namespaceSelector that can match only
// system namespaces when set is not allowed into them: such a SidecarSet would
// silently inject nowhere. A selector that matches system namespaces among
// others is fine; the injector skips the system ones.
func validateSystemNamespaces(set *v1alpha1.SidecarSet, opts Options, fld *field.Path) field.ErrorList {
	sel := set.Spec.NamespaceSelector
	if sel == nil || allowsSystemNamespaces(set) {
		return nil
	}
	// A selector that already contradicts itself matches nothing at all;
	// calling that "only system namespaces" would mislead.
	if !selectorCanMatch(sel) || selectorCanMatch(effectiveNamespaceSelector(set, opts)) {
		return nil
	}
	return field.ErrorList{field.Forbidden(fld,
		"can match only system namespaces ("+strings.Join(opts.systemNamespaces(), ", ")+
			"), which are never injected without the annotation "+v1alpha1.AnnotationAllowSystemNamespaces+`: "true"`)}
}
