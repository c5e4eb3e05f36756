package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sidecarset/sidecarset/internal/revision"
)

func TestSameImage(t *testing.T) {
	a, b := digest("x:v1"), digest("x:v2")
	tests := []struct {
		recorded, inSpec string
		want             bool
	}{
		// The worked cases of SameImage's doc comment.
		{"x:v1", "x:v1", true},
		{"nginx:1", "docker.io/library/nginx:1", true},
		{"nginx", "index.docker.io/nginx:latest", true},
		{"x:v1", "x:v1@" + a, true},
		{"r.io/x:v1@" + a, "mirror.io/x@" + a, true},
		{"x:v1", "x:v2", false},
		{"x@" + a, "x@" + b, false},
		{"x:v1", "mirror.io/x:v1", false},
		{"x:v1", "x@" + a, false},
		{"x:v1@" + a, "x:v1", false},
		{"x:v1", "x:v1@" + a + "@" + a, false},

		// The rest of the rules.
		{"docker.io/library/nginx:1", "nginx:1", true},
		{"team/app:1", "docker.io/team/app:1", true},
		{"team/app:1", "docker.io/library/team/app:1", false},
		{"nginx", "nginx@" + a, false},
		{"nginx", "nginx:latest@" + a, true},
		{"x:v1@" + a, "x:v2@" + a, true},
		{"localhost:5000/x:v1", "localhost:5000/x:v1@" + a, true},
		{"localhost:5000/x", "localhost:5000/x:latest", true},
		{"localhost:5000/x", "localhost:5001/x", false},
		{"r.io:443/x:v1", "r.io/x:v1", false},
		{"x:v1", "x:v1@sha256:short", false},
		{"x:v1", "x:", false},
		{"x:v1", "", false},
		{"", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.recorded+" vs "+tt.inSpec, func(t *testing.T) {
			if got := SameImage(tt.recorded, tt.inSpec); got != tt.want {
				t.Errorf("SameImage(%q, %q) = %v, want %v", tt.recorded, tt.inSpec, got, tt.want)
			}
		})
	}
}

// TestClassifyDrift: a sidecar image rewritten into one that means the same
// is not drift; one that may run something else is.
func TestClassifyDrift(t *testing.T) {
	v1 := testSet("exporter:v1")
	latest := NewLatest(v1)
	pinned := "exporter:v1@" + digest("exporter:v1")
	tests := []struct {
		name  string
		image string
		want  []string
	}{
		{"as written", "exporter:v1", nil},
		{"pinned to its digest by a policy", pinned, nil},
		{"the same, spelt out", "docker.io/library/exporter:v1", nil},
		{"another tag, by hand", "exporter:by-hand", []string{"exporter"}},
		{"a mirror by tag", "mirror.example/exporter:v1", []string{"exporter"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := injectedPod("p01", v1)
			pod.Spec.Containers[1].Image = tt.image
			got := Classify(pod, record(pod), latest)
			if diff := cmp.Diff(tt.want, got.Drifted); diff != "" {
				t.Errorf("Drifted (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecordAdmitted(t *testing.T) {
	pinned := "exporter:v1@" + digest("exporter:v1")
	state := func(exporter, shipper string) revision.State {
		return revision.State{
			"a": {Revision: "a-1", Hash: "h", ImagelessHash: "i", Containers: []revision.ContainerState{
				{Name: "exporter", Image: exporter},
				{Name: "shipper", Init: true, Image: shipper},
			}},
			"b": {Revision: "b-1", Containers: []revision.ContainerState{{Name: "gone", Image: "gone:1"}}},
		}
	}
	tests := []struct {
		name             string
		exporter, native string
		want             revision.State
		changed          bool
	}{
		{
			name:     "as injected: nothing to learn",
			exporter: "exporter:v1", native: "fluent-bit:3.1",
			want: state("exporter:v1", "fluent-bit:3.1"),
		},
		{
			name:     "pinned to a digest by a later policy",
			exporter: pinned, native: "fluent-bit:3.1",
			want: state(pinned, "fluent-bit:3.1"), changed: true,
		},
		{
			name:     "moved to a mirror by tag, native sidecar too",
			exporter: "mirror.example/exporter:v1", native: "mirror.example/fluent-bit:3.1",
			want: state("mirror.example/exporter:v1", "mirror.example/fluent-bit:3.1"), changed: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := injectedPod("p01", testSet("exporter:v1"))
			pod.Spec.Containers[1].Image = tt.exporter
			pod.Spec.InitContainers[0].Image = tt.native
			in := state("exporter:v1", "fluent-bit:3.1")
			got, changed := RecordAdmitted(in, pod)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("RecordAdmitted (-want +got):\n%s", diff)
			}
			if changed != tt.changed {
				t.Errorf("changed = %v, want %v", changed, tt.changed)
			}
			if diff := cmp.Diff(state("exporter:v1", "fluent-bit:3.1"), in); diff != "" {
				t.Errorf("RecordAdmitted modified its input (-was +now):\n%s", diff)
			}
		})
	}
}

// A record copied from a live pod into a new one (a restored backup, a
// template made from a pod) loses its write: nothing was written into a pod
// that did not exist, and a write would be waited for for ever.
func TestRecordAdmittedDropsCopiedWrite(t *testing.T) {
	pod := injectedPod("p01", testSet("exporter:v2"))
	copied := revision.State{setName: {Revision: "s-2", Hash: "2", ImagelessHash: "x",
		Write: &revision.Write{WasReady: true, Generation: 5},
		Containers: []revision.ContainerState{{Name: "exporter", Image: "exporter:v2",
			PreviousContainerID: "containerd://old", PreviousImage: "exporter:v1", PreviousImageID: imageID("exporter:v1")}}}}
	got, changed := RecordAdmitted(copied, pod)
	want := revision.State{setName: {Revision: "s-2", Hash: "2", ImagelessHash: "x",
		Containers: []revision.ContainerState{{Name: "exporter", Image: "exporter:v2"}}}}
	if diff := cmp.Diff(want, got); diff != "" || !changed {
		t.Errorf("RecordAdmitted changed %v (-want +got):\n%s", changed, diff)
	}
}
