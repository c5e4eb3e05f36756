package rollout

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

func TestApply(t *testing.T) {
	set := testSet("exporter:v1")
	other := revision.SetState{Revision: "other-1", Hash: "o", ImagelessHash: "y",
		Containers: []revision.ContainerState{{Name: "mesh", Image: "mesh:v1"}}}
	u := PodUpdate{Pod: key("p01"), Action: ActionUpdate,
		Containers: []ContainerImage{{Name: "exporter", Image: "exporter:v2"}, {Name: "shipper", Init: true, Image: "fluent-bit:3.2"}},
		State:      revision.SetState{Revision: "s-2", Hash: "2", ImagelessHash: "x"}}

	pod := injectedPod("p01", set)
	state, _ := revision.Decode(pod.Annotations)
	state["other"] = other
	pod.Annotations[v1alpha1.AnnotationState] = revision.Encode(state)
	before := pod.DeepCopy()

	got, err := Apply(pod, setName, u)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, pod); diff != "" {
		t.Errorf("Apply modified its input (-before +after):\n%s", diff)
	}
	images := map[string]string{}
	for _, c := range append(got.Spec.InitContainers, got.Spec.Containers...) {
		images[c.Name] = c.Image
	}
	want := map[string]string{"mysql": "mysql:8", "exporter": "exporter:v2", "shipper": "fluent-bit:3.2"}
	if diff := cmp.Diff(want, images); diff != "" {
		t.Errorf("images (-want +got):\n%s", diff)
	}
	gotState, err := revision.Decode(got.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(revision.State{setName: u.State, "other": other}, gotState); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}

	// Another set's damaged entry neither stops this set's write nor is
	// lost by it.
	pod.Annotations[v1alpha1.AnnotationState] = `{"other": {"revision": "other-1"}}`
	got, err = Apply(pod, setName, u)
	if err != nil {
		t.Fatalf("Apply beside another set's damaged entry: %v", err)
	}
	if want := `{"mysql-sidecars":` + mustEncode(u.State) + `,"other":{"revision":"other-1"}}`; got.Annotations[v1alpha1.AnnotationState] != want {
		t.Errorf("state annotation %s\nwant %s", got.Annotations[v1alpha1.AnnotationState], want)
	}

	pod.Annotations[v1alpha1.AnnotationState] = "{not json"
	if _, err := Apply(pod, setName, u); err == nil {
		t.Errorf("Apply over a corrupt state annotation succeeded; want an error rather than losing other records")
	}
}

// TestStamped: a write of images gets the time it is written in its
// record's Write; a record-only write keeps the time of the write it
// describes, and a settle, which forgets the write, gets none.
func TestStamped(t *testing.T) {
	earlier := metav1.NewMicroTime(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
	now := time.Date(2026, 5, 4, 10, 11, 12, 345678000, time.UTC)
	stamped := metav1.NewMicroTime(now)
	images := []ContainerImage{{Name: "exporter", Image: "exporter:v2"}}
	tests := []struct {
		name string
		u    PodUpdate
		want *revision.Write
	}{{
		name: "update writes images: stamped now",
		u:    PodUpdate{Action: ActionUpdate, Containers: images, State: revision.SetState{Write: &revision.Write{WasReady: true, Generation: 3}}},
		want: &revision.Write{WasReady: true, Generation: 3, At: &stamped},
	}, {
		name: "revert over an earlier write: stamped now",
		u:    PodUpdate{Action: ActionRevertDrift, Containers: images, State: revision.SetState{Write: &revision.Write{Generation: 4, At: &earlier}}},
		want: &revision.Write{Generation: 4, At: &stamped},
	}, {
		name: "record of a disruption keeps the write's time",
		u:    PodUpdate{Action: ActionRecordDisruption, State: revision.SetState{Write: &revision.Write{WasReady: true, Generation: 3, At: &earlier}}},
		want: &revision.Write{WasReady: true, Generation: 3, At: &earlier},
	}, {
		name: "settle has no write",
		u:    PodUpdate{Action: ActionSettle},
		want: nil,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before *revision.Write
			if w := tt.u.State.Write; w != nil {
				copied := *w
				before = &copied
			}
			got := tt.u.Stamped(now)
			if diff := cmp.Diff(tt.want, got.State.Write); diff != "" {
				t.Errorf("Write (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.u.State.Write); diff != "" {
				t.Errorf("Stamped modified its input (-before +after):\n%s", diff)
			}
		})
	}
}
