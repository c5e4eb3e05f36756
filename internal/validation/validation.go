// Package validation decides whether a SidecarSet may be stored, and fills
// the defaults its CRD schema cannot express.
//
// It is pure: the validating and defaulting webhooks read the other
// SidecarSets from their cache and call these functions, and
// `kubectl sidecarset inject` can call them offline. Every error carries the
// path of the offending field (spec.containers[1].image,
// spec.updateStrategy.partition) and a plain reason, so the webhook can return
// the list as one apierrors.NewInvalid.
//
// The checks fall in two groups:
//
//   - intrinsic: the SidecarSet on its own (names, selectors, strategy
//     values, containers, volumes);
//   - contextual: the SidecarSet against things outside it, namely the other
//     SidecarSets (two sets that can select the same pod may not declare the
//     same container name, the same volume name differently, or the same
//     patchPodMetadata annotation in ways whose result would depend on the
//     order they are applied in), the system namespaces, which depend on
//     the manager's namespace, and the annotation keys the manager allows.
//
// Updates ratchet, as the apiserver does for its own types: an update that
// leaves the spec and the allow-system-namespaces annotation alone (labels,
// finalizers, other annotations) is never refused, and a contextual error
// that the old object already had is not reported again. So a SidecarSet
// stored before a rule existed, or while the webhook was down, can still have
// its finalizer removed or its image fixed.
//
// Nothing in the spec is immutable. An image change is rolled out in place;
// any other change to what is injected (even a container's name) only makes
// running pods not upgradable, which status counts and shows, and new pods get
// the new spec. Refusing such changes would leave users no way forward short
// of deleting the SidecarSet.
package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// Options carries what validation needs to know about the installation.
type Options struct {
	// ManagerNamespace is the namespace the manager runs in. It counts as a
	// system namespace: injecting into the manager's own pods could make the
	// webhook depend on itself. Empty means unknown, and then only kube-system,
	// kube-public and kube-node-lease are system namespaces.
	ManagerNamespace string
	// AllowedAnnotationKeys are the annotation keys spec.patchPodMetadata
	// may write: the manager's --patch-pod-metadata-allowed-keys. None when
	// empty, so writing a pod's annotations is something the operator turns
	// on.
	AllowedAnnotationKeys AllowedKeys
	// AnyAnnotationKey skips that check, for tools that work offline and
	// cannot know the manager's flag (kubectl sidecarset convert and
	// inject -f). The manager never sets it.
	AnyAnnotationKey bool
}

// ValidateCreate validates a new SidecarSet against the other existing
// SidecarSets. others should not include set itself; an entry with set's name
// is ignored all the same, so a caller may pass the whole cache. Neither set
// nor others is modified.
func ValidateCreate(set *v1alpha1.SidecarSet, others []*v1alpha1.SidecarSet, opts Options) field.ErrorList {
	errs := validateIntrinsic(set)
	return append(errs, validateContext(set, others, opts)...)
}

// ValidateUpdate validates an update from oldSet to newSet: every check of
// ValidateCreate, ratcheted as the package documentation describes. Nothing
// is modified.
func ValidateUpdate(oldSet, newSet *v1alpha1.SidecarSet, others []*v1alpha1.SidecarSet, opts Options) field.ErrorList {
	if apiequality.Semantic.DeepEqual(oldSet.Spec, newSet.Spec) &&
		!annotationsChanged(oldSet, newSet, v1alpha1.AnnotationAllowSystemNamespaces, v1alpha1.AnnotationCanary, v1alpha1.AnnotationCanaryOf) {
		// Nothing validation looks at changed (the name cannot), so the update
		// cannot make the object any worse than it already is.
		return nil
	}
	errs := validateIntrinsic(newSet)
	errs = append(errs, validateCanaryUpdate(oldSet, newSet, field.NewPath("metadata", "annotations"))...)
	return append(errs, ratchet(validateContext(newSet, others, opts), validateContext(oldSet, others, opts))...)
}

