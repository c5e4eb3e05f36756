package integration

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// TestRePushedTag: the tag a sidecar runs is re-pointed to new content (a
// re-push). The running containers keep what they started from and nothing
// is written: the spec did not change. A rollout away and back (an undo)
// restarts each sidecar twice, and the container it comes back to runs the
// tag's new content: completion is judged by the new container, not by the
// image name the old one had.
func TestRePushedTag(t *testing.T) {
	const pods = 3
	f := newFixture(t)
	// A tag of the test's own: the nodes and their registry are shared.
	tagged := "exporter:" + f.NS
	if err := f.C.Push(t.Context(), tagged, "old"); err != nil {
		t.Fatal(err)
	}
	set := f.SidecarSet(tagged, 1)
	// On simulated nodes a pull sees the re-push only when it pulls again.
	set.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
	f.startComplete(set, pods)
	apps := fixture.AppIDs(f.Pods())
	f.assertRuns(f.Pods(), "exporter", tagged, "old")
	oldID := fixture.ContainerStatus(f.Pod("p01"), "exporter").ImageID

	if err := f.C.Push(t.Context(), tagged, "new"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	f.AssertNothingRestarted()
	f.WaitStatus("still complete after the re-push", fixture.Complete(pods))
	for _, p := range f.Pods() {
		if id := fixture.ContainerStatus(&p, "exporter").ImageID; id != oldID {
			t.Errorf("pod %s: exporter runs imageID %s after the re-push, want the old content's %s", p.Name, id, oldID)
		}
	}

	f.rollOut("exporter:v2", pods, 1, "maxUnavailable 1")
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = tagged })
	f.WaitStatus("complete back on the re-pushed tag", func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Complete(pods)(s) && fixture.CountImage(f.Pods(), tagged) == pods
	})
	ps := f.Pods()
	f.assertRuns(ps, "exporter", tagged, "new")
	for name, n := range fixture.Restarts(ps, "exporter") {
		if n != 2 {
			t.Errorf("pod %s: exporter restarted %d times, want twice (away and back)", name, n)
		}
	}
	f.AssertAppsUntouched(apps)
}

// TestSameContentNewTag: the sidecar moves to a new tag of the content it
// already runs (a release tag added to a build's). The kubelet restarts it,
// since its image string changed, yet the imageID it reports stays the same,
// and status.image may still show the first tag. The rollout completes all
// the same, judged by the new container and the pod generation the kubelet
// reports, not by the imageID: a rollout that waits for a new imageID waits
// there for ever.
func TestSameContentNewTag(t *testing.T) {
	const pods = 3
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 1)
	f.startComplete(set, pods)
	apps := fixture.AppIDs(f.Pods())
	oldID := fixture.ContainerStatus(f.Pod("p01"), "exporter").ImageID

	// A tag of the test's own: the nodes and their registry are shared.
	release := "exporter:" + f.NS
	if err := f.C.Tag(t.Context(), "exporter:v1", release); err != nil {
		t.Fatal(err)
	}
	f.rollOut(release, pods, 1, "maxUnavailable 1")
	ps := f.Pods()
	for _, p := range ps {
		if id := fixture.ContainerStatus(&p, "exporter").ImageID; id != oldID {
			t.Errorf("pod %s: exporter runs imageID %s on the new tag, want the same content's %s", p.Name, id, oldID)
		}
	}
	for name, n := range fixture.Restarts(ps, "exporter") {
		if n != 1 {
			t.Errorf("pod %s: exporter restarted %d times, want once", name, n)
		}
	}
	f.AssertAppsUntouched(apps)
}
