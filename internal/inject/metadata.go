package inject

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// PatchAnnotations writes the annotations of patches into annotations, the
// pod's, by each entry's policy, and returns a warning for each key it
// could not write. A nil map is returned as a new one when a key is
// written.
//
//   - Retain writes the declared value only where the pod lacks the key;
//     a value the pod has, "" too, is kept.
//   - Overwrite writes the declared value.
//   - MergePatchJson applies the declared JSON object to the pod's as a
//     JSON merge patch (RFC 7386); where the pod has no value, or "", to
//     {}, so that a member declared null is not written either. A pod
//     value that is not a JSON object is kept, with a warning: the pod is
//     still created (OpenKruise refuses it).
//
// Worked cases, the pod holding {a: "1", m: `{"x":1,"y":{"p":1}}`}:
// Retain {a: "2", b: "2"} gives a "1", b "2"; Overwrite {a: "2"} gives a
// "2"; MergePatchJson {m: `{"y":{"q":2},"x":null}`} gives m
// `{"y":{"p":1,"q":2}}`; MergePatchJson {a: `{"z":1}`} keeps a "1" and
// warns.
//
// Validation keeps two sets from writing one key in ways that depend on
// their order, so the order the sets are taken in does not matter.
func PatchAnnotations(annotations map[string]string, patches []v1alpha1.PatchPodMetadata) (map[string]string, []string) {
	var warnings []string
	set := func(k, v string) {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[k] = v
	}
	for _, p := range patches {
		for _, k := range slices.Sorted(maps.Keys(p.Annotations)) {
			declared := p.Annotations[k]
			have, ok := annotations[k]
			switch p.PatchPolicy {
			case v1alpha1.PatchOverwrite:
				set(k, declared)
			case v1alpha1.PatchMergePatchJSON:
				merged, err := mergeJSON(have, declared)
				if err != nil {
					warnings = append(warnings, fmt.Sprintf("patchPodMetadata: annotation %q is left as the pod has it: %v", k, err))
					continue
				}
				set(k, merged)
			default: // Retain, the default
				if !ok {
					set(k, declared)
				}
			}
		}
	}
	return annotations, warnings
}

// mergeJSON applies patch, a JSON object, to doc, the pod's value.
func mergeJSON(doc, patch string) (string, error) {
	if doc == "" {
		doc = "{}"
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(doc), &obj); err != nil || obj == nil {
		return "", fmt.Errorf("MergePatchJson needs the pod's value to be a JSON object, and it is %q", truncate(doc, 64))
	}
	if err := json.Unmarshal([]byte(patch), &obj); err != nil || obj == nil {
		// Validation refuses such a set; a file given to `inject -f` may
		// hold one.
		return "", fmt.Errorf("the declared value is not a JSON object")
	}
	out, err := jsonpatch.MergePatch([]byte(doc), []byte(patch))
	if err != nil {
		return "", fmt.Errorf("merge the declared value: %w", err)
	}
	return string(out), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
