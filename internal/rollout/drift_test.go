package rollout

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

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

func TestRecordStored(t *testing.T) {
	pinned := "exporter:v1@" + digest("exporter:v1")
	rec := func(exporter, shipper string) revision.SetState {
		return revision.SetState{Revision: "s-1", Hash: "h", Containers: []revision.ContainerState{
			{Name: "exporter", Image: exporter, PreviousContainerID: "containerd://exporter-0"},
			{Name: "shipper", Init: true, Image: shipper},
		}}
	}
	written := []ContainerImage{{Name: "exporter", Image: "exporter:v1"}, {Name: "shipper", Init: true, Image: "fluent-bit:3.1"}}
	tests := []struct {
		name string
		// containers are the ones the update writes.
		containers       []ContainerImage
		exporter, native string
		want             revision.SetState
		rewrites         []Rewrite
	}{
		// The worked cases of RecordStored's doc comment.
		{
			name: "stored as written", containers: written[:1],
			exporter: "exporter:v1", native: "fluent-bit:3.1",
			want: rec("exporter:v1", "fluent-bit:3.1"),
		},
		{
			name: "pinned to its digest", containers: written[:1],
			exporter: pinned, native: "fluent-bit:3.1",
			want: rec("exporter:v1", "fluent-bit:3.1"),
		},
		{
			name: "moved to a mirror by tag", containers: written[:1],
			exporter: "mirror.example/exporter:v1", native: "fluent-bit:3.1",
			want:     rec("mirror.example/exporter:v1", "fluent-bit:3.1"),
			rewrites: []Rewrite{{Container: "exporter", Written: "exporter:v1", Stored: "mirror.example/exporter:v1"}},
		},
		{
			name: "a native sidecar moved too", containers: written,
			exporter: "exporter:v1", native: "mirror.example/fluent-bit:3.1",
			want:     rec("exporter:v1", "mirror.example/fluent-bit:3.1"),
			rewrites: []Rewrite{{Container: "shipper", Written: "fluent-bit:3.1", Stored: "mirror.example/fluent-bit:3.1"}},
		},
		{
			// Someone else's, which Classify judges.
			name: "a container not written differs", containers: written[:1],
			exporter: "exporter:v1", native: "fluent-bit:hand",
			want: rec("exporter:v1", "fluent-bit:3.1"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := injectedPod("p01", testSet("exporter:v1"))
			pod.Spec.Containers[1].Image = tt.exporter
			pod.Spec.InitContainers[0].Image = tt.native
			u := PodUpdate{Pod: key("p01"), Action: ActionRevertDrift, Containers: tt.containers, State: rec("exporter:v1", "fluent-bit:3.1")}
			got, rewrites := RecordStored(u, pod)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.rewrites, rewrites); diff != "" {
				t.Errorf("rewrites (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(rec("exporter:v1", "fluent-bit:3.1"), u.State); diff != "" {
				t.Errorf("RecordStored modified its input (-was +now):\n%s", diff)
			}
		})
	}
}

