// Package revision computes what identifies a SidecarSet revision and encodes
// the per-pod record of what was injected and written.
//
// A revision has two hashes:
//
//   - Hash covers everything the SidecarSet puts into a pod: its containers,
//     its init containers (native sidecars included), its volumes and its
//     imagePullSecrets. Two specs with the same Hash inject the same pod.
//   - ImagelessHash covers the same with every container image blanked. A pod
//     whose recorded ImagelessHash equals the latest one differs from the
//     latest revision at most in images, which the kubelet can swap in place.
//     Any other difference needs a new pod. An imagePullPolicy that equals
//     the one the apiserver derives from the image (DefaultPullPolicy) is
//     blanked with it: the defaulter writes that policy, so moving from
//     :latest (Always) to :v2 (IfNotPresent) would otherwise count as a
//     change beyond the image. The pod keeps the policy it was created with
//     (the field is immutable), which only says when the kubelet pulls.
//     A HotUpgrade sidecar's hotUpgradeEmptyImage is blanked too: it is the
//     image of its idle container, which changes in place like any other.
//
// Volumes and imagePullSecrets are in both hashes. OpenKruise leaves volumes
// out of both, so editing a SidecarSet's volumes leaves every running pod
// counted as updated although none has the new volume. A pod's volumes cannot
// change in place, so here such an edit makes running pods not upgradable:
// counted, and visible, rather than silently stale. imagePullSecrets are
// immutable in a pod as well, and a new image may need the new secret to
// pull, so they count the same way.
//
// Selectors, strategies (injectionStrategy.revision too) and policies are in
// neither hash: they change which pods get a revision and how fast, not what
// a pod runs. Nor is patchPodMetadata: its annotations are written at
// injection only, so a change of them has nothing to roll out and must not
// make running pods not upgradable. jobPods is not either: it says which
// list of a Job's pod the regular containers go into, which each pod's
// record keeps (ContainerState.Init), and a change of it reaches new pods
// only. Nor is customVersion: it labels a revision's ControllerRevision, and
// changing it alone relabels the latest one.
package revision

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/imageref"
)

// hashLength is how many characters of the encoded digest a hash keeps.
const hashLength = 10

// Injected is the part of a spec that ends up in a pod, in the order it is
// hashed. Its JSON is the hash input: encoding/json writes struct fields in a
// fixed order and map keys sorted, so equal specs always give equal bytes. It
// is also what a ControllerRevision keeps, so that an older revision can be
// declared again.
type Injected struct {
	Containers       []v1alpha1.SidecarContainer   `json:"containers,omitempty"`
	InitContainers   []v1alpha1.SidecarContainer   `json:"initContainers,omitempty"`
	Volumes          []corev1.Volume               `json:"volumes,omitempty"`
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
}

// Hash returns the hash of everything spec injects into a pod.
func Hash(spec *v1alpha1.SidecarSetSpec) string {
	return hashOf(injectedOf(spec, false))
}

// ImagelessHash returns the hash of everything spec injects into a pod except
// container images.
func ImagelessHash(spec *v1alpha1.SidecarSetSpec) string {
	return hashOf(injectedOf(spec, true))
}

// ResourcelessHash returns the hash of everything spec injects into a pod
// except container images and the cpu and memory requests and limits of
// every container: the part of a pod that neither an image write nor a
// resize (the pods/resize subresource) can change. Two revisions with the
// same ResourcelessHash differ at most in what the kubelet changes in
// place. Pull policies that follow the image are blanked as in
// ImagelessHash. Other resources, resizePolicy and resourcesPolicy stay:
// the apiserver refuses a resize of anything but cpu and memory, and the
// resources a policy computed belong to the pod, not to the set.
func ResourcelessHash(spec *v1alpha1.SidecarSetSpec) string {
	in := injectedOf(spec, true)
	for _, cs := range [][]v1alpha1.SidecarContainer{in.Containers, in.InitContainers} {
		for i := range cs {
			if cs[i].Hot() {
				// Its two slots are not resized: a new resources needs
				// new pods.
				continue
			}
			r := &cs[i].Resources
			r.Requests = withoutCPUMemory(r.Requests)
			r.Limits = withoutCPUMemory(r.Limits)
		}
	}
	return hashOf(in)
}

