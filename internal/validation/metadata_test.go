package validation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

func patch(policy v1alpha1.PatchPolicy, kv ...string) v1alpha1.PatchPodMetadata {
	p := v1alpha1.PatchPodMetadata{PatchPolicy: policy, Annotations: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		p.Annotations[kv[i]] = kv[i+1]
	}
	return p
}

func withPatches(ps ...v1alpha1.PatchPodMetadata) func(*v1alpha1.SidecarSet) {
	return func(s *v1alpha1.SidecarSet) { s.Spec.PatchPodMetadata = ps }
}

// patching returns a set like other's that writes ps.
func patching(name string, ps ...v1alpha1.PatchPodMetadata) *v1alpha1.SidecarSet {
	s := other(name, name+"-agent")
	s.Spec.PatchPodMetadata = ps
	return s
}

var exampleKeys = Options{AllowedAnnotationKeys: AllowedKeys{"example.com/"}}

func TestValidatePatchPodMetadata(t *testing.T) {
	const a = "spec.patchPodMetadata[0].annotations[example.com/a]"
	runValidateCreate(t, []validateCase{
		{
			name:   "Retain, Overwrite and MergePatchJson on allowed keys",
			modify: withPatches(patch(v1alpha1.PatchRetain, "example.com/a", "1"), patch(v1alpha1.PatchOverwrite, "example.com/b", "2"), patch(v1alpha1.PatchMergePatchJSON, "example.com/c", `{"x":1}`)),
			opts:   exampleKeys,
		},
		{
			name:   "no policy is Retain",
			modify: withPatches(patch("", "example.com/a", "1")),
			opts:   exampleKeys,
		},
		{
			name:   "no key allowed, the default",
			modify: withPatches(patch(v1alpha1.PatchRetain, "example.com/a", "1")),
			want:   err(field.ErrorTypeForbidden, a),
			reason: `annotation key "example.com/a" is not one the manager lets SidecarSets write into pods (--patch-pod-metadata-allowed-keys none are allowed, the default)`,
		},
		{
			name:   "a key outside the allowed ones",
			modify: withPatches(patch(v1alpha1.PatchRetain, "example.com/a", "1", "other.io/b", "2")),
			opts:   exampleKeys,
			want:   err(field.ErrorTypeForbidden, "spec.patchPodMetadata[0].annotations[other.io/b]"),
			reason: "allowed: example.com/",
		},
		{
			name:   "any key, offline",
			modify: withPatches(patch(v1alpha1.PatchRetain, "other.io/b", "2")),
			opts:   Options{AnyAnnotationKey: true},
		},
		{
			name:   "a key under sidecarset.dev/, even when every key is allowed",
			modify: withPatches(patch(v1alpha1.PatchOverwrite, "sidecarset.dev/inject", "false")),
			opts:   Options{AllowedAnnotationKeys: AllowedKeys{"*"}},
			want:   err(field.ErrorTypeForbidden, "spec.patchPodMetadata[0].annotations[sidecarset.dev/inject]"),
			reason: "injection records",
		},
		{
			name:   "no annotations",
			modify: withPatches(patch(v1alpha1.PatchRetain)),
			opts:   exampleKeys,
			want:   err(field.ErrorTypeRequired, "spec.patchPodMetadata[0].annotations"),
		},
		{
			name:   "an unknown policy",
			modify: withPatches(patch("Merge", "example.com/a", "1")),
			opts:   exampleKeys,
			want:   err(field.ErrorTypeNotSupported, "spec.patchPodMetadata[0].patchPolicy"),
		},
		{
			name:   "an invalid key",
			modify: withPatches(patch(v1alpha1.PatchRetain, "example.com/a b", "1")),
			opts:   Options{AnyAnnotationKey: true},
			want:   err(field.ErrorTypeInvalid, "spec.patchPodMetadata[0].annotations"),
		},
		{
			name:   "one key in two entries",
			modify: withPatches(patch(v1alpha1.PatchRetain, "example.com/a", "1"), patch(v1alpha1.PatchOverwrite, "example.com/a", "2")),
			opts:   exampleKeys,
			want:   err(field.ErrorTypeDuplicate, "spec.patchPodMetadata[1].annotations[example.com/a]"),
		},
		{
			name:   "MergePatchJson of a value that is not an object",
			modify: withPatches(patch(v1alpha1.PatchMergePatchJSON, "example.com/a", `[1]`)),
			opts:   exampleKeys,
			want:   err(field.ErrorTypeInvalid, a),
			reason: "must be a JSON object: JSON, but not an object",
		},
	})
}

