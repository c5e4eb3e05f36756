package rollout

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
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

	got, _, err := Apply(pod, setName, u, time.Time{})
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
	got, _, err = Apply(pod, setName, u, time.Time{})
	if err != nil {
		t.Fatalf("Apply beside another set's damaged entry: %v", err)
	}
	if want := `{"mysql-sidecars":` + mustEncode(u.State) + `,"other":{"revision":"other-1"}}`; got.Annotations[v1alpha1.AnnotationState] != want {
		t.Errorf("state annotation %s\nwant %s", got.Annotations[v1alpha1.AnnotationState], want)
	}

	pod.Annotations[v1alpha1.AnnotationState] = "{not json"
	if _, _, err := Apply(pod, setName, u, time.Time{}); err == nil {
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

// TestApplySettlesOthersBack: a write settles, for them, the records of
// other sets whose last write is back in the pod it is made from, and only
// those (found by TestModel, seed 10698544121659125931). Set s wrote p01
// while ready and p01 came back, but the settle s planned from a view the
// pod had moved on from was refused. Another set then wrote p01 while ready
// and took it down. s counted that disruption as its own (its record's
// write was ready when made, the pod is not ready), wrote into p01 again
// for free, and so had two pods down with maxUnavailable 1.
func TestApplySettlesOthersBack(t *testing.T) {
	v1, v2 := testSet("exporter:v1"), testSet("exporter:v2")
	latest := NewLatest(v2)
	// other writes its record, as the update that takes the pod down.
	otherWrites := func(pod *corev1.Pod) []string {
		t.Helper()
		u := PodUpdate{Pod: key(pod.Name), Action: ActionUpdate, State: revision.SetState{Revision: "other-2", Hash: "o2", ImagelessHash: "y",
			Write: &revision.Write{WasReady: true, Generation: pod.Generation + 1}}}
		written, others, err := Apply(pod, "other", u, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		written.Generation++
		setReady(written, false)
		*pod = *written
		return others
	}

	back := writtenPod(t, v1, latest)
	swap(back)
	if p := Classify(back, record(back), latest); !p.Back || p.Record.Write == nil {
		t.Fatalf("setup: p01 is not back with its write unsettled: %+v", p)
	}
	if others := otherWrites(back); !slices.Equal(others, []string{setName}) {
		t.Errorf("Apply settled %v for others, want [%s]", others, setName)
	}
	if p := Classify(back, record(back), latest); p.Disrupting || p.Record.Write != nil || p.Record.Released == nil {
		t.Errorf("after another set's write took p01 down: Disrupting %v, Write %+v; want the write released and not counted", p.Disrupting, p.Record.Write)
	}

	// The same with the record in a per-set key, as a mutating policy
	// writes it: settled, and folded into the state annotation.
	perSet := writtenPod(t, v1, latest)
	swap(perSet)
	perSet.Annotations[revision.PerSetKey(setName)] = revision.EncodeSetState(record(perSet))
	delete(perSet.Annotations, v1alpha1.AnnotationState)
	if others := otherWrites(perSet); !slices.Equal(others, []string{setName}) {
		t.Errorf("Apply settled %v for others with the record in a per-set key, want [%s]", others, setName)
	}
	if rec := record(perSet); rec.Write != nil || rec.Released == nil {
		t.Errorf("the record in a per-set key was not released: Write %+v", rec.Write)
	}
	if _, ok := perSet.Annotations[revision.PerSetKey(setName)]; ok {
		t.Errorf("the per-set key is left beside the state annotation: %v", perSet.Annotations)
	}

	// A write still in flight is its set's to settle: it counts on.
	inFlight := writtenPod(t, v1, latest)
	if others := otherWrites(inFlight); len(others) != 0 {
		t.Errorf("Apply settled %v for others over a write in flight, want none", others)
	}
	if p := Classify(inFlight, record(inFlight), latest); !p.Disrupting || p.Record.Write == nil {
		t.Errorf("a write in flight under another set's: Disrupting %v, Write %+v; want it kept and counted", p.Disrupting, p.Record.Write)
	}
}
