package integration

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/manager"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// TestLastReleaseBeside: a manager of this release beside one of the last
// release, each taking a rollout over from the other in its middle, as a
// helm rollback and a helm upgrade do. 8 pods, maxUnavailable 2, the
// partition walked 6, 5, 0 so that the writes come apart
// (rollStaggered); each time the manager stops once p01 and p02 are back
// (their records not settled), p03 restarting and p04 written:
//
//	rollback  this release rolls exporter:v2 and stops, giving the Lease
//	          up; the last release's manager takes over and finishes
//	          from this release's records
//	upgrade   the last release rolls exporter:v3 and stops; this
//	          release's manager takes over and finishes from its records
//
// Each time: every pod ends Ready on the image, the kubelet restarted each
// exporter once per rollout and no pod's spec was written twice, never more
// than maxUnavailable pods were not Ready at once, the set says Complete
// with every pod matched (no record taken for corrupt), and the records
// stop changing (no write loops).
//
// The last release runs as its own binary (lastReleaseManagerEnv): only
// its code tells how it reads this release's records. Without the binary
// the test skips; TestUpgradeFromLastReleaseMidRollout covers the upgrade
// from a recording, and checks this release's records against the last
// release's format.
func TestLastReleaseBeside(t *testing.T) {
	bin := lastReleaseManager(t)
	const pods, maxUnavailable = 8, 2
	f := newFixture(t)
	// Each manager stops without its drain: a manager stopping runs on
	// through it, and may take the rollout further than rollStaggered left
	// it, or finish it, before the other takes over.
	opts := cluster.Stack.ManagerOptions()
	t.Cleanup(func() { cluster.Stack.SetManagerOptions(opts) })
	undrained := opts
	undrained.ShutdownDrain = 0
	restartManager(t, undrained)
	set := f.SidecarSet("exporter:v1", 2)
	set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromInt32(maxUnavailable))
	set.Spec.UpdateStrategy.MinReadySeconds = new(int32(3))
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = new(int32(120))
	f.CreateSet(set)
	f.CreatePods(pods, nil, nil)
	f.WaitComplete(pods)

	world := watchPodWorld(t, f)
	f.rollStaggered("exporter:v2", func(*corev1.Pod) bool { return true })
	old := cluster.ManagerProcessOf(t, bin, "--shutdown-drain=0s")
	// This release's manager runs again for the upgrade: stopped before
	// ManagerProcessOf's cleanup starts it again, with its own options.
	t.Cleanup(func() { _ = cluster.Stack.StopManager() })
	t.Cleanup(func() { cluster.Stack.SetManagerOptions(opts) })
	f.finishedBeside("the last release", world, pods, maxUnavailable, "exporter:v2", 1)

	world = watchPodWorld(t, f)
	f.rollStaggered("exporter:v3", func(*corev1.Pod) bool { return true })
	if err := old.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Stack.StartManager(); err != nil {
		t.Fatal(err)
	}
	f.finishedBeside("this release", world, pods, maxUnavailable, "exporter:v3", 2)
}

// finishedBeside waits until the rollout to image, taken over by the
// manager who names, is Complete with every pod matched, and checks what
// world saw of it (assertRolled, maxUnavailable), and that no pod's records
// change once the rollout is over.
func (f *testFixture) finishedBeside(who string, world *podWorld, pods int32, maxUnavailable int, image string, restarts int32) {
	t := f.T
	t.Helper()
	took := time.Now()
	left := int(pods) - fixture.CountImage(f.Pods(), image)
	if left == 0 {
		t.Fatalf("%s took over a rollout already written to every pod: it has nothing to take over", who)
	}
	f.WaitStatus(who+": Complete on "+image+", every pod matched", func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Complete(pods)(s) && s.UnmanagedPods == 0 && fixture.CountImage(f.Pods(), image) == int(pods)
	})
	world.stop(t)
	t.Logf("%s took the rollout to %s over with %d pods to write and finished it %v later; at most %d pods not Ready at once (%s)",
		who, image, left, time.Since(took).Round(time.Millisecond), world.maxNotReady, world.worst)
	if world.maxNotReady > maxUnavailable {
		t.Errorf("%s: %d pods not Ready at once (%s), more than maxUnavailable %d", who, world.maxNotReady, world.worst, maxUnavailable)
	}
	world.assertRolled(t, f, image, restarts)
	// The rollout over, nothing moves: a release writes no pod.
	time.Sleep(2 * time.Second)
	before := map[string]string{}
	for _, p := range f.Pods() {
		before[p.Name] = p.Annotations[v1alpha1.AnnotationState]
	}
	time.Sleep(3 * time.Second)
	for _, p := range f.Pods() {
		if now := p.Annotations[v1alpha1.AnnotationState]; now != before[p.Name] {
			t.Errorf("%s: pod %s's records still change after the rollout:\n  %s\n  %s", who, p.Name, before[p.Name], now)
		}
	}
}