func annotationsChanged(oldSet, newSet *v1alpha1.SidecarSet, keys ...string) bool {
	for _, k := range keys {
		if oldSet.Annotations[k] != newSet.Annotations[k] {
			return true
		}
	}
	return false
}

// ratchet drops from errs those that old already had. Contextual errors are
// matched by type and detail, not by path: the detail names the other
// SidecarSet and the container or volume, while the index in the path moves
// when an unrelated container is added before it.
func ratchet(errs, old field.ErrorList) field.ErrorList {
	type key struct {
		typ    field.ErrorType
		detail string
	}
	had := sets.New[key]()
	for _, e := range old {
		had.Insert(key{e.Type, e.Detail})
	}
	var out field.ErrorList
	for _, e := range errs {
		if !had.Has(key{e.Type, e.Detail}) {
			out = append(out, e)
		}
	}
	return out
}

// validateIntrinsic checks everything that depends on set alone.
func validateIntrinsic(set *v1alpha1.SidecarSet) field.ErrorList {
	errs := validateMetadata(&set.ObjectMeta, field.NewPath("metadata"))
	return append(errs, validateSpec(&set.Spec, field.NewPath("spec"))...)
}

// validateContext checks set against the installation and the other
// SidecarSets.
func validateContext(set *v1alpha1.SidecarSet, others []*v1alpha1.SidecarSet, opts Options) field.ErrorList {
	errs := validateSystemNamespaces(set, opts, field.NewPath("spec", "namespaceSelector"))
	errs = append(errs, validateCanaries(set, others, opts)...)
	errs = append(errs, validateAllowedKeys(set.Spec.PatchPodMetadata, opts, field.NewPath("spec", "patchPodMetadata"))...)
	return append(errs, validateConflicts(set, others, opts, field.NewPath("spec"))...)
}

func validateMetadata(meta *metav1.ObjectMeta, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	namePath := fld.Child("name")
	if meta.Name == "" {
		errs = append(errs, field.Required(namePath, "a SidecarSet needs a name"))
	} else {
		for _, msg := range utilvalidation.IsDNS1123Label(meta.Name) {
			errs = append(errs, field.Invalid(namePath, meta.Name,
				msg+" (the name goes into ControllerRevision names, the sidecarset.dev/sidecarset label and pod annotations)"))
		}
	}
	if v, ok := meta.Annotations[v1alpha1.AnnotationAllowSystemNamespaces]; ok && v != "true" && v != "false" {
		// Any other spelling ("yes", "True") would silently mean "not allowed".
		errs = append(errs, field.NotSupported(fld.Child("annotations").Key(v1alpha1.AnnotationAllowSystemNamespaces), v, []string{"true", "false"}))
	}
	return append(errs, validateCanaryMarks(meta, fld.Child("annotations"))...)
}