func TestValidatePatchConflicts(t *testing.T) {
	const a = "spec.patchPodMetadata[0].annotations[example.com/a]"
	cases := []struct {
		name  string
		mine  v1alpha1.PatchPodMetadata
		their v1alpha1.PatchPodMetadata
		want  []errSummary
		// reason is in the error.
		reason string
	}{
		{name: "the same key, policy and value", mine: patch(v1alpha1.PatchOverwrite, "example.com/a", "1"), their: patch(v1alpha1.PatchOverwrite, "example.com/a", "1")},
		{name: "different keys", mine: patch(v1alpha1.PatchOverwrite, "example.com/a", "1"), their: patch(v1alpha1.PatchOverwrite, "example.com/b", "2")},
		{name: "Retain and its default", mine: patch("", "example.com/a", "1"), their: patch(v1alpha1.PatchRetain, "example.com/a", "1")},
		{
			name: "Overwrite with another value", mine: patch(v1alpha1.PatchOverwrite, "example.com/a", "1"), their: patch(v1alpha1.PatchOverwrite, "example.com/a", "2"),
			want: err(field.ErrorTypeForbidden, a), reason: `conflicts with SidecarSet "other", which can select the same pods and also writes annotation "example.com/a" with patchPolicy Overwrite and another value`,
		},
		{
			name: "Retain with another value: the first by name would win", mine: patch(v1alpha1.PatchRetain, "example.com/a", "1"), their: patch(v1alpha1.PatchRetain, "example.com/a", "2"),
			want: err(field.ErrorTypeForbidden, a), reason: "with patchPolicy Retain and another value",
		},
		{
			name: "Retain against Overwrite, even of one value", mine: patch(v1alpha1.PatchRetain, "example.com/a", "1"), their: patch(v1alpha1.PatchOverwrite, "example.com/a", "1"),
			want: err(field.ErrorTypeForbidden, a), reason: "with patchPolicy Overwrite, and this set with Retain",
		},
		{
			name: "Overwrite against MergePatchJson", mine: patch(v1alpha1.PatchOverwrite, "example.com/a", `{"x":1}`), their: patch(v1alpha1.PatchMergePatchJSON, "example.com/a", `{"x":1}`),
			want: err(field.ErrorTypeForbidden, a), reason: "with patchPolicy MergePatchJson, and this set with Overwrite",
		},
		{name: "merges of different members", mine: patch(v1alpha1.PatchMergePatchJSON, "example.com/a", `{"x":1,"o":{"p":1}}`), their: patch(v1alpha1.PatchMergePatchJSON, "example.com/a", `{"y":2,"o":{"q":2}}`)},
		{name: "merges setting one member alike", mine: patch(v1alpha1.PatchMergePatchJSON, "example.com/a", `{"x":1,"y":[1]}`), their: patch(v1alpha1.PatchMergePatchJSON, "example.com/a", `{"x":1.0,"y":[1]}`)},
		{
			name: "merges setting one member differently", mine: patch(v1alpha1.PatchMergePatchJSON, "example.com/a", `{"o":{"p":1}}`), their: patch(v1alpha1.PatchMergePatchJSON, "example.com/a", `{"o":{"p":2}}`),
			want: err(field.ErrorTypeForbidden, a), reason: "sets a member this set's object sets differently",
		},
		{
			name: "a merge removing what the other sets", mine: patch(v1alpha1.PatchMergePatchJSON, "example.com/a", `{"o":null}`), their: patch(v1alpha1.PatchMergePatchJSON, "example.com/a", `{"o":{"p":2}}`),
			want: err(field.ErrorTypeForbidden, a),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := mysqlExporter()
			set.Spec.PatchPodMetadata = []v1alpha1.PatchPodMetadata{tc.mine}
			errs := ValidateCreate(set, []*v1alpha1.SidecarSet{patching("other", tc.their)}, exampleKeys)
			if diff := cmp.Diff(tc.want, summarize(errs)); diff != "" {
				t.Errorf("errors (-want +got):\n%s\nfull: %v", diff, errs)
			}
			if tc.reason != "" && !strings.Contains(errs.ToAggregate().Error(), tc.reason) {
				t.Errorf("errors %q do not say %q", errs.ToAggregate(), tc.reason)
			}
		})
	}
	t.Run("sets that cannot select the same pod", func(t *testing.T) {
		set := mysqlExporter()
		set.Spec.PatchPodMetadata = []v1alpha1.PatchPodMetadata{patch(v1alpha1.PatchOverwrite, "example.com/a", "1")}
		o := patching("other", patch(v1alpha1.PatchOverwrite, "example.com/a", "2"))
		o.Spec.Selector.MatchLabels = map[string]string{"example.com/mysql": "false"}
		if errs := ValidateCreate(set, []*v1alpha1.SidecarSet{o}, exampleKeys); len(errs) > 0 {
			t.Errorf("errors %v, want none", errs)
		}
	})
}

