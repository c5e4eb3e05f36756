package revision

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

func baseSpec() *v1alpha1.SidecarSetSpec {
	return &v1alpha1.SidecarSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		Containers: []v1alpha1.SidecarContainer{{
			Container: corev1.Container{Name: "exporter", Image: "exporter:1",
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}},
		}},
		InitContainers: []v1alpha1.SidecarContainer{{
			Container: corev1.Container{Name: "shipper", Image: "shipper:1", RestartPolicy: new(corev1.ContainerRestartPolicyAlways)},
		}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}
}

func TestHashes(t *testing.T) {
	base := baseSpec()
	cases := []struct {
		name             string
		edit             func(*v1alpha1.SidecarSetSpec)
		hashChanges      bool
		imagelessChanges bool
	}{
		{"nothing", func(*v1alpha1.SidecarSetSpec) {}, false, false},
		{"container image", func(s *v1alpha1.SidecarSetSpec) { s.Containers[0].Image = "exporter:2" }, true, false},
		{"native sidecar image", func(s *v1alpha1.SidecarSetSpec) { s.InitContainers[0].Image = "shipper:2" }, true, false},
		{"container env", func(s *v1alpha1.SidecarSetSpec) {
			s.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
		}, true, true},
		{"native sidecar args", func(s *v1alpha1.SidecarSetSpec) { s.InitContainers[0].Args = []string{"-v"} }, true, true},
		{"inject policy", func(s *v1alpha1.SidecarSetSpec) { s.Containers[0].PodInjectPolicy = v1alpha1.AfterAppContainer }, true, true},
		// Unlike OpenKruise, a volume edit is visible: pods cannot take it in place.
		{"volume", func(s *v1alpha1.SidecarSetSpec) {
			s.Volumes[0].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}
		}, true, true},
		{"image pull secret", func(s *v1alpha1.SidecarSetSpec) {
			s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
		}, true, true},
		{"selector", func(s *v1alpha1.SidecarSetSpec) { s.Selector.MatchLabels["tier"] = "x" }, false, false},
		{"partition", func(s *v1alpha1.SidecarSetSpec) {
			s.UpdateStrategy.Partition = new(intstr.FromString("50%"))
		}, false, false},
		{"drift policy", func(s *v1alpha1.SidecarSetSpec) { s.DriftPolicy = v1alpha1.DriftRevert }, false, false},
		// Written at injection only: nothing to roll out, no pod made not upgradable.
		{"patchPodMetadata", func(s *v1alpha1.SidecarSetSpec) {
			s.PatchPodMetadata = []v1alpha1.PatchPodMetadata{{PatchPolicy: v1alpha1.PatchOverwrite, Annotations: map[string]string{"example.com/a": "1"}}}
		}, false, false},
		// A label of the revision: relabelling starts no rollout.
		{"customVersion", func(s *v1alpha1.SidecarSetSpec) { s.CustomVersion = "v2" }, false, false},
		// Which revision new pods get, not what a revision injects.
		{"injectionStrategy.revision", func(s *v1alpha1.SidecarSetSpec) {
			s.InjectionStrategy.Revision = &v1alpha1.InjectionRevision{CustomVersion: "v1", Policy: v1alpha1.InjectRevisionPartial}
		}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			edited := baseSpec()
			tc.edit(edited)
			if got := Hash(edited) != Hash(base); got != tc.hashChanges {
				t.Errorf("Hash changed = %v, want %v", got, tc.hashChanges)
			}
			if got := ImagelessHash(edited) != ImagelessHash(base); got != tc.imagelessChanges {
				t.Errorf("ImagelessHash changed = %v, want %v", got, tc.imagelessChanges)
			}
		})
	}
}

func TestHashDoesNotMutate(t *testing.T) {
	spec := baseSpec()
	ImagelessHash(spec)
	if spec.Containers[0].Image != "exporter:1" || spec.InitContainers[0].Image != "shipper:1" {
		t.Errorf("ImagelessHash blanked the caller's images: %+v", spec)
	}
}

func TestName(t *testing.T) {
	spec := baseSpec()
	got := Name("mysql-exporter", spec)
	if want := "mysql-exporter-" + Hash(spec); got != want || len(Hash(spec)) != hashLength {
		t.Errorf("Name = %q, want %q with a %d-character hash", got, want, hashLength)
	}
}