func validateSpec(spec *v1alpha1.SidecarSetSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList

	selPath := fld.Child("selector")
	switch {
	case spec.Selector == nil:
		errs = append(errs, field.Required(selPath, "a SidecarSet must say which pods it injects"))
	case len(spec.Selector.MatchLabels) == 0 && len(spec.Selector.MatchExpressions) == 0:
		errs = append(errs, field.Invalid(selPath, "{}", "must not be empty: an empty selector would inject into every pod"))
	default:
		errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, selPath)...)
	}
	errs = append(errs, metav1validation.ValidateLabelSelector(spec.NamespaceSelector, metav1validation.LabelSelectorValidationOptions{}, fld.Child("namespaceSelector"))...)

	errs = append(errs, validateContainers(spec, fld)...)
	errs = append(errs, validateVolumes(spec.Volumes, fld.Child("volumes"))...)
	for i, s := range spec.ImagePullSecrets {
		if s.Name == "" {
			errs = append(errs, field.Required(fld.Child("imagePullSecrets").Index(i).Child("name"), "names the Secret to merge into the pod"))
		}
	}

	errs = append(errs, validatePatchPodMetadata(spec.PatchPodMetadata, fld.Child("patchPodMetadata"))...)
	errs = append(errs, validateUpdateStrategy(&spec.UpdateStrategy, fld.Child("updateStrategy"))...)
	errs = append(errs, validateInjectionRevision(spec, fld)...)
	for _, msg := range utilvalidation.IsValidLabelValue(spec.CustomVersion) {
		errs = append(errs, field.Invalid(fld.Child("customVersion"), spec.CustomVersion, "labels the revision (sidecarset.dev/custom-version), so must be a label value: "+msg))
	}
	errs = append(errs, validateEnum(spec.DriftPolicy, []v1alpha1.DriftPolicy{v1alpha1.DriftReport, v1alpha1.DriftRevert}, fld.Child("driftPolicy"))...)
	errs = append(errs, validateEnum(spec.AdoptionPolicy, []v1alpha1.AdoptionPolicy{v1alpha1.AdoptNever, v1alpha1.AdoptSameName}, fld.Child("adoptionPolicy"))...)
	errs = append(errs, validateEnum(spec.JobPods, []v1alpha1.JobPodsPolicy{v1alpha1.JobPodsNativeSidecar, v1alpha1.JobPodsKeep}, fld.Child("jobPods"))...)
	if l := spec.RevisionHistoryLimit; l != nil && *l < 0 {
		errs = append(errs, field.Invalid(fld.Child("revisionHistoryLimit"), *l, "must be greater than or equal to 0"))
	}
	return errs
}

// validateInjectionRevision checks injectionStrategy.revision: one name,
// a policy it knows, and Partial only where status counts the rollout's
// target. Whether the named revision exists is for the webhook to find at
// each pod's creation, as it may be written after the set (a customVersion
// declared later) or trimmed from the history.
func validateInjectionRevision(spec *v1alpha1.SidecarSetSpec, fld *field.Path) field.ErrorList {
	r := spec.InjectionStrategy.Revision
	if r == nil {
		return nil
	}
	fld = fld.Child("injectionStrategy", "revision")
	var errs field.ErrorList
	switch {
	case r.RevisionName == "" && r.CustomVersion == "":
		errs = append(errs, field.Required(fld, "names the revision new pods get: give revisionName or customVersion"))
	case r.RevisionName != "" && r.CustomVersion != "":
		errs = append(errs, field.Invalid(fld.Child("customVersion"), r.CustomVersion, "give either revisionName or customVersion, not both"))
	}
	if r.RevisionName != "" {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(r.RevisionName) {
			errs = append(errs, field.Invalid(fld.Child("revisionName"), r.RevisionName, "names a ControllerRevision: "+msg))
		}
	}
	for _, msg := range utilvalidation.IsValidLabelValue(r.CustomVersion) {
		errs = append(errs, field.Invalid(fld.Child("customVersion"), r.CustomVersion, "is looked up as a label value: "+msg))
	}
	errs = append(errs, validateEnum(r.Policy, []v1alpha1.InjectionRevisionPolicy{v1alpha1.InjectRevisionAlways, v1alpha1.InjectRevisionPartial}, fld.Child("policy"))...)
	if r.Policy == v1alpha1.InjectRevisionPartial && spec.UpdateStrategy.Selector != nil {
		errs = append(errs, field.Invalid(fld.Child("policy"), r.Policy,
			"Partial counts the rollout's target from status.matchedPods, which counts every matched pod, not the pods spec.updateStrategy.selector selects; use Always, or no updateStrategy.selector"))
	}
	return errs
}

