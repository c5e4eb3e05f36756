package validation

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// AllowedKeysFlag is the manager's flag that sets Options.AllowedAnnotationKeys.
const AllowedKeysFlag = "--patch-pod-metadata-allowed-keys"

// reservedPrefix is where the pod's records live: no SidecarSet writes there,
// whatever the manager allows.
const reservedPrefix = "sidecarset.dev/"

// AllowedKeys are the annotation keys patchPodMetadata may write, as the
// manager's --patch-pod-metadata-allowed-keys lists them, comma-separated:
// an entry ending in "*" allows every key that starts with what comes before
// it ("example.com/log-*"; "*" alone allows every key), one ending in "/"
// every key of that prefix ("example.com/"), and any other entry that one
// key ("prometheus.io/scrape"). Keys under sidecarset.dev/ are never
// allowed.
type AllowedKeys []string

// ParseAllowedKeys reads the flag's value; "" allows nothing. An empty
// entry, a "*" anywhere but at the end, and an exact entry that is not an
// annotation key are errors.
func ParseAllowedKeys(s string) (AllowedKeys, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var keys AllowedKeys
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		prefix, wildcard := strings.CutSuffix(entry, "*")
		switch {
		case entry == "":
			return nil, fmt.Errorf("%s=%q: an empty entry (two commas, or one at an end)", AllowedKeysFlag, s)
		case strings.Contains(prefix, "*"):
			return nil, fmt.Errorf("%s: %q: \"*\" may only end an entry", AllowedKeysFlag, entry)
		case !wildcard && !strings.HasSuffix(entry, "/"):
			if msgs := utilvalidation.IsQualifiedName(entry); len(msgs) > 0 {
				return nil, fmt.Errorf("%s: %q is not an annotation key, nor a prefix ending in \"*\" or \"/\": %s", AllowedKeysFlag, entry, strings.Join(msgs, "; "))
			}
		}
		keys = append(keys, entry)
	}
	return keys, nil
}

// Allows reports whether key is one of a's keys or under one of its
// prefixes. It does not look at the reserved prefix.
func (a AllowedKeys) Allows(key string) bool {
	for _, entry := range a {
		prefix, wildcard := strings.CutSuffix(entry, "*")
		switch {
		case wildcard || strings.HasSuffix(entry, "/"):
			if strings.HasPrefix(key, prefix) {
				return true
			}
		case key == entry:
			return true
		}
	}
	return false
}

// String is the flag's value.
func (a AllowedKeys) String() string { return strings.Join(a, ",") }

// validatePatchPodMetadata checks spec.patchPodMetadata on its own: every
// entry writes at least one annotation with a valid key outside
// sidecarset.dev/, no key is written by two entries (which would win
// would depend on their order), the policy is one of the three, and a
// MergePatchJson value is a JSON object.
func validatePatchPodMetadata(patches []v1alpha1.PatchPodMetadata, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, p := range patches {
		pf := fld.Index(i)
		af := pf.Child("annotations")
		if len(p.Annotations) == 0 {
			errs = append(errs, field.Required(af, "at least one annotation to write into the pods"))
		}
		errs = append(errs, validateEnum(p.PatchPolicy, []v1alpha1.PatchPolicy{v1alpha1.PatchRetain, v1alpha1.PatchOverwrite, v1alpha1.PatchMergePatchJSON}, pf.Child("patchPolicy"))...)
		errs = append(errs, apivalidation.ValidateAnnotations(p.Annotations, af)...)
		for _, k := range slices.Sorted(maps.Keys(p.Annotations)) {
			kf := af.Key(k)
			if strings.HasPrefix(k, reservedPrefix) {
				errs = append(errs, field.Forbidden(kf, "keys under "+reservedPrefix+" hold the pod's injection records and are never written by patchPodMetadata"))
			}
			if seen[k] {
				errs = append(errs, field.Duplicate(kf, k))
			}
			seen[k] = true
			if p.PatchPolicy == v1alpha1.PatchMergePatchJSON {
				if _, err := jsonObject(p.Annotations[k]); err != nil {
					errs = append(errs, field.Invalid(kf, p.Annotations[k], "with patchPolicy MergePatchJson the value must be a JSON object: "+err.Error()))
				}
			}
		}
	}
	return errs
}

