package integration

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// TestInjectionRevision: spec.customVersion labels each spec's
// ControllerRevision; with injectionStrategy.revision, a new pod gets the
// named revision (by name, or by the custom version labelling it) while the
// latest differs; a name that finds nothing gives the latest revision and an
// event; with Partial, the latest revision once the partition leaves it
// room; without injectionStrategy.revision new pods get the latest again.
func TestInjectionRevision(t *testing.T) {
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 0)
	set.Spec.CustomVersion = "v1"
	// Keeps the pods on the revision they were injected with.
	set.Spec.UpdateStrategy.Partition = new(intstr.FromString("100%"))
	f.CreateSet(set)
	first := f.WaitStatus("the first revision written", func(s v1alpha1.SidecarSetStatus) bool { return s.LatestRevision != "" }).LatestRevision

	var revs appsv1.ControllerRevisionList
	if err := f.Client.List(t.Context(), &revs, client.MatchingLabels{v1alpha1.LabelSidecarSet: f.Set}); err != nil {
		t.Fatal(err)
	}
	if len(revs.Items) != 1 || revs.Items[0].Name != first || revs.Items[0].Labels[v1alpha1.LabelCustomVersion] != "v1" {
		t.Fatalf("revisions %v, want %s alone, labelled %s=v1", revs.Items, first, v1alpha1.LabelCustomVersion)
	}

	created := func(name, wantImage, wantRevision string) {
		t.Helper()
		f.CreatePod(f.NewPod(name))
		p := f.Pod(name)
		state, err := revision.Decode(p.Annotations)
		if err != nil {
			t.Fatal(err)
		}
		if got := fixture.Image(p, "exporter"); got != wantImage || state[f.Set].Revision != wantRevision {
			t.Errorf("new pod %s got exporter %s of revision %s, want %s of %s", name, got, state[f.Set].Revision, wantImage, wantRevision)
		}
	}

	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "exporter:v2"
		s.Spec.CustomVersion = "v2"
		s.Spec.InjectionStrategy.Revision = &v1alpha1.InjectionRevision{RevisionName: first}
	})
	latest := f.WaitStatus("the second revision written", func(s v1alpha1.SidecarSetStatus) bool { return s.LatestRevision != first }).LatestRevision
	created("p01", "exporter:v1", first)
	var cr appsv1.ControllerRevision
	for name, want := range map[string]string{first: "v1", latest: "v2"} {
		if err := f.Client.Get(t.Context(), client.ObjectKey{Namespace: revs.Items[0].Namespace, Name: name}, &cr); err != nil {
			t.Fatal(err)
		}
		if got := cr.Labels[v1alpha1.LabelCustomVersion]; got != want {
			t.Errorf("revision %s labelled %s=%q, want %q", name, v1alpha1.LabelCustomVersion, got, want)
		}
	}

	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.InjectionStrategy.Revision = &v1alpha1.InjectionRevision{CustomVersion: "v1"}
	})
	f.WaitStatus("customVersion named", func(v1alpha1.SidecarSetStatus) bool { return true })
	created("p02", "exporter:v1", first)

	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.InjectionStrategy.Revision = &v1alpha1.InjectionRevision{CustomVersion: "v0"}
	})
	f.WaitStatus("a missing customVersion named", func(v1alpha1.SidecarSetStatus) bool { return true })
	created("p03", "exporter:v2", latest)
	if evs := f.WaitSetEvent("InjectionWarning"); !strings.Contains(evs[0].Message, `no revision has custom version "v0"`) {
		t.Errorf("InjectionWarning %q does not say the custom version was not found", evs[0].Message)
	}

	// Partial: the partition's 100% leaves the latest revision no room, 0
	// all of it (none of the 4 pods is on it yet, the new one makes 5).
	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.InjectionStrategy.Revision = &v1alpha1.InjectionRevision{CustomVersion: "v1", Policy: v1alpha1.InjectRevisionPartial}
	})
	f.WaitStatus("Partial declared", func(v1alpha1.SidecarSetStatus) bool { return true })
	created("p04", "exporter:v1", first)
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = new(intstr.FromInt32(0)) })
	f.WaitStatus("partition 0 observed, 4 matched", func(s v1alpha1.SidecarSetStatus) bool { return s.MatchedPods == 4 })
	created("p05", "exporter:v2", latest)

	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.InjectionStrategy.Revision = nil
		s.Spec.UpdateStrategy.Partition = new(intstr.FromString("100%"))
	})
	f.WaitStatus("injectionStrategy.revision removed", func(v1alpha1.SidecarSetStatus) bool { return true })
	created("p06", "exporter:v2", latest)
}