func TestDataRoundTrip(t *testing.T) {
	old := baseSpec()
	data := Data(old)
	current := baseSpec()
	current.Containers[0].Image = "exporter:2"
	current.UpdateStrategy.Paused = true
	if err := ApplyData(current, data); err != nil {
		t.Fatal(err)
	}
	if Hash(current) != Hash(old) {
		t.Errorf("after ApplyData the hash is %s, want the old revision's %s", Hash(current), Hash(old))
	}
	if !current.UpdateStrategy.Paused {
		t.Errorf("ApplyData changed the update strategy")
	}
	if err := ApplyData(current, []byte("{")); err == nil {
		t.Errorf("ApplyData accepted broken data")
	}
}

func TestDecode(t *testing.T) {
	good := State{"a": {Revision: "a-1", Hash: "h", ImagelessHash: "i",
		Containers: []ContainerState{{Name: "c", Image: "c:1", PreviousImageID: "sha256:00"}}}}
	b := `"b": {"revision": "b-1", "hash": "h", "imagelessHash": "i", "containers": []}`
	cases := []struct {
		name  string
		value *string
		want  State
		// corrupt names the unreadable entries; nil when Decode succeeds,
		// empty when the whole annotation is unreadable.
		corrupt []string
	}{
		{name: "absent", value: nil, want: State{}},
		{name: "empty", value: new(""), want: State{}},
		{name: "round trip", value: new(Encode(good)), want: good},
		{name: "not JSON", value: new("{oops"), want: State{}, corrupt: []string{}},
		{name: "JSON null", value: new("null"), want: State{}, corrupt: []string{}},
		{name: "array", value: new("[]"), want: State{}, corrupt: []string{}},
		{name: "wrong type", value: new(`{"a": 1}`), want: State{}, corrupt: []string{"a"}},
		{name: "missing hash", value: new(`{"a": {"revision": "a-1"}}`), want: State{}, corrupt: []string{"a"}},
		// One set's damaged entry leaves the other's record usable.
		{name: "one entry damaged", value: new(`{"a": {"revision": "a-1"}, ` + b + `}`),
			want:    State{"b": {Revision: "b-1", Hash: "h", ImagelessHash: "i", Containers: []ContainerState{}}},
			corrupt: []string{"a"}},
		{name: "two entries damaged, named sorted", value: new(`{"c": [], "a": "x", ` + b + `}`),
			want:    State{"b": {Revision: "b-1", Hash: "h", ImagelessHash: "i", Containers: []ContainerState{}}},
			corrupt: []string{"a", "c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{"other": "kept"}
			if tc.value != nil {
				ann[v1alpha1.AnnotationState] = *tc.value
			}
			got, err := Decode(ann)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
			if tc.corrupt == nil {
				if err != nil {
					t.Fatalf("Decode error = %v, want none", err)
				}
				return
			}
			var corrupt *CorruptError
			if !errors.As(err, &corrupt) {
				t.Fatalf("Decode error = %v, want a *CorruptError", err)
			}
			if diff := cmp.Diff(tc.corrupt, corrupt.Sets, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("unreadable entries (-want +got):\n%s", diff)
			}
			for _, name := range []string{"a", "b", "c"} {
				want := len(tc.corrupt) == 0 || slices.Contains(tc.corrupt, name)
				if got := corrupt.Of(name); got != want {
					t.Errorf("Of(%s) = %v, want %v", name, got, want)
				}
			}
		})
	}
}