// validateAllowedKeys refuses keys the manager does not allow. It is
// contextual, so ratcheted: a set stored while its keys were allowed can
// still be changed in other ways once the operator allows fewer.
func validateAllowedKeys(patches []v1alpha1.PatchPodMetadata, opts Options, fld *field.Path) field.ErrorList {
	if opts.AnyAnnotationKey {
		return nil
	}
	allowed := "none are allowed, the default"
	if len(opts.AllowedAnnotationKeys) > 0 {
		allowed = "allowed: " + opts.AllowedAnnotationKeys.String()
	}
	var errs field.ErrorList
	for i, p := range patches {
		for _, k := range slices.Sorted(maps.Keys(p.Annotations)) {
			if strings.HasPrefix(k, reservedPrefix) || opts.AllowedAnnotationKeys.Allows(k) {
				continue
			}
			errs = append(errs, field.Forbidden(fld.Index(i).Child("annotations").Key(k), fmt.Sprintf(
				"annotation key %q is not one the manager lets SidecarSets write into pods (%s %s); the operator adds it, or a prefix of it, to that flag (the chart's patchPodMetadata.allowedKeys)",
				k, AllowedKeysFlag, allowed)))
		}
	}
	return errs
}

// patchConflicts refuses an annotation that set and other both write when
// the pod's value would depend on which of them went first: unless both
// declare it with the same policy and value (writing it twice gives what
// writing it once does), or both merge JSON objects that set no member
// differently (merge patches that commute). Retain against Overwrite is
// refused too: the Retain set's value could never reach a pod both select.
func patchConflicts(patches []v1alpha1.PatchPodMetadata, other *v1alpha1.SidecarSet, fld *field.Path) field.ErrorList {
	type declared struct {
		policy v1alpha1.PatchPolicy
		value  string
	}
	theirs := map[string]declared{}
	for _, p := range other.Spec.PatchPodMetadata {
		for k, v := range p.Annotations {
			theirs[k] = declared{policyOf(p), v}
		}
	}
	var errs field.ErrorList
	for i, p := range patches {
		mine := policyOf(p)
		for _, k := range slices.Sorted(maps.Keys(p.Annotations)) {
			t, ok := theirs[k]
			if !ok {
				continue
			}
			v := p.Annotations[k]
			var why string
			switch {
			case mine == t.policy && v == t.value:
				continue
			case mine != t.policy:
				why = fmt.Sprintf("with patchPolicy %s, and this set with %s", t.policy, mine)
			case mine != v1alpha1.PatchMergePatchJSON:
				why = fmt.Sprintf("with patchPolicy %s and another value", t.policy)
			case mergesCommute(v, t.value):
				continue
			default:
				why = "as a JSON object that sets a member this set's object sets differently"
			}
			errs = append(errs, field.Forbidden(fld.Index(i).Child("annotations").Key(k), fmt.Sprintf(
				"conflicts with SidecarSet %q, which can select the same pods and also writes annotation %q %s: the pod's value would depend on which set went first",
				other.Name, k, why)))
		}
	}
	return errs
}

func policyOf(p v1alpha1.PatchPodMetadata) v1alpha1.PatchPolicy {
	if p.PatchPolicy == "" {
		return v1alpha1.PatchRetain
	}
	return p.PatchPolicy
}

// mergesCommute reports whether applying merge patches a and b, JSON
// objects, gives the same document in either order, whatever the
// document: each member both set is set to the same value, or is an object
// in both whose members commute in turn. A value that is not an object
// (validation refuses it elsewhere) commutes with nothing.
func mergesCommute(a, b string) bool {
	x, errA := jsonObject(a)
	y, errB := jsonObject(b)
	return errA == nil && errB == nil && objectsCommute(x, y)
}

func objectsCommute(a, b map[string]any) bool {
	for k, av := range a {
		bv, ok := b[k]
		if !ok {
			continue
		}
		ao, aObj := av.(map[string]any)
		bo, bObj := bv.(map[string]any)
		if aObj && bObj {
			if !objectsCommute(ao, bo) {
				return false
			}
			continue
		}
		if !reflect.DeepEqual(av, bv) {
			return false
		}
	}
	return true
}

// jsonObject decodes s, which must be a JSON object.
func jsonObject(s string) (map[string]any, error) {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("not JSON (%w)", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("JSON, but not an object")
	}
	return obj, nil
}