// restartManager starts the cluster's manager again with opts; it starts
// with them from then on (Stack.SetManagerOptions).
func restartManager(t *testing.T, opts manager.Options) {
	t.Helper()
	if err := cluster.Stack.StopManager(); err != nil {
		t.Fatal(err)
	}
	cluster.Stack.SetManagerOptions(opts)
	if err := cluster.Stack.StartManager(); err != nil {
		t.Fatal(err)
	}
}

// TestRollbackAfterRollout: a helm rollback to the last release after this
// release finished a rollout, with one pod down for reasons of its own (its
// app never Ready, from a hand edit). The last release reads the records
// this release left, then rolls exporter:v3 (4 pods, maxUnavailable 1): the
// pod down cost it nothing, as a pod not Ready before its write does, so
// the rollout writes every pod and neither stalls nor pauses itself. A
// record that still said the pod was disrupted by this release's write
// would hold the one slot for ever. Needs the last release's binary
// (lastReleaseManagerEnv).
func TestRollbackAfterRollout(t *testing.T) {
	bin := lastReleaseManager(t)
	const pods, image = 4, "exporter:v3"
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 2)
	set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromInt32(1))
	set.Spec.UpdateStrategy.MinReadySeconds = new(int32(1))
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = new(int32(20))
	f.CreateSet(set)
	f.CreatePods(pods, nil, nil)
	f.WaitComplete(pods)
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	f.WaitStatus("Complete on exporter:v2", func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Complete(pods)(s) && fixture.CountImage(f.Pods(), "exporter:v2") == pods
	})

	// Released: the set's releasedBefore passes p01's write, which it
	// writes into p01's record once p01 is down, for the last release to
	// read.
	f.WaitSetFor(3*time.Minute, "releasedBefore past p01's write", func(s *v1alpha1.SidecarSet) bool {
		state, _ := revision.Decode(f.Pod("p01").Annotations)
		w := state[f.Set].Write
		return w == nil || s.Status.ReleasedBefore != nil && w.At != nil && w.At.Before(s.Status.ReleasedBefore)
	})
	down := f.Pod("p01")
	for i := range down.Spec.Containers {
		if down.Spec.Containers[i].Name == fixture.AppContainer {
			down.Spec.Containers[i].Image = "mysql-never-ready:8.4"
		}
	}
	if err := f.Client.Update(t.Context(), down); err != nil {
		t.Fatal(err)
	}
	f.WaitPods("p01 not Ready, its record written released", func(ps []corev1.Pod) bool {
		state, _ := revision.Decode(ps[0].Annotations)
		return !fixture.PodReady(&ps[0]) && state[f.Set].Write == nil && state[f.Set].Released != nil
	})

	cluster.ManagerProcessOf(t, bin, "--shutdown-drain=0s")
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = image })
	got := f.WaitSet("every pod on "+image+", or the rollout paused", func(s *v1alpha1.SidecarSet) bool {
		ps := f.Pods()
		return s.Spec.UpdateStrategy.Paused || (fixture.CountImage(ps, image) == pods &&
			fixture.PodReady(&ps[1]) && fixture.PodReady(&ps[2]) && fixture.PodReady(&ps[3]))
	})
	if got.Spec.UpdateStrategy.Paused {
		why := ""
		if c := fixture.SetCondition(got.Status, v1alpha1.ConditionStalled); c != nil {
			why = c.Message
		}
		t.Errorf("the last release's rollout stalled and paused itself (%s): the pod down for reasons of its own held its slot\n%s",
			why, f.Describe())
		for _, p := range f.Pods() {
			t.Logf("%s: %s", p.Name, p.Annotations[v1alpha1.AnnotationState])
		}
	}
}
