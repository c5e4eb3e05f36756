package revision

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// FuzzDecode reads a pod's records from arbitrary annotations: the state
// annotation, two per-set keys and one more key of any name the apiserver
// accepts. It checks what
// Decode and Put promise:
//   - Decode never panics, never returns a nil State, leaves the annotations
//     alone, and fails only with a *CorruptError whose message names the
//     annotation it could not read;
//   - a set is either read or named unreadable, never both, and when the
//     state annotation as a whole is unreadable, nothing is read;
//   - reading the entries one by one (decodeEach) reads the same records
//     and the same error;
//   - what it read encodes (Encode, EncodeSetState) to records that decode to
//     an equal State, in either form;
//   - a per-set key decides its set's record alone, whatever the state
//     annotation says of that set;
//   - an annotation that is neither the state nor a per-set key changes
//     nothing;
//   - Put, then DropPerSet, gives records holding the put entry and every
//     other entry as readable or unreadable as it was.
func FuzzDecode(f *testing.F) {
	a := SetState{Revision: "a-1", Hash: "1", ImagelessHash: "i1", Containers: []ContainerState{{Name: "proxy", Image: "proxy:1"}}}
	b := SetState{Revision: "b-1", Hash: "3", ImagelessHash: "i3", Containers: []ContainerState{{Name: "mesh", Init: true, Image: "mesh:1"}}}
	f.Add(Encode(State{"a": a, "b": b}), "a", EncodeSetState(a), "b", "", "other", "kept")
	f.Add(`{"a": {"revision": "a-1"}, "b": {"revision": "b-1", "hash": "h", "imagelessHash": "i", "containers": []}}`,
		"c", `{"revision": ""}`, "", "", PerSetPrefix, "{}")
	f.Add("null", "a", "[]", "b", EncodeSetState(b), v1alpha1.AnnotationState, "{oops")
	f.Add(`{"a":{"revision":"a-1","hash":"h","imagelessHash":"i","write":{"wasReady":true,"generation":3,"at":"2026-05-04T10:11:12.345678+02:00"},`+
		`"containers":[{"name":"c","image":"c:2","previousImageID":"sha256:00","previousContainerID":"containerd://4f","previousImage":"c:1"}]}}`,
		"", "", "a", `{"revision":"a-2","hash":"h2","imagelessHash":"i","containers":null}`, "xstate.sidecarset.dev/a", "{}")

	f.Fuzz(func(t *testing.T, state, name1, entry1, name2, entry2, junkKey, junkValue string) {
		annotations := map[string]string{
			v1alpha1.AnnotationState: state,
			PerSetKey(name1):         entry1,
			PerSetKey(name2):         entry2,
		}
		annotations[junkKey] = junkValue
		// The apiserver accepts only qualified names as annotation keys, so
		// a per-set key always names its set in valid UTF-8.
		maps.DeleteFunc(annotations, func(k, _ string) bool { return len(validation.IsQualifiedName(k)) > 0 })
		before := maps.Clone(annotations)

		got, err := Decode(annotations)
		if !maps.Equal(before, annotations) {
			t.Fatal("Decode modified the annotations")
		}
		if got == nil {
			t.Fatal("Decode returned a nil State")
		}
		unreadable := checkDecodeError(t, annotations, got, err)

		// Reading the entries one by one reads the same.
		each, eachErr := decodeEach(annotations)
		if !apiequality.Semantic.DeepEqual(got, each) || fmt.Sprint(err) != fmt.Sprint(eachErr) {
			t.Fatalf("Decode and decodeEach differ:\nDecode:     %+v, %v\ndecodeEach: %+v, %v", got, err, each, eachErr)
		}

		// Records written from what was read decode to it again.
		for _, again := range []map[string]string{
			{v1alpha1.AnnotationState: Encode(got)},
			perSetForm(got),
		} {
			back, err := Decode(again)
			if err != nil {
				t.Fatalf("records encoded from a decoded State do not decode: %v\n%v", err, again)
			}
			if !apiequality.Semantic.DeepEqual(got, back) {
				t.Fatalf("round trip changed the State:\nread:  %+v\nagain: %+v", got, back)
			}
		}

		// A per-set key decides its set's record on its own.
		for k, v := range annotations {
			name, ok := strings.CutPrefix(k, PerSetPrefix)
			if !ok {
				continue
			}
			if unreadable != nil && len(unreadable.Sets) == 0 {
				break
			}
			alone, aloneErr := Decode(map[string]string{k: v})
			st, read := got[name]
			if aloneErr != nil {
				if read {
					t.Fatalf("per-set key %s is unreadable alone but read among the others", k)
				}
				continue
			}
			if !read || !apiequality.Semantic.DeepEqual(alone[name], st) {
				t.Fatalf("per-set key %s reads %+v alone, %+v (read %v) among the others", k, alone[name], st, read)
			}
		}

		// Other annotations are not records.
		if junkKey != v1alpha1.AnnotationState && !strings.HasPrefix(junkKey, PerSetPrefix) {
			without := maps.Clone(annotations)
			delete(without, junkKey)
			if again, againErr := Decode(without); !apiequality.Semantic.DeepEqual(got, again) || !sameUnreadable(err, againErr) {
				t.Fatalf("annotation %q changed the records read", junkKey)
			}
		}

		checkPut(t, annotations, got, unreadable)
	})
}