// TestValidatePatchUpdateRatchets: a set stored while its key was allowed
// can still be changed once the manager allows it no more; a key added
// then is refused.
func TestValidatePatchUpdateRatchets(t *testing.T) {
	old := mysqlExporter()
	old.Spec.PatchPodMetadata = []v1alpha1.PatchPodMetadata{patch(v1alpha1.PatchRetain, "example.com/a", "1")}
	image := old.DeepCopy()
	image.Spec.Containers[0].Image = "prom/mysqld-exporter:v0.16.0"
	if errs := ValidateUpdate(old, image, nil, Options{}); len(errs) > 0 {
		t.Errorf("image change: errors %v, want none", errs)
	}
	added := image.DeepCopy()
	added.Spec.PatchPodMetadata[0].Annotations["example.com/b"] = "2"
	want := err(field.ErrorTypeForbidden, "spec.patchPodMetadata[0].annotations[example.com/b]")
	if diff := cmp.Diff(want, summarize(ValidateUpdate(old, added, nil, Options{}))); diff != "" {
		t.Errorf("key added: errors (-want +got):\n%s", diff)
	}
}

func TestParseAllowedKeys(t *testing.T) {
	cases := []struct {
		flag    string
		allows  []string
		refuses []string
		err     string
	}{
		{flag: "", refuses: []string{"example.com/a", "a"}},
		{flag: "example.com/", allows: []string{"example.com/a", "example.com/b.c"}, refuses: []string{"example.com", "sub.example.com/a", "a"}},
		{flag: "example.com/log-*, prometheus.io/scrape", allows: []string{"example.com/log-level", "example.com/log-", "prometheus.io/scrape"}, refuses: []string{"example.com/level", "prometheus.io/port"}},
		{flag: "*", allows: []string{"a", "example.com/a"}},
		{flag: "team-*", allows: []string{"team-a", "team-b.example.com/x"}, refuses: []string{"a"}},
		{flag: "a,,b", err: "an empty entry"},
		{flag: "example.com/*-level", err: `"*" may only end an entry`},
		{flag: "not a key", err: "is not an annotation key"},
	}
	for _, tc := range cases {
		t.Run(tc.flag, func(t *testing.T) {
			keys, err := ParseAllowedKeys(tc.flag)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), AllowedKeysFlag) {
					t.Fatalf("error %v, want one naming %s and saying %q", err, AllowedKeysFlag, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range tc.allows {
				if !keys.Allows(k) {
					t.Errorf("%q does not allow %q", tc.flag, k)
				}
			}
			for _, k := range tc.refuses {
				if keys.Allows(k) {
					t.Errorf("%q allows %q", tc.flag, k)
				}
			}
		})
	}
}
