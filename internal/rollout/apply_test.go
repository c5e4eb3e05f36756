package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"

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