// checkDecodeError checks Decode's error against the State it returned, and
// returns it as a *CorruptError (nil when there is none).
func checkDecodeError(t *testing.T, annotations map[string]string, got State, err error) *CorruptError {
	t.Helper()
	if err == nil {
		return nil
	}
	var corrupt *CorruptError
	if !errors.As(err, &corrupt) {
		t.Fatalf("Decode error %v is not a *CorruptError", err)
	}
	if len(corrupt.Sets) == 0 {
		if len(got) != 0 {
			t.Fatalf("state annotation unreadable, yet %d records read", len(got))
		}
		if !strings.Contains(err.Error(), v1alpha1.AnnotationState) {
			t.Fatalf("error %q does not name annotation %s", err, v1alpha1.AnnotationState)
		}
		return corrupt
	}
	if !slices.IsSorted(corrupt.Sets) {
		t.Fatalf("unreadable sets %q not sorted", corrupt.Sets)
	}
	for _, name := range corrupt.Sets {
		if _, ok := got[name]; ok {
			t.Fatalf("set %q both read and unreadable", name)
		}
	}
	first := corrupt.Sets[0]
	key := v1alpha1.AnnotationState
	if _, ok := annotations[PerSetKey(first)]; ok {
		key = PerSetKey(first)
	}
	if !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), strconv.Quote(first)) {
		t.Fatalf("error %q does not name annotation %s and entry %q", err, key, first)
	}
	return corrupt
}

// checkPut writes a record with Put, folds the per-set keys in and checks
// that every other set's record is as readable as before.
func checkPut(t *testing.T, annotations map[string]string, got State, unreadable *CorruptError) {
	t.Helper()
	const name = "put"
	rec := SetState{Revision: "put-1", Hash: "h", ImagelessHash: "i", Containers: []ContainerState{{Name: "c", Image: "c:1"}}}
	value, err := Put(annotations, name, rec)
	if unreadable != nil && len(unreadable.Sets) == 0 {
		if err == nil {
			t.Fatal("Put accepted a state annotation Decode could not read")
		}
		return
	}
	if err != nil {
		t.Fatalf("Put failed on records Decode read: %v", err)
	}
	written := maps.Clone(annotations)
	written[v1alpha1.AnnotationState] = value
	DropPerSet(written)
	after, afterErr := Decode(written)
	want := maps.Clone(got)
	want[name] = rec
	if !apiequality.Semantic.DeepEqual(want, after) {
		t.Fatalf("records after Put:\nwant %+v\ngot  %+v", want, after)
	}
	var wantSets []string
	if unreadable != nil {
		wantSets = slices.DeleteFunc(slices.Clone(unreadable.Sets), func(s string) bool { return s == name })
	}
	var gotSets []string
	var corrupt *CorruptError
	if errors.As(afterErr, &corrupt) {
		gotSets = corrupt.Sets
	}
	if !slices.Equal(wantSets, gotSets) {
		t.Fatalf("unreadable sets after Put = %q, want %q", gotSets, wantSets)
	}
}

// perSetForm returns s as per-set keys only.
func perSetForm(s State) map[string]string {
	out := map[string]string{}
	for name, st := range s {
		out[PerSetKey(name)] = EncodeSetState(st)
	}
	return out
}

func sameUnreadable(a, b error) bool {
	var ca, cb *CorruptError
	if errors.As(a, &ca) != errors.As(b, &cb) {
		return false
	}
	return ca == nil || slices.Equal(ca.Sets, cb.Sets)
}