// validateEnum accepts one of valid, or empty, which Default replaces with the
// default value; the CRD schema's defaults do the same on the apiserver.
func validateEnum[T ~string](v T, valid []T, fld *field.Path) field.ErrorList {
	if v == "" {
		return nil
	}
	for _, ok := range valid {
		if v == ok {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(fld, v, valid)}
}

func validateUpdateStrategy(us *v1alpha1.UpdateStrategy, fld *field.Path) field.ErrorList {
	errs := validateEnum(us.Type, []v1alpha1.UpdateStrategyType{v1alpha1.RollingUpdateStrategy, v1alpha1.NotUpdateStrategy}, fld.Child("type"))
	// partition 0 updates every matched pod, and 100% none: both are meaningful.
	errs = append(errs, validateIntOrPercent(us.Partition, 0, fld.Child("partition"),
		"must be greater than or equal to 0")...)
	// maxUnavailable 0 (or 0%) would let no pod start its update: the rollout
	// would never progress and only stall after progressDeadlineSeconds.
	errs = append(errs, validateIntOrPercent(us.MaxUnavailable, 1, fld.Child("maxUnavailable"),
		"must be at least 1: with 0 no pod could ever be updated and the rollout would never progress")...)
	// updateStrategy.selector may be combined with partition (OpenKruise
	// refuses the pair): the partition then counts within the selected pods.
	errs = append(errs, metav1validation.ValidateLabelSelector(us.Selector, metav1validation.LabelSelectorValidationOptions{}, fld.Child("selector"))...)
	if d := us.ProgressDeadlineSeconds; d != nil && *d < 1 {
		errs = append(errs, field.Invalid(fld.Child("progressDeadlineSeconds"), *d, "must be at least 1 second"))
	}
	if m := us.MinReadySeconds; m != nil {
		deadline := DefaultProgressDeadlineSeconds
		if d := us.ProgressDeadlineSeconds; d != nil {
			deadline = *d
		}
		switch {
		case *m < 0:
			errs = append(errs, field.Invalid(fld.Child("minReadySeconds"), *m, "must be greater than or equal to 0"))
		case *m >= deadline:
			// As Deployment requires: every pod would wait past the
			// deadline, and every rollout would stall.
			errs = append(errs, field.Invalid(fld.Child("minReadySeconds"), *m, fmt.Sprintf(
				"must be less than progressDeadlineSeconds (%d): each pod waits this long, and the rollout would stall", deadline)))
		}
	}
	errs = append(errs, validatePriority(us.PriorityStrategy, fld.Child("priorityStrategy"))...)
	return append(errs, validateScatter(us.ScatterStrategy, fld.Child("scatterStrategy"))...)
}

func validatePriority(ps *v1alpha1.UpdatePriorityStrategy, fld *field.Path) field.ErrorList {
	if ps == nil {
		return nil
	}
	var errs field.ErrorList
	if len(ps.WeightPriority) > 0 && len(ps.OrderPriority) > 0 {
		errs = append(errs, field.Forbidden(fld.Child("orderPriority"), "only one of weightPriority and orderPriority may be set"))
	}
	for i, t := range ps.WeightPriority {
		tf := fld.Child("weightPriority").Index(i)
		if t.Weight < 1 || t.Weight > 100 {
			errs = append(errs, field.Invalid(tf.Child("weight"), t.Weight, "must be between 1 and 100"))
		}
		sel := tf.Child("matchSelector")
		if len(t.MatchSelector.MatchLabels) == 0 && len(t.MatchSelector.MatchExpressions) == 0 {
			errs = append(errs, field.Required(sel, "must select by some label: an empty selector gives every pod the same weight"))
		}
		errs = append(errs, metav1validation.ValidateLabelSelector(&t.MatchSelector, metav1validation.LabelSelectorValidationOptions{}, sel)...)
	}
	keys := map[string]bool{}
	for i, t := range ps.OrderPriority {
		kf := fld.Child("orderPriority").Index(i).Child("orderedKey")
		errs = append(errs, validateLabelKey(t.OrderedKey, kf)...)
		if keys[t.OrderedKey] {
			errs = append(errs, field.Duplicate(kf, t.OrderedKey))
		}
		keys[t.OrderedKey] = true
	}
	return errs
}

func validateScatter(terms []v1alpha1.UpdateScatterTerm, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[v1alpha1.UpdateScatterTerm]bool{}
	for i, t := range terms {
		tf := fld.Index(i)
		errs = append(errs, validateLabelKey(t.Key, tf.Child("key"))...)
		if t.Value == "" {
			errs = append(errs, field.Required(tf.Child("value"), "the label value whose pods are spread"))
		}
		for _, msg := range utilvalidation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(tf.Child("value"), t.Value, msg))
		}
		if seen[t] {
			errs = append(errs, field.Duplicate(tf, t.Key+"="+t.Value))
		}
		seen[t] = true
	}
	return errs
}

