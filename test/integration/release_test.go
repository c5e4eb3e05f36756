package integration

import (
	"testing"
	"time"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// TestReleaseWritesNoPod: a pod back from its write is not written again
// to say so. Once the rollout is complete each pod's record stays as its
// write left it, and the set's status.releasedBefore passes every write
// within about a minute (the controller's margin for its view of pods),
// from then on the records read as released.
func TestReleaseWritesNoPod(t *testing.T) {
	const pods = 3
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.CreatePods(pods, nil, nil)
	f.WaitComplete(pods)
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	f.WaitComplete(pods)
	records := map[string]string{}
	for _, p := range f.Pods() {
		records[p.Name] = p.Annotations[v1alpha1.AnnotationState]
	}
	began := time.Now()
	set := f.WaitSetFor(3*time.Minute, "releasedBefore past every pod's write", func(s *v1alpha1.SidecarSet) bool {
		before := s.Status.ReleasedBefore
		if before == nil {
			return false
		}
		for _, p := range f.Pods() {
			state, err := revision.Decode(p.Annotations)
			if err != nil {
				t.Fatalf("pod %s: %v", p.Name, err)
			}
			w := state[f.Set].Write
			if w == nil || w.At == nil {
				t.Fatalf("pod %s: record %+v, want the rollout's write in it", p.Name, state[f.Set])
			}
			if !w.At.Before(before) {
				return false
			}
		}
		return true
	})
	t.Logf("releasedBefore %s, %v after the rollout was complete", set.Status.ReleasedBefore.UTC().Format(time.RFC3339Nano), time.Since(began).Round(time.Second))
	for _, p := range f.Pods() {
		if got := p.Annotations[v1alpha1.AnnotationState]; got != records[p.Name] {
			t.Errorf("pod %s's record was written again once its write was back:\n%s\nthen\n%s", p.Name, records[p.Name], got)
		}
	}
}
