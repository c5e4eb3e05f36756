package inject

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// systemNamespaces are never injected unless the SidecarSet allows them:
// a broken sidecar there could take down the control plane's own pods, and
// kube-node-lease holds node heartbeats only.
var systemNamespaces = map[string]bool{
	metav1.NamespaceSystem:    true,
	metav1.NamespacePublic:    true,
	corev1.NamespaceNodeLease: true,
}

// Matches reports whether set selects pod in namespace ns, ignoring
// injectionStrategy.paused and the pod's sidecarset.dev/inject annotation.
// The controller uses it to count matching pods that carry no record.
//
// The rules, in order:
//
//  1. The namespace is allowed: any namespace when the set carries
//     sidecarset.dev/allow-system-namespaces: "true"; otherwise any but
//     kube-system, kube-public, kube-node-lease and opts.ManagerNamespace.
//     The namespace name is ns.Name, or pod.Namespace when ns is nil or
//     unnamed, since a pod in an admission request may have no namespace
//     yet. An empty name is unknown, could be a system namespace, and is
//     refused.
//  2. A nil namespaceSelector selects every allowed namespace. Otherwise it
//     must select ns's labels; with ns nil the labels are unknown and nothing
//     is selected.
//  3. The selector selects the pod's labels. A nil or empty selector is an
//     error: the API requires one, and the apimachinery reading of empty
//     ("everything") would inject every pod in the cluster.
//
// An error names the set and says which selector is wrong. It is returned
// only when the step that needs the bad selector is reached, so a set whose
// namespaceSelector is invalid but whose namespace is refused by rule 1 does
// not report it for this pod.
func Matches(set *v1alpha1.SidecarSet, pod *corev1.Pod, ns *corev1.Namespace, opts Options) (bool, error) {
	if !namespaceAllowed(set, namespaceName(pod, ns), opts) {
		return false, nil
	}
	ok, err := selected(opts.Cache.compiled(set), pod.Labels, ns)
	if err != nil {
		return false, fmt.Errorf("SidecarSet %q: %w", set.Name, err)
	}
	return ok, nil
}

func namespaceName(pod *corev1.Pod, ns *corev1.Namespace) string {
	if ns != nil && ns.Name != "" {
		return ns.Name
	}
	return pod.Namespace
}

// selected applies rules 2 and 3 of Matches.
func selected(c *compiled, podLabels map[string]string, ns *corev1.Namespace) (bool, error) {
	if c.namespaceSelector != nil || c.namespaceSelectorErr != nil {
		if ns == nil {
			return false, nil
		}
		if c.namespaceSelectorErr != nil {
			return false, c.namespaceSelectorErr
		}
		if !c.namespaceSelector.Matches(labels.Set(ns.Labels)) {
			return false, nil
		}
	}
	if c.selectorErr != nil {
		return false, c.selectorErr
	}
	return c.selector.Matches(labels.Set(podLabels)), nil
}

// namespaceAllowed applies rule 1 of Matches.
func namespaceAllowed(set *v1alpha1.SidecarSet, name string, opts Options) bool {
	if set.Annotations[v1alpha1.AnnotationAllowSystemNamespaces] == "true" {
		return true
	}
	return name != "" && !systemNamespaces[name] && name != opts.ManagerNamespace
}

// CanaryOf returns the name of the base SidecarSet that set is the canary
// of: set carries sidecarset.dev/canary "true" and sidecarset.dev/canary-of
// names another set. It returns "" for any other set, as Kruise reads its
// own pair of annotations.
func CanaryOf(set *v1alpha1.SidecarSet) string {
	base := set.Annotations[v1alpha1.AnnotationCanaryOf]
	if set.Annotations[v1alpha1.AnnotationCanary] != "true" || base == set.Name {
		return ""
	}
	return base
}

// Replaces reports whether canary, a canary of some base (CanaryOf), takes
// that base's place in pod: its injection is not paused and it selects the
// pod (Matches). A canary whose selector is invalid selects nothing.
func Replaces(canary *v1alpha1.SidecarSet, pod *corev1.Pod, ns *corev1.Namespace, opts Options) bool {
	if CanaryOf(canary) == "" || canary.Spec.InjectionStrategy.Paused {
		return false
	}
	ok, err := Matches(canary, pod, ns, opts)
	return err == nil && ok
}

// replacedBases returns the names of the bases whose canaries among sets
// take their place in pod (Replaces).
func replacedBases(sets []*v1alpha1.SidecarSet, pod *corev1.Pod, ns *corev1.Namespace, opts Options) map[string]bool {
	var out map[string]bool
	for _, s := range sets {
		if Replaces(s, pod, ns, opts) {
			if out == nil {
				out = map[string]bool{}
			}
			out[CanaryOf(s)] = true
		}
	}
	return out
}