// validateLabelKey accepts a label key, as metadata.labels takes it.
func validateLabelKey(key string, fld *field.Path) field.ErrorList {
	if key == "" {
		return field.ErrorList{field.Required(fld, "a label key")}
	}
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(key) {
		errs = append(errs, field.Invalid(fld, key, msg))
	}
	return errs
}

// validateIntOrPercent accepts an integer of at least lowest, or a string
// "N%" with lowest <= N <= 100. tooLow is the reason given for a value below
// lowest.
func validateIntOrPercent(v *intstr.IntOrString, lowest int, fld *field.Path, tooLow string) field.ErrorList {
	if v == nil {
		return nil
	}
	const notIntOrPercent = `must be an integer or a percentage such as "50%"`
	switch v.Type {
	case intstr.Int:
		if int(v.IntVal) < lowest {
			return field.ErrorList{field.Invalid(fld, v.IntVal, tooLow)}
		}
		return nil
	case intstr.String:
		// IsValidPercent refuses signs, spaces and fractions, which the intstr
		// parser below would accept or round.
		if len(utilvalidation.IsValidPercent(v.StrVal)) > 0 {
			return field.ErrorList{field.Invalid(fld, v.StrVal, notIntOrPercent)}
		}
		// Scaled against 100, a percentage is its own number.
		n, err := intstr.GetScaledValueFromIntOrPercent(v, 100, false)
		if err != nil || n < 0 || n > 100 {
			return field.ErrorList{field.Invalid(fld, v.StrVal, "must be a percentage between 0% and 100%")}
		}
		if n < lowest {
			return field.ErrorList{field.Invalid(fld, v.StrVal, tooLow)}
		}
		return nil
	default:
		return field.ErrorList{field.Invalid(fld, v.String(), notIntOrPercent)}
	}
}

// validateVolumes checks spec.volumes. A volume that sets no source is
// accepted: Default, like the apiserver, makes it an emptyDir.
func validateVolumes(volumes []corev1.Volume, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range volumes {
		v := &volumes[i]
		p := fld.Index(i)
		errs = append(errs, validateDNSLabel(v.Name, p.Child("name"))...)
		if names.Has(v.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), v.Name))
		} else if v.Name != "" {
			names.Insert(v.Name)
		}
		if sources := setPointerFields(v.VolumeSource); len(sources) > 1 {
			errs = append(errs, field.Forbidden(p.Child(sources[1]), fmt.Sprintf("may not specify more than 1 volume type; %s is already set", sources[0])))
		}
		switch {
		case v.ConfigMap != nil && v.ConfigMap.Name == "":
			errs = append(errs, field.Required(p.Child("configMap", "name"), "names the ConfigMap to mount"))
		case v.Secret != nil && v.Secret.SecretName == "":
			errs = append(errs, field.Required(p.Child("secret", "secretName"), "names the Secret to mount"))
		case v.HostPath != nil && v.HostPath.Path == "":
			errs = append(errs, field.Required(p.Child("hostPath", "path"), "names the node's directory or file to mount"))
		case v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "":
			errs = append(errs, field.Required(p.Child("persistentVolumeClaim", "claimName"), "names the PersistentVolumeClaim to mount"))
		}
	}
	return errs
}

// validateDNSLabel requires name and checks that it is a DNS-1123 label, as
// the apiserver does for container and volume names.
func validateDNSLabel(name string, fld *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fld, "")}
	}
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(fld, name, msg))
	}
	return errs
}