// withoutCPUMemory returns l without cpu and memory, nil when nothing else
// is left, so that a list of cpu and memory alone hashes as none.
func withoutCPUMemory(l corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range l {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			out[name] = q
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// ResizableFrom returns the names of the revisions in history that differ
// from spec at most in images and in the cpu and memory of containers
// (ResourcelessHash), spec's own included: a pod on one of them reaches
// spec in place, by an image write and a resize. A revision whose data
// cannot be read is left out: its pods are not upgradable, as before.
func ResizableFrom(spec *v1alpha1.SidecarSetSpec, history []appsv1.ControllerRevision) map[string]bool {
	want := ResourcelessHash(spec)
	out := make(map[string]bool, len(history))
	for i := range history {
		var old v1alpha1.SidecarSetSpec
		if ApplyData(&old, history[i].Data.Raw) == nil && ResourcelessHash(&old) == want {
			out[history[i].Name] = true
		}
	}
	return out
}

// ImagelessHashKeepingPullPolicy returns the ImagelessHash of the previous
// release, which blanked images only, keeping a pull policy that follows
// the image. Pods injected by that release carry it. Two specs equal under
// it are equal under ImagelessHash too (it blanks less), so a pod whose
// record carries the latest spec's ImagelessHashKeepingPullPolicy differs
// from it in images only.
func ImagelessHashKeepingPullPolicy(spec *v1alpha1.SidecarSetSpec) string {
	in := injectedOf(spec, false)
	in.Containers = imagesBlanked(spec.Containers)
	in.InitContainers = imagesBlanked(spec.InitContainers)
	return hashOf(in)
}

func imagesBlanked(cs []v1alpha1.SidecarContainer) []v1alpha1.SidecarContainer {
	out := make([]v1alpha1.SidecarContainer, len(cs))
	for i := range cs {
		cs[i].DeepCopyInto(&out[i])
		out[i].Image = ""
	}
	return out
}

// Name returns the name of the ControllerRevision that holds spec for the
// SidecarSet named setName: the set's name and the spec's Hash.
func Name(setName string, spec *v1alpha1.SidecarSetSpec) string {
	return setName + "-" + Hash(spec)
}

func injectedOf(spec *v1alpha1.SidecarSetSpec, blankImages bool) Injected {
	in := Injected{
		Containers:       spec.Containers,
		InitContainers:   spec.InitContainers,
		Volumes:          spec.Volumes,
		ImagePullSecrets: spec.ImagePullSecrets,
	}
	if blankImages {
		in.Containers = withoutImages(spec.Containers)
		in.InitContainers = withoutImages(spec.InitContainers)
	}
	return in
}

// Data returns what a ControllerRevision of spec keeps: the JSON of the
// injected part of spec.
func Data(spec *v1alpha1.SidecarSetSpec) []byte {
	b, err := json.Marshal(injectedOf(spec, false))
	if err != nil {
		panic(fmt.Sprintf("marshal revision data: %v", err))
	}
	return b
}

// ApplyData writes the injected part kept in a ControllerRevision's data back
// into spec, leaving selectors, strategies and policies as they are.
func ApplyData(spec *v1alpha1.SidecarSetSpec, data []byte) error {
	var in Injected
	if err := json.Unmarshal(data, &in); err != nil {
		return fmt.Errorf("decode revision data: %w", err)
	}
	spec.Containers = in.Containers
	spec.InitContainers = in.InitContainers
	spec.Volumes = in.Volumes
	spec.ImagePullSecrets = in.ImagePullSecrets
	return nil
}

func withoutImages(cs []v1alpha1.SidecarContainer) []v1alpha1.SidecarContainer {
	out := make([]v1alpha1.SidecarContainer, len(cs))
	for i := range cs {
		cs[i].DeepCopyInto(&out[i])
		if out[i].ImagePullPolicy == DefaultPullPolicy(out[i].Image) {
			out[i].ImagePullPolicy = ""
		}
		out[i].Image = ""
		if u := out[i].UpgradeStrategy; u != nil {
			// The idle slot's image changes in place like any other.
			u.HotUpgradeEmptyImage = ""
		}
	}
	return out
}

// DefaultPullPolicy is the apiserver's rule for a container without an
// imagePullPolicy: Always when the image reference pulls the tag "latest"
// (named, or neither tag nor digest given), IfNotPresent otherwise, and for
// a reference it cannot parse.
func DefaultPullPolicy(image string) corev1.PullPolicy {
	if r, err := imageref.Parse(image); err == nil && r.Tag == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

func hashOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// The input is built from API types, which always marshal.
		panic(fmt.Sprintf("marshal hash input: %v", err))
	}
	sum := sha256.Sum256(b)
	return rand.SafeEncodeString(hex.EncodeToString(sum[:]))[:hashLength]
}

// State is the JSON in a pod's sidecarset.dev/state annotation, keyed by
// SidecarSet name. Example, after an in-place update of "exporter" written
// while the pod was ready, as its generation 3:
//
//	{"mysql-exporter": {
//	  "revision": "mysql-exporter-5d8c7f9b2x",
//	  "hash": "5d8c7f9b2x",
//	  "imagelessHash": "w4b2c9d7f6",
//	  "write": {"wasReady": true, "generation": 3, "at": "2026-05-04T10:11:12.345678Z"},
//	  "containers": [
//	    {"name": "exporter", "image": "prom/mysqld-exporter:v0.15.1",
//	     "previousImageID": "docker.io/prom/mysqld-exporter@sha256:1a2b...",
//	     "previousContainerID": "containerd://4f5e...",
//	     "previousImage": "prom/mysqld-exporter:v0.15.0"},
//	    {"name": "log-shipper", "init": true, "image": "fluent-bit:3.1"}
//	  ]}}
type State map[string]SetState

// SetState is what one SidecarSet injected into a pod and last wrote there.
type SetState struct {
	// Revision names the ControllerRevision the pod's sidecars were last set
	// to, by injection or by an in-place update.
	Revision string `json:"revision"`
	// Hash and ImagelessHash are that revision's hashes.
	Hash          string `json:"hash"`
	ImagelessHash string `json:"imagelessHash"`
	// Write describes the last in-place write of this record; nil after
	// injection or adoption, when nothing was written into a running pod,
	// and in a record written as released (Released).
	Write *Write `json:"write,omitempty"`
	// Released is the last write once the pod came back from it, Ready
	// past minReadySeconds with every written sidecar in its new container,
	// until the next write. Another set's write into the pod writes it so
	// (rollout.Apply); the set's own records read so once its
	// status.releasedBefore passes their write, and stay as written. Should
	// a pod it disrupted fail later, the rollout tells that from a write
	// that never came back: it counts the pod again while it has work,
	// without a slot of its own (rollout.Pod.Again).
	Released *Write `json:"released,omitempty"`
	// Containers are the injected containers, found by name.
	Containers []ContainerState `json:"containers"`
}

// Write is what the controller knew of a pod when it wrote images into it.
type Write struct {
	// WasReady: the pod's Ready condition was True just before the write.
	// Only such a write disrupts a pod the rollout must count against
	// maxUnavailable and PodDisruptionBudgets; a pod that was not ready
	// loses nothing by it.
	WasReady bool `json:"wasReady,omitempty"`
	// TurnedReady: the rollout counts the pod but took no slot for this
	// write, so a write it still owes (a hot upgrade's handoff, a resize)
	// takes one. Set when the pod, not ready when written, turned ready
	// with the write still to come (rollout.ActionRecordDisruption), or
	// when the write found the pod not ready, counted for an earlier one.
	TurnedReady bool `json:"turnedReady,omitempty"`
	// Generation is the pod's metadata.generation the write produced. The
	// kubelet reports the generation it has seen in status.observedGeneration;
	// until that reaches Generation, no container status proves anything
	// about the written spec.
	Generation int64 `json:"generation,omitempty"`
	// At is when the controller wrote the images, in microseconds: the
	// update's duration (metric sidecarset_pod_update_duration_seconds)
	// runs from it until the pod is back, and a manager that took over
	// since reads it here. nil in records written before it was kept.
	At *metav1.MicroTime `json:"at,omitempty"`
	// MinReadySeconds is the set's updateStrategy.minReadySeconds at the
	// write: a pod written while Ready counts as the rollout's until it
	// has been Ready this long with every written sidecar running its new
	// container (rollout.Classify). Kept here so that every set, and every
	// manager, judges the write as the set that made it did.
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`
}

// ContainerState is one injected container.
type ContainerState struct {
	// Name is the container's name in the pod.
	Name string `json:"name"`
	// Init is true for an init container (native sidecars included, and a
	// regular container of the set that jobPods NativeSidecar put into a
	// Job's pod as one).
	Init bool `json:"init,omitempty"`
	// Image is the image the webhook or the controller last wrote. A pod
	// image that differs from it was changed by someone else: drift.
	Image string `json:"image"`
	// PreviousImageID, PreviousContainerID and PreviousImage describe the
	// container that ran before the last in-place update of this container:
	// its status imageID and containerID, and the image it was started from
	// ("" when unknown). All are empty after injection, and the write that
	// set them is in Write. The update is complete once a new container
	// runs, or once the previous one is known to run the written image
	// (rollout.UpdateComplete).
	PreviousImageID     string `json:"previousImageID,omitempty"`
	PreviousContainerID string `json:"previousContainerID,omitempty"`
	PreviousImage       string `json:"previousImage,omitempty"`
	// NoneRan: the last in-place write found no container of this one
	// (the kubelet was creating it). A container it created from the spec
	// before the write may run first; the write's is the first whose
	// status shows the written image (rollout.UpdateComplete).
	NoneRan bool `json:"noneRan,omitempty"`
	// Between are the images of writes the kubelet had not finished when a
	// later write went over them (an undo, or a fix after a failed pull),
	// most recent last: the kubelet may still start a container of one of
	// them, and shows it at the later write's generation too, just before
	// it replaces it. Such a container is not the write's
	// (rollout.UpdateComplete).
	Between []string `json:"between,omitempty"`
	// Resized: the last in-place write of this container also changed its
	// cpu or memory (through pods/resize). The write is complete only once
	// the kubelet shows the pod spec's resources applied
	// (rollout.ResizeComplete).
	Resized bool `json:"resized,omitempty"`
	// Resources are the cpu and memory the last write resized the
	// container to, while Resized. The resize goes in a write of its own,
	// after the record: a pod spec that shows other values has yet to get
	// it (rollout.ActionResize).
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// Hot is set on the two containers of a HotUpgrade sidecar.
	Hot *HotSlot `json:"hot,omitempty"`
}

// HotSlot is one of the two containers, NAME-1 and NAME-2, of a HotUpgrade
// sidecar NAME.
//
// Which slot does what follows from the versions alone: the one with the
// lower version above 0 serves (the only one above 0, outside an upgrade);
// one with a higher version is the next version, started beside it to take
// over; version 0 idles on the empty image. Example, "proxy" during a hot
// upgrade from the version in proxy-2 to the one just written into
// proxy-1:
//
//	{"name": "proxy-1", "image": "proxy:v3", "hot": {"of": "proxy", "version": 3},
//	 "previousContainerID": "containerd://9a8b..."}
//	{"name": "proxy-2", "image": "proxy:v2", "hot": {"of": "proxy", "version": 2}}
type HotSlot struct {
	// Of is the sidecar's declared name.
	Of string `json:"of"`
	// Version is the slot's SIDECARSET_VERSION: 0 on the empty image, and
	// one more than the other slot's for each new image written into it.
	Version int64 `json:"version"`
}

// HotVersions returns the version annotations of the hot-upgrade slots
// among containers (v1alpha1.AnnotationHotVersionPrefix): each slot's
// version, and its sidecar's other slot's as the alternative. A container
// reads them when it starts, so they go into a pod with the images they
// describe.
func HotVersions(containers []ContainerState) map[string]string {
	out := map[string]string{}
	for _, c := range containers {
		if c.Hot == nil {
			continue
		}
		out[v1alpha1.AnnotationHotVersionPrefix+c.Name] = strconv.FormatInt(c.Hot.Version, 10)
		for _, o := range containers {
			if o.Hot != nil && o.Hot.Of == c.Hot.Of && o.Name != c.Name {
				out[v1alpha1.AnnotationHotVersionAltPrefix+c.Name] = strconv.FormatInt(o.Hot.Version, 10)
			}
		}
	}
	return out
}

// Container returns the recorded container named name.
func (s SetState) Container(name string) (ContainerState, bool) {
	for _, c := range s.Containers {
		if c.Name == name {
			return c, true
		}
	}
	return ContainerState{}, false
}

// PerSetPrefix starts the key of a per-set record annotation.
//
// # Per-set records
//
// A record may also take a per-set form: the annotation
// state.sidecarset.dev/<set name> holding that one set's entry, exactly as
// Encode writes it under the set's key in sidecarset.dev/state. A
// MutatingAdmissionPolicy writes this form, since CEL cannot rewrite one JSON
// annotation for several sets (internal/policy). Decode reads both forms, a
// per-set key overriding the entry of the same set in sidecarset.dev/state;
// the next write of the pod's records (Put, then DropPerSet) folds the
// per-set keys into sidecarset.dev/state and removes them. A set whose name
// is longer than 63 characters has no per-set form. Example, a pod injected
// by the policy of "mysql-exporter":
//
//	state.sidecarset.dev/mysql-exporter: {"revision":"mysql-exporter-5d8c7f9b2x",
//	  "hash":"5d8c7f9b2x","imagelessHash":"w4b2c9d7f6",
//	  "containers":[{"name":"exporter","image":"prom/mysqld-exporter:v0.15.1"}]}
//	sidecarset.dev/injected: mysql-exporter
const PerSetPrefix = "state.sidecarset.dev/"

// PerSetKey is the annotation key of the per-set record of the SidecarSet
// named name.
func PerSetKey(name string) string { return PerSetPrefix + name }

// DropPerSet removes every per-set record key from annotations: a caller
// that wrote the records returned by Put or Encode of a decoded State into
// sidecarset.dev/state has folded them in.
func DropPerSet(annotations map[string]string) {
	for k := range annotations {
		if strings.HasPrefix(k, PerSetPrefix) {
			delete(annotations, k)
		}
	}
}

// EncodeSetState returns the JSON of one set's entry, as Encode writes it
// within the state and as the per-set form holds it.
func EncodeSetState(s SetState) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("marshal pod state: %v", err))
	}
	return string(b)
}

// Decode reads the records from a pod's annotations: the state annotation
// and the per-set keys (see PerSetPrefix). A pod without either has an
// empty State.
//
// Each SidecarSet's entry is read on its own, so that one set's damaged
// entry leaves the others' records usable: State holds every entry that can
// be read, and the error, a *CorruptError, names those that cannot (an entry
// that is not an object of the documented shape, or lacks its revision or a
// hash). When the annotation as a whole is not a JSON object, State is empty
// and every set's entry counts as unreadable. State is never nil.
func Decode(annotations map[string]string) (State, error) {
	if s, ok := decodeWhole(annotations); ok {
		return s, nil
	}
	return decodeEach(annotations)
}

// decodeEach is Decode reading each entry on its own.
func decodeEach(annotations map[string]string) (State, error) {
	raw, err := entries(annotations)
	if err != nil {
		return State{}, err
	}
	s := make(State, len(raw))
	bad := map[string]error{}
	for name, entry := range raw {
		st, err := decodeEntry(annotations, name, entry)
		if err != nil {
			bad[name] = err
			continue
		}
		s[name] = st
	}
	if len(bad) > 0 {
		names := slices.Sorted(maps.Keys(bad))
		return s, &CorruptError{Sets: names, Err: bad[names[0]]}
	}
	return s, nil
}

// decodeWhole reads the records as Decode does when every entry is
// readable, reading the state annotation in one pass rather than entry by
// entry: a reconcile reads the records of every pod it matches. ok is false
// when any entry is not readable; Decode then reads them one by one
// (decodeEach), to keep the others and name the unreadable ones.
func decodeWhole(annotations map[string]string) (s State, ok bool) {
	s = State{}
	if value := annotations[v1alpha1.AnnotationState]; value != "" {
		if err := json.Unmarshal([]byte(value), &s); err != nil || s == nil {
			return nil, false
		}
		for name, st := range s {
			if !accept(name, st) {
				return nil, false
			}
		}
	}
	for k, v := range annotations {
		name, ok := strings.CutPrefix(k, PerSetPrefix)
		if !ok {
			continue
		}
		var st SetState
		if err := json.Unmarshal([]byte(v), &st); err != nil || !accept(name, st) {
			return nil, false
		}
		s[name] = st
	}
	return s, true
}

// entries splits the state annotation into its entries, undecoded, with the
// per-set keys' entries over them.
func entries(annotations map[string]string) (map[string]json.RawMessage, error) {
	raw := map[string]json.RawMessage{}
	if value := annotations[v1alpha1.AnnotationState]; value != "" {
		if err := json.Unmarshal([]byte(value), &raw); err != nil {
			return nil, &CorruptError{Err: fmt.Errorf("decode annotation %s: %w", v1alpha1.AnnotationState, err)}
		}
		if raw == nil {
			return nil, &CorruptError{Err: fmt.Errorf("decode annotation %s: not a JSON object", v1alpha1.AnnotationState)}
		}
	}
	for k, v := range annotations {
		if name, ok := strings.CutPrefix(k, PerSetPrefix); ok {
			raw[name] = json.RawMessage(v)
		}
	}
	return raw, nil
}

// decodeEntry reads the entry of the SidecarSet named name. Its errors name
// the annotation the entry came from: the set's per-set key when the pod
// has one, since that key overrides the state annotation's entry.
func decodeEntry(annotations map[string]string, name string, entry json.RawMessage) (SetState, error) {
	key := v1alpha1.AnnotationState
	if _, ok := annotations[PerSetKey(name)]; ok {
		key = PerSetKey(name)
	}
	var st SetState
	if err := json.Unmarshal(entry, &st); err != nil {
		return SetState{}, fmt.Errorf("decode entry %q of annotation %s: %w", name, key, err)
	}
	if !accept(name, st) {
		return SetState{}, fmt.Errorf("decode annotation %s: entry %q lacks a revision or hash", key, name)
	}
	return st, nil
}

// accept reports whether st, decoded from the entry of the SidecarSet
// named name, is a record: it has its revision and hashes. Accepting it,
// it drops from st.Write a time that a record cannot hold: one written with
// an offset may read yet fall outside years 0 to 9999 once in UTC, the form
// it is written back in, which RFC 3339 cannot hold, so that the next read
// of the record would fail. Such a time means nothing; the record reads as
// one written before At was kept.
func accept(name string, st SetState) bool {
	if name == "" || st.Revision == "" || st.Hash == "" || st.ImagelessHash == "" {
		return false
	}
	if w := st.Write; w != nil && w.At != nil {
		if y := w.At.UTC().Year(); y < 0 || y > 9999 {
			w.At = nil
		}
	}
	return true
}

// CorruptError says which entries of a pod's state annotation cannot be
// read.
type CorruptError struct {
	// Sets names the unreadable entries, sorted. It is empty when the
	// annotation as a whole cannot be read: then no entry can.
	Sets []string
	// Err is why (for the first of Sets).
	Err error
}

func (e *CorruptError) Error() string { return e.Err.Error() }

func (e *CorruptError) Unwrap() error { return e.Err }

// Of reports whether the entry of the SidecarSet named name is unreadable.
func (e *CorruptError) Of(name string) bool {
	return len(e.Sets) == 0 || slices.Contains(e.Sets, name)
}

// Put returns the value of the state annotation with the entry of the
// SidecarSet named name set to s. Every other entry is kept as it was,
// readable or not: writing one set's record never drops another's. The
// per-set keys are folded in; the caller removes them (DropPerSet) when it
// writes the value. It fails only when the annotation as a whole is not a
// JSON object.
func Put(annotations map[string]string, name string, s SetState) (string, error) {
	raw, err := entries(annotations)
	if err != nil {
		return "", err
	}
	entry, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encode the record of %s: %w", name, err)
	}
	for k, v := range raw {
		// A per-set key that is not JSON at all cannot go into the state
		// annotation as it is. As a JSON string it stays its set's
		// unreadable record, with its text kept.
		if !json.Valid(v) {
			raw[k], _ = json.Marshal(string(v))
		}
	}
	raw[name] = entry
	// Map keys come out sorted, as Encode writes them.
	b, err := json.Marshal(raw)
	if err != nil {
		return "", fmt.Errorf("encode annotation %s: %w", v1alpha1.AnnotationState, err)
	}
	return string(b), nil
}

// Encode returns the annotation value for s.
func Encode(s State) string {
	b, err := json.Marshal(s)
	if err != nil {
		// State holds only strings and bools, which always marshal.
		panic(fmt.Sprintf("marshal pod state: %v", err))
	}
	return string(b)
}

// InjectedNames returns the value of the sidecarset.dev/injected annotation
// for s: its SidecarSet names, sorted and comma-separated.
func InjectedNames(s State) string {
	names := make([]string, 0, len(s))
	for name := range s {
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}