func TestPut(t *testing.T) {
	rec := SetState{Revision: "b-2", Hash: "h2", ImagelessHash: "i2", Containers: []ContainerState{{Name: "c", Image: "c:2"}}}
	cases := []struct {
		name    string
		value   *string
		want    string
		wantErr bool
	}{
		{name: "absent", want: `{"b":` + mustJSON(t, rec) + `}`},
		{name: "replaces the set's entry", value: new(`{"b": {"revision": "b-1"}}`), want: `{"b":` + mustJSON(t, rec) + `}`},
		// Another set's damaged entry is kept as it was, for that set to
		// report; dropping it would turn the pod into one that set never
		// injected.
		{name: "keeps another set's damaged entry", value: new(`{"c": {"revision": "c-1"}, "a": 1}`),
			want: `{"a":1,"b":` + mustJSON(t, rec) + `,"c":{"revision":"c-1"}}`},
		{name: "not a JSON object", value: new(`[]`), wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{}
			if tc.value != nil {
				ann[v1alpha1.AnnotationState] = *tc.value
			}
			got, err := Put(ann, "b", rec)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Put error = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("Put = %s\nwant  %s", got, tc.want)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestInjectedNames(t *testing.T) {
	s := State{"b": {}, "a": {}, "c": {}}
	if got := InjectedNames(s); got != "a,b,c" {
		t.Errorf("InjectedNames = %q, want a,b,c", got)
	}
}

func TestContainer(t *testing.T) {
	s := SetState{Containers: []ContainerState{{Name: "x", Image: "x:1"}}}
	if c, ok := s.Container("x"); !ok || c.Image != "x:1" {
		t.Errorf("Container(x) = %+v, %v", c, ok)
	}
	if _, ok := s.Container("y"); ok {
		t.Errorf("Container(y) found")
	}
}

// The defaulter writes the pull policy the apiserver derives from the image
// (Always for :latest or no tag, IfNotPresent otherwise). A policy that only
// follows the image is part of the image; one set against it is not.
func TestImagelessHashPullPolicy(t *testing.T) {
	type container struct {
		image  string
		policy corev1.PullPolicy
	}
	cases := []struct {
		name             string
		old, new         container
		imagelessChanges bool
	}{
		{"latest to a tag, both defaulted", container{"exporter:latest", corev1.PullAlways}, container{"exporter:v2", corev1.PullIfNotPresent}, false},
		{"untagged to a digest, both defaulted", container{"exporter", corev1.PullAlways}, container{"exporter@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullIfNotPresent}, false},
		{"a tag to latest, both defaulted", container{"exporter:v1", corev1.PullIfNotPresent}, container{"exporter:latest", corev1.PullAlways}, false},
		{"tag to tag, both defaulted", container{"exporter:v1", corev1.PullIfNotPresent}, container{"exporter:v2", corev1.PullIfNotPresent}, false},
		{"tag to tag, Never kept", container{"exporter:v1", corev1.PullNever}, container{"exporter:v2", corev1.PullNever}, false},
		{"unset stays unset", container{"exporter:v1", ""}, container{"exporter:latest", ""}, false},
		{"policy changed, image kept", container{"exporter:v1", corev1.PullIfNotPresent}, container{"exporter:v1", corev1.PullAlways}, true},
		{"Never given up for the default", container{"exporter:v1", corev1.PullNever}, container{"exporter:v2", corev1.PullIfNotPresent}, true},
	}
	spec := func(c container) *v1alpha1.SidecarSetSpec {
		s := baseSpec()
		s.Containers[0].Image, s.Containers[0].ImagePullPolicy = c.image, c.policy
		s.InitContainers[0].Image, s.InitContainers[0].ImagePullPolicy = c.image, c.policy
		return s
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ImagelessHash(spec(tc.new)) != ImagelessHash(spec(tc.old)); got != tc.imagelessChanges {
				t.Errorf("ImagelessHash changed = %v, want %v", got, tc.imagelessChanges)
			}
			if Hash(spec(tc.new)) == Hash(spec(tc.old)) {
				t.Errorf("Hash unchanged, want a new revision")
			}
		})
	}
}

func TestDefaultPullPolicy(t *testing.T) {
	cases := []struct {
		image string
		want  corev1.PullPolicy
	}{
		{"busybox", corev1.PullAlways},
		{"busybox:latest", corev1.PullAlways},
		{"busybox:1.36", corev1.PullIfNotPresent},
		{"prom/mysqld-exporter@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullIfNotPresent},
		{"prom/mysqld-exporter:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullAlways},
		{"prom/mysqld-exporter:v0.15.1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullIfNotPresent},
		{"localhost:5000/busybox", corev1.PullAlways},
		{"localhost:5000/busybox:1.36", corev1.PullIfNotPresent},
		{"registry.example.com:443/team/agent:latest", corev1.PullAlways},
		// A bare name and a port look alike; the grammar reads a tag.
		{"busybox:5000", corev1.PullIfNotPresent},
		// The apiserver reads no tag where the grammar refuses the name.
		{"BusyBox", corev1.PullIfNotPresent},
	}
	for _, tc := range cases {
		if got := DefaultPullPolicy(tc.image); got != tc.want {
			t.Errorf("DefaultPullPolicy(%q) = %s, want %s", tc.image, got, tc.want)
		}
	}
}

func TestDecodePerSetForm(t *testing.T) {
	a := SetState{Revision: "a-1", Hash: "1", ImagelessHash: "i1", Containers: []ContainerState{{Name: "proxy", Image: "proxy:1"}}}
	aNewer := SetState{Revision: "a-2", Hash: "2", ImagelessHash: "i2", Containers: []ContainerState{{Name: "proxy", Image: "proxy:2"}}}
	b := SetState{Revision: "b-1", Hash: "3", ImagelessHash: "i3", Containers: []ContainerState{{Name: "mesh", Init: true, Image: "mesh:1"}}}
	tests := []struct {
		name        string
		annotations map[string]string
		want        State
		wantCorrupt []string
	}{
		{"per-set key only", map[string]string{PerSetKey("a"): EncodeSetState(a)}, State{"a": a}, nil},
		{"both forms, different sets: merged",
			map[string]string{v1alpha1.AnnotationState: Encode(State{"b": b}), PerSetKey("a"): EncodeSetState(a)},
			State{"a": a, "b": b}, nil},
		{"both forms, one set: the per-set key wins",
			map[string]string{v1alpha1.AnnotationState: Encode(State{"a": a, "b": b}), PerSetKey("a"): EncodeSetState(aNewer)},
			State{"a": aNewer, "b": b}, nil},
		{"a damaged per-set key names its set", map[string]string{PerSetKey("a"): `{"revision": ""}`, PerSetKey("b"): EncodeSetState(b)},
			State{"b": b}, []string{"a"}},
		{"other annotations with a similar key are not records", map[string]string{"xstate.sidecarset.dev/a": "{}"}, State{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.annotations)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
			var corrupt *CorruptError
			errors.As(err, &corrupt)
			var sets []string
			if corrupt != nil {
				sets = corrupt.Sets
			}
			if diff := cmp.Diff(tt.wantCorrupt, sets); diff != "" {
				t.Errorf("corrupt sets (-want +got):\n%s (err %v)", diff, err)
			}
		})
	}
}

func TestPutFoldsPerSetForm(t *testing.T) {
	a := SetState{Revision: "a-1", Hash: "1", ImagelessHash: "i1", Containers: []ContainerState{{Name: "proxy", Image: "proxy:1"}}}
	b := SetState{Revision: "b-1", Hash: "3", ImagelessHash: "i3", Containers: []ContainerState{}}
	b2 := SetState{Revision: "b-2", Hash: "4", ImagelessHash: "i4", Containers: []ContainerState{}}
	annotations := map[string]string{
		v1alpha1.AnnotationState: Encode(State{"b": b}),
		PerSetKey("a"):           EncodeSetState(a),
		"unrelated":              "kept",
	}
	value, err := Put(annotations, "b", b2)
	if err != nil {
		t.Fatal(err)
	}
	annotations[v1alpha1.AnnotationState] = value
	DropPerSet(annotations)
	want := map[string]string{v1alpha1.AnnotationState: Encode(State{"a": a, "b": b2}), "unrelated": "kept"}
	if diff := cmp.Diff(want, annotations); diff != "" {
		t.Errorf("annotations after Put and DropPerSet (-want +got):\n%s", diff)
	}
}

func TestEncodeSetStateIsTheEntry(t *testing.T) {
	s := SetState{Revision: "a-1", Hash: "1", ImagelessHash: "i1", Containers: []ContainerState{{Name: "proxy", Image: "proxy:1"}, {Name: "mesh", Init: true, Image: "m"}}}
	var whole map[string]json.RawMessage
	if err := json.Unmarshal([]byte(Encode(State{"a": s})), &whole); err != nil {
		t.Fatal(err)
	}
	if got, want := EncodeSetState(s), string(whole["a"]); got != want {
		t.Errorf("EncodeSetState = %s, want the entry Encode writes, %s", got, want)
	}
}

// A per-set key that is not JSON at all (written by hand, or emptied) stays
// an unreadable record of its set when another set's record is put: Put
// neither fails on it nor drops it.
func TestPutKeepsPerSetKeyThatIsNotJSON(t *testing.T) {
	b := SetState{Revision: "b-1", Hash: "3", ImagelessHash: "i3", Containers: []ContainerState{}}
	for _, value := range []string{"", "{oops", `{"revision":`} {
		t.Run(value, func(t *testing.T) {
			annotations := map[string]string{PerSetKey("a"): value}
			got, err := Put(annotations, "b", b)
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			annotations[v1alpha1.AnnotationState] = got
			DropPerSet(annotations)
			s, err := Decode(annotations)
			if diff := cmp.Diff(State{"b": b}, s); diff != "" {
				t.Errorf("Decode after Put (-want +got):\n%s", diff)
			}
			var corrupt *CorruptError
			if !errors.As(err, &corrupt) || !slices.Equal(corrupt.Sets, []string{"a"}) {
				t.Errorf("Decode after Put: error %v, want set a unreadable", err)
			}
		})
	}
}

// A write time that reads but lies outside years 0 to 9999 once in UTC
// (a hand-written offset across the year's edge) cannot be written back as
// RFC 3339: re-encoding the record must still give one that reads the same.
func TestDecodeWriteTimeOutOfRange(t *testing.T) {
	for _, at := range []string{"9999-12-31T23:59:59.000000-01:00", "0000-01-01T00:30:00.000000+01:00"} {
		t.Run(at, func(t *testing.T) {
			ann := map[string]string{v1alpha1.AnnotationState: `{"a":{"revision":"a-1","hash":"h","imagelessHash":"i",` +
				`"write":{"wasReady":true,"generation":2,"at":"` + at + `"},"containers":[]}}`}
			s, err := Decode(ann)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			again, err := Decode(map[string]string{v1alpha1.AnnotationState: Encode(s)})
			if err != nil {
				t.Fatalf("Decode of the re-encoded record: %v", err)
			}
			if diff := cmp.Diff(s, again); diff != "" {
				t.Errorf("re-encoded record (-read +again):\n%s", diff)
			}
			if w := s["a"].Write; w == nil || !w.WasReady || w.Generation != 2 {
				t.Errorf("the rest of the write record is lost: %+v", w)
			}
		})
	}
}

func TestResourcelessHash(t *testing.T) {
	cpu := func(s *v1alpha1.SidecarSetSpec, v string) {
		s.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}
	}
	cases := []struct {
		name    string
		edit    func(*v1alpha1.SidecarSetSpec)
		changes bool
	}{
		{"nothing", func(*v1alpha1.SidecarSetSpec) {}, false},
		{"image", func(s *v1alpha1.SidecarSetSpec) { s.Containers[0].Image = "exporter:2" }, false},
		{"cpu limit", func(s *v1alpha1.SidecarSetSpec) { cpu(s, "500m") }, false},
		{"native sidecar memory request", func(s *v1alpha1.SidecarSetSpec) {
			s.InitContainers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
		}, false},
		// The apiserver resizes cpu and memory only.
		{"ephemeral storage", func(s *v1alpha1.SidecarSetSpec) {
			s.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
		}, true},
		// A container's resizePolicy cannot change in a running pod.
		{"resize policy", func(s *v1alpha1.SidecarSetSpec) {
			s.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
		}, true},
		// The resources a policy computed belong to the pod: a new policy reaches new pods only.
		{"resources policy", func(s *v1alpha1.SidecarSetSpec) {
			s.Containers[0].ResourcesPolicy = &v1alpha1.ResourcesPolicy{TargetContainersMode: v1alpha1.TargetContainersModeSum}
		}, true},
		{"env", func(s *v1alpha1.SidecarSetSpec) { s.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}} }, true},
	}
	withCPU := baseSpec()
	cpu(withCPU, "250m")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			edited := baseSpec()
			cpu(edited, "250m")
			tc.edit(edited)
			if got := ResourcelessHash(edited) != ResourcelessHash(withCPU); got != tc.changes {
				t.Errorf("ResourcelessHash changed = %v, want %v", got, tc.changes)
			}
		})
	}
	if withCPU.Containers[0].Resources.Limits.Cpu().String() != "250m" {
		t.Errorf("ResourcelessHash changed the caller's resources: %v", withCPU.Containers[0].Resources)
	}
}

