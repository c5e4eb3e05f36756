package validation

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// validateConflicts refuses what would break a pod that set and another
// SidecarSet both inject into:
//
//   - a container or init container name the other set also declares: a pod
//     cannot hold two containers of one name, and the controller finds its
//     containers by name;
//   - a volume name the other set declares with a different definition: the
//     pod gets only one of them, so one set's sidecars would mount the other
//     set's volume. The same definition under the same name is fine;
//   - a patchPodMetadata annotation the other set also writes, unless the
//     pod's value cannot depend on which set went first (patchConflicts).
//
// A canary and its base are not checked against each other: a pod gets
// either (inject.CanaryOf).
//
// Two sets can inject into the same pod when both their pod selectors and
// their effective namespace selectors can overlap (see selectorsCanOverlap).
// Errors come sorted by the other set's name so a retry reads the same.
func validateConflicts(set *v1alpha1.SidecarSet, others []*v1alpha1.SidecarSet, opts Options, fld *field.Path) field.ErrorList {
	sorted := make([]*v1alpha1.SidecarSet, 0, len(others))
	for _, o := range others {
		// A canary and its base declare the same containers on purpose: a
		// pod gets one or the other (validateCanaries checks the pair).
		if o != nil && o.Name != set.Name && !pair(set, o) {
			sorted = append(sorted, o)
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })

	setNS := effectiveNamespaceSelector(set, opts)
	var errs field.ErrorList
	for _, other := range sorted {
		if !selectorsCanOverlap(set.Spec.Selector, other.Spec.Selector) ||
			!selectorsCanOverlap(setNS, effectiveNamespaceSelector(other, opts)) {
			continue
		}
		errs = append(errs, containerConflicts(set.Spec.Containers, other, fld.Child("containers"))...)
		errs = append(errs, containerConflicts(set.Spec.InitContainers, other, fld.Child("initContainers"))...)
		errs = append(errs, volumeConflicts(set.Spec.Volumes, other, fld.Child("volumes"))...)
		errs = append(errs, patchConflicts(set.Spec.PatchPodMetadata, other, fld.Child("patchPodMetadata"))...)
	}
	return errs
}

func containerConflicts(cs []v1alpha1.SidecarContainer, other *v1alpha1.SidecarSet, fld *field.Path) field.ErrorList {
	theirs := map[string]bool{}
	hot := false
	for _, c := range other.Spec.Containers {
		hot = hot || c.Hot()
		for _, name := range c.PodNames() {
			theirs[name] = true
		}
	}
	for _, c := range other.Spec.InitContainers {
		theirs[c.Name] = true
	}
	var errs field.ErrorList
	for i, c := range cs {
		for _, name := range c.PodNames() {
			if name == "" || !theirs[name] {
				continue
			}
			msg := fmt.Sprintf("conflicts with SidecarSet %q, which can select the same pods and also declares container %q", other.Name, name)
			if hot || c.Hot() {
				msg += " (a HotUpgrade sidecar NAME runs as containers NAME-1 and NAME-2)"
			}
			errs = append(errs, field.Forbidden(fld.Index(i).Child("name"), msg))
			break
		}
	}
	return errs
}

func volumeConflicts(vs []corev1.Volume, other *v1alpha1.SidecarSet, fld *field.Path) field.ErrorList {
	theirs := map[string]*corev1.Volume{}
	for i := range other.Spec.Volumes {
		theirs[other.Spec.Volumes[i].Name] = &other.Spec.Volumes[i]
	}
	var errs field.ErrorList
	for i := range vs {
		v := &vs[i]
		// Semantic equality, so that 1Gi and 1024Mi size limits are one value.
		if o, ok := theirs[v.Name]; ok && v.Name != "" && !apiequality.Semantic.DeepEqual(v, o) {
			errs = append(errs, field.Forbidden(fld.Index(i).Child("name"), fmt.Sprintf(
				"conflicts with SidecarSet %q, which can select the same pods and declares volume %q differently", other.Name, v.Name)))
		}
	}
	return errs
}