// TestRewritten: a pod on the latest revision whose record holds an image
// admission stored in place of the declared one is told as rewritten; a
// digest pin, an ordinary init container that keeps the image it ran, and
// a pod on another revision are not.
func TestRewritten(t *testing.T) {
	v1 := testSet("exporter:v1")
	v1.Spec.InitContainers = append(v1.Spec.InitContainers, v1alpha1.SidecarContainer{Container: corev1.Container{Name: "setup", Image: "setup:v1"}})
	latest := NewLatest(v1)
	tests := []struct {
		name    string
		rewrite func(rec *revision.SetState, pod *corev1.Pod)
		want    []string
	}{
		{"as declared", func(*revision.SetState, *corev1.Pod) {}, nil},
		{"moved to a mirror by tag", func(rec *revision.SetState, pod *corev1.Pod) {
			rec.Containers[0].Image = "mirror.example/exporter:v1"
			pod.Spec.Containers[1].Image = "mirror.example/exporter:v1"
		}, []string{"exporter"}},
		{"a native sidecar moved", func(rec *revision.SetState, pod *corev1.Pod) {
			rec.Containers[1].Image = "mirror.example/fluent-bit:3.1"
			pod.Spec.InitContainers[0].Image = "mirror.example/fluent-bit:3.1"
		}, []string{"shipper"}},
		{"pinned to its digest", func(rec *revision.SetState, pod *corev1.Pod) {
			rec.Containers[0].Image = "exporter:v1@" + digest("exporter:v1")
			pod.Spec.Containers[1].Image = rec.Containers[0].Image
		}, nil},
		{"an ordinary init container keeps the image it ran", func(rec *revision.SetState, pod *corev1.Pod) {
			rec.Containers[2].Image = "setup:v0"
			pod.Spec.InitContainers[1].Image = "setup:v0"
		}, nil},
		{"on another revision", func(rec *revision.SetState, pod *corev1.Pod) {
			rec.Hash = "other"
			rec.Containers[0].Image = "mirror.example/exporter:v1"
			pod.Spec.Containers[1].Image = "mirror.example/exporter:v1"
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := injectedPod("p01", v1)
			rec := record(pod)
			tt.rewrite(&rec, pod)
			setRecord(pod, rec)
			got := Classify(pod, rec, latest).Rewritten(latest)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Rewritten (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWriteAdmissionMadeANoOp: a policy rewrote exporter's image when the
// pod was created (a digest pin, a mirror by tag), and the webhook recorded
// what was stored. A new revision changes shipper only. Over the mirror it
// writes exporter's declared image too, which the policy stores as the
// image the pod has; a pin means the declared image, and is kept. The
// kubelet restarts shipper alone. Exporter is complete as it runs, whether
// or not the record of what was stored landed after the write, on a kubelet
// that reports its generation or not. (It was awaited for ever, and the
// rollout stalled.)
func TestWriteAdmissionMadeANoOp(t *testing.T) {
	v2 := testutil.SidecarSet(setName).
		Selector(map[string]string{"app": "db"}).
		Container("exporter", "exporter:v1").
		InitContainers(testutil.Container("shipper", "fluent-bit:3.2").RestartAlways().Sidecar("")).
		MinReadySeconds(0).
		Obj()
	latest := NewLatest(v2)
	pinned, mirror := "exporter:v1@"+digest("exporter:v1"), "mirror.example/exporter:v1"
	// The record holds what the webhook recorded, or, after a write of
	// exporter:v1 that a pin kept, what was written (RecordStored).
	for _, images := range [][2]string{{pinned, pinned}, {pinned, "exporter:v1"}, {mirror, mirror}} {
		stored, inRecord := images[0], images[1]
		for _, recorded := range []bool{true, false} {
			for _, observed := range []bool{true, false} {
				name := fmt.Sprintf("%s recorded as %s, stored recorded %v, generation observed %v", stored, inRecord, recorded, observed)
				t.Run(name, func(t *testing.T) {
					pod := injectedPod("p01", testSet("exporter:v1"))
					pod.Spec.Containers[1].Image = stored
					pod.Status.ContainerStatuses[1] = running("exporter", stored)
					rec := record(pod)
					rec.Containers[0].Image = inRecord
					setRecord(pod, rec)
					plan, _ := Next(Input{Latest: latest, Pods: []Pod{Classify(pod, record(pod), latest)}})
					if len(plan.Updates) != 1 {
						t.Fatalf("updates %+v, want one", plan.Updates)
					}
					// A pin means the declared image: it is not written again.
					mirrored := strings.HasPrefix(stored, "mirror")
					if slices.ContainsFunc(plan.Updates[0].Containers, func(c ContainerImage) bool { return c.Name == "exporter" }) != mirrored {
						t.Errorf("update %+v: want exporter:v1 written only over the mirror's image", plan.Updates[0])
					}
					u := plan.Updates[0]
					applyUpdate(pod, u)
					pod.Spec.Containers[1].Image = stored
					if rec, rewrites := RecordStored(u, pod); recorded && len(rewrites) > 0 {
						setRecord(pod, rec)
					}
					swap(pod)
					setReady(pod, true)
					pod.Status.ObservedGeneration = 0
					if observed {
						pod.Status.ObservedGeneration = pod.Generation
					}
					p := Classify(pod, record(pod), latest)
					if exporter, _ := p.container("exporter"); !exporter.Complete || !p.Back || p.Disrupting {
						t.Errorf("exporter %+v\npod back %v, disrupting %v: want exporter complete as it runs, and the pod back",
							exporter, p.Back, p.Disrupting)
					}
				})
			}
		}
	}
}