func TestResizableFrom(t *testing.T) {
	rev := func(name string, edit func(*v1alpha1.SidecarSetSpec)) appsv1.ControllerRevision {
		s := baseSpec()
		edit(s)
		return appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: runtime.RawExtension{Raw: Data(s)}}
	}
	latest := baseSpec()
	latest.Containers[0].Image = "exporter:2"
	latest.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}
	history := []appsv1.ControllerRevision{
		rev("s-same", func(*v1alpha1.SidecarSetSpec) {}),
		rev("s-env", func(s *v1alpha1.SidecarSetSpec) { s.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}} }),
		{ObjectMeta: metav1.ObjectMeta{Name: "s-unreadable"}, Data: runtime.RawExtension{Raw: []byte("{")}},
	}
	got := ResizableFrom(latest, history)
	if want := map[string]bool{"s-same": true}; !cmp.Equal(got, want) {
		t.Errorf("ResizableFrom = %v, want %v", got, want)
	}
}

// A HotUpgrade sidecar's empty image changes in place, like its image; its
// cpu and memory do not (its two containers are not resized), nor does
// its upgradeType.
func TestHashesOfHotUpgrade(t *testing.T) {
	base := func() *v1alpha1.SidecarSetSpec {
		return &v1alpha1.SidecarSetSpec{Containers: []v1alpha1.SidecarContainer{{
			Container:       corev1.Container{Name: "proxy", Image: "proxy:v1"},
			UpgradeStrategy: &v1alpha1.UpgradeStrategy{UpgradeType: v1alpha1.HotUpgrade, HotUpgradeEmptyImage: "empty:1"},
		}}}
	}
	tests := []struct {
		name                       string
		change                     func(*v1alpha1.SidecarSetSpec)
		sameImageless, sameResless bool
	}{
		{"a new empty image", func(s *v1alpha1.SidecarSetSpec) { s.Containers[0].UpgradeStrategy.HotUpgradeEmptyImage = "empty:2" }, true, true},
		{"a new image", func(s *v1alpha1.SidecarSetSpec) { s.Containers[0].Image = "proxy:v2" }, true, true},
		{"new memory", func(s *v1alpha1.SidecarSetSpec) {
			s.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
		}, false, false},
		{"cold", func(s *v1alpha1.SidecarSetSpec) { s.Containers[0].UpgradeStrategy = nil }, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := base(), base()
			tt.change(b)
			if got := ImagelessHash(a) == ImagelessHash(b); got != tt.sameImageless {
				t.Errorf("same ImagelessHash = %v, want %v", got, tt.sameImageless)
			}
			if got := ResourcelessHash(a) == ResourcelessHash(b); got != tt.sameResless {
				t.Errorf("same ResourcelessHash = %v, want %v", got, tt.sameResless)
			}
			if Hash(a) == Hash(b) {
				t.Error("same Hash for different specs")
			}
		})
	}
}

// BenchmarkDecode reads the records of a pod that two SidecarSets injected,
// one of which wrote into it in place: what a reconcile reads of every pod
// it matches.
func BenchmarkDecode(b *testing.B) {
	at := metav1.NewMicroTime(time.Date(2026, 5, 4, 10, 11, 12, 0, time.UTC))
	annotations := map[string]string{v1alpha1.AnnotationState: Encode(State{
		"mysql-exporter": {Revision: "mysql-exporter-5d8c7f9b2x", Hash: "5d8c7f9b2x", ImagelessHash: "w4b2c9d7f6",
			Write: &Write{WasReady: true, Generation: 3, At: &at},
			Containers: []ContainerState{{Name: "exporter", Image: "prom/mysqld-exporter:v0.15.1",
				PreviousImageID: "sha256:4f2a", PreviousContainerID: "containerd://9c1e", PreviousImage: "prom/mysqld-exporter:v0.15.0"}}},
		"log-shipper": {Revision: "log-shipper-7b9d6c5f4x", Hash: "7b9d6c5f4x", ImagelessHash: "c8d7f6b5w4",
			Containers: []ContainerState{{Name: "shipper", Init: true, Image: "fluent/fluent-bit:3.1"}}},
	})}
	for b.Loop() {
		if _, err := Decode(annotations); err != nil {
			b.Fatal(err)
		}
	}
}
