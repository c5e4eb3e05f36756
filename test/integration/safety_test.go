package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/status"
)

// watchStatusAgainstPods keeps the largest value of count seen over the
// set's status and the pods, the pods read after the status: what the
// status says, the pods had done by then.
func (f *testFixture) watchStatusAgainstPods(count func(v1alpha1.SidecarSetStatus, []corev1.Pod) int) *fixture.Watcher {
	ctx, cancel := context.WithCancel(f.T.Context())
	w := fixture.NewWatcher(cancel)
	go func() {
		defer w.Done()
		for ctx.Err() == nil {
			set := &v1alpha1.SidecarSet{}
			var list corev1.PodList
			if env.Client.Get(ctx, client.ObjectKey{Name: f.Set}, set) == nil &&
				env.Client.List(ctx, &list, client.InNamespace(f.NS)) == nil {
				w.Observe(count(set.Status, list.Items))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return w
}

// rollOut declares image for the exporter, waits until every one of pods
// runs it and the set is complete, and checks that no more than
// maxNotReady pods were not ready at once (limit names what allows them).
func (f *testFixture) rollOut(image string, pods int32, maxNotReady int, limit string) {
	f.T.Helper()
	w := f.WatchNotReady()
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = image })
	f.WaitStatus("complete on "+image, func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Complete(pods)(s) && fixture.CountImage(f.Pods(), image) == int(pods)
	})
	if got := w.Max(); got > maxNotReady {
		f.T.Errorf("%d pods not ready at once, more than %s\n%s", got, limit, f.Describe())
	}
}

// createBudget creates a PodDisruptionBudget over selector that allows one
// disruption of its pods, and waits until the disruption controller says
// so.
func (f *testFixture) createBudget(name string, selector *metav1.LabelSelector, pods int32) {
	f.T.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.NS, Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			// An integer minAvailable: maxUnavailable and percentages need
			// the pods' controllers to know the expected count.
			MinAvailable: new(intstr.FromInt32(pods - 1)),
			Selector:     selector,
		},
	}
	if err := env.Client.Create(f.T.Context(), pdb); err != nil {
		f.T.Fatal(err)
	}
	f.waitBudget(pdb, pods, 1)
}

// startComplete creates set and pods matching it, and waits until the set
// says Complete with every pod updated and ready.
func (f *testFixture) startComplete(set *v1alpha1.SidecarSet, pods int32) v1alpha1.SidecarSetStatus {
	f.T.Helper()
	f.CreateSet(set)
	f.CreatePods(int(pods), nil, nil)
	return f.WaitStatus("all matched, ready and complete", fixture.Complete(pods))
}

// TestOrdinaryInitContainer: an ordinary init container exits 0 once the pod
// started and never runs again. It takes no part in completion or
// readiness, so maxUnavailable still holds for the running sidecars, and a
// new image of it reaches new pods only, which the status says.
func TestOrdinaryInitContainer(t *testing.T) {
	const pods = 4
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 1)
	set.Spec.InitContainers = []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: "schema", Image: "schema:v1"}}}
	f.startComplete(set, pods)
	before := fixture.AppIDs(f.Pods())

	f.rollOut("exporter:v2", pods, 1, "maxUnavailable 1")

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.InitContainers[0].Image = "schema:v2" })
	st := f.WaitStatus("complete on the new init image", fixture.Complete(pods))
	if c := fixture.SetCondition(st, v1alpha1.ConditionComplete); !strings.Contains(c.Message, "reaches new pods only") {
		t.Errorf("Complete message %q does not say the init image reaches new pods only", c.Message)
	}
	for _, p := range f.Pods() {
		if got := p.Spec.InitContainers[0].Image; got != "schema:v1" {
			t.Errorf("pod %s: init container image %s written in place, want schema:v1 as it ran", p.Name, got)
		}
	}
	f.CreatePod(f.NewPod("p99"))
	f.WaitReady(pods + 1)
	if got := f.Pod("p99").Spec.InitContainers[0].Image; got != "schema:v2" {
		t.Errorf("new pod p99: init container image %s, want schema:v2", got)
	}
	f.AssertAppsUntouched(before)
}

// TestDigestPin: pinning the running tag to its own digest is an image
// change the kubelet restarts the container for, though the running
// container already shows that digest. The rollout must wait for each
// restart: with maxUnavailable 1, one pod at a time.
func TestDigestPin(t *testing.T) {
	const pods = 4
	f := newFixture(t)
	f.startComplete(f.SidecarSet("exporter:v1", 1), pods)
	before := fixture.AppIDs(f.Pods())

	digest, err := f.C.Digest("exporter:v1")
	if err != nil {
		t.Fatal(err)
	}
	pinned := "exporter@" + digest
	w := f.WatchNotReady()
	// The status never counts more pods updated and ready than have
	// really restarted their exporter and are ready again.
	old := f.GetSet().Status.LatestRevision
	overcount := f.watchStatusAgainstPods(func(st v1alpha1.SidecarSetStatus, ps []corev1.Pod) int {
		if st.LatestRevision == old {
			// Not judged against the pinned revision yet.
			return 0
		}
		done := 0
		for _, p := range ps {
			if fixture.ContainerStatus(&p, "exporter").RestartCount > 0 && fixture.PodReady(&p) {
				done++
			}
		}
		return int(st.UpdatedReadyPods) - done
	})
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = pinned })
	f.WaitStatus("complete on the pinned image", func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Complete(pods)(s) && fixture.CountImage(f.Pods(), pinned) == pods
	})
	if got := w.Max(); got > 1 {
		t.Errorf("%d pods not ready at once, more than maxUnavailable 1\n%s", got, f.Describe())
	}
	if got := overcount.Max(); got > 0 {
		t.Errorf("status counted %d pod(s) updated and ready before their exporter restarted", got)
	}
	for name, n := range fixture.Restarts(f.Pods(), "exporter") {
		if n != 1 {
			t.Errorf("pod %s: exporter restarted %d times, want 1", name, n)
		}
	}
	f.AssertAppsUntouched(before)
}

// TestUndoAfterFailedPull: an image that never pulls stalls at one pod;
// declaring the previous image again (rollout undo) writes back the image
// whose imageID was recorded before. The pod's new container of it is the
// swap: the rollout completes, and the next one honours maxUnavailable.
func TestUndoAfterFailedPull(t *testing.T) {
	const pods = 4
	f := newFixture(t)
	f.startComplete(f.SidecarSet("exporter:v1", 1), pods)

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter-pull-fails:v2" })
	f.WaitPods("the first pod fails to pull", func(ps []corev1.Pod) bool {
		st := fixture.ContainerStatus(&ps[0], "exporter")
		return st.State.Waiting != nil && strings.Contains(st.State.Waiting.Reason, "Image")
	})
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v1" })
	f.WaitStatus("complete after the undo", fixture.Complete(pods))

	f.rollOut("exporter:v3", pods, 1, "maxUnavailable 1")
}

// TestNeverReadyPods is the seed's scenario with two of twelve pods whose
// app never gets ready: they go first and hold no maxUnavailable slot,
// neither when written nor afterwards, so the rollout moves one ready pod at
// a time without stalling. It ends not Complete but PodsNotReady, naming
// them: they are not waited on, and not called ready either.
func TestNeverReadyPods(t *testing.T) {
	const pods = 12
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 1)
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = deadline(5)
	f.CreateSet(set)
	for i, name := range []string{"p01", "p02", "p03", "p04", "p05", "p06", "p07", "p08", "p09", "p10", "p11", "p12"} {
		pod := f.NewPod(name)
		if i == 4 || i == 9 {
			pod.Spec.Containers[0].Image = "mysql-never-ready:8.4"
			pod.Spec.Containers[0].ReadinessProbe = f.SidecarSet("", 1).Spec.Containers[0].ReadinessProbe
		}
		f.CreatePod(pod)
	}
	f.WaitStatus("all matched, ten ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == pods && s.ReadyPods == pods-2
	})

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	st := f.WaitStatus("done but for the two never-ready pods, reported", func(s v1alpha1.SidecarSetStatus) bool {
		c := fixture.SetCondition(s, v1alpha1.ConditionComplete)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == status.ReasonPodsNotReady &&
			s.UpdatedPods == pods && s.UpdatedReadyPods == pods-2
	})
	if c := fixture.Condition(st, v1alpha1.ConditionProgressing); c != metav1.ConditionFalse {
		t.Errorf("Progressing %s with nothing left to do, want False", c)
	}
	if msg := fixture.SetCondition(st, v1alpha1.ConditionComplete).Message; !strings.Contains(msg, "2 updated but not ready") {
		t.Errorf("Complete's message %q does not count the 2 pods not ready", msg)
	}
	if c := fixture.Condition(st, v1alpha1.ConditionStalled); c != metav1.ConditionFalse {
		t.Errorf("Stalled %s, want False", c)
	}
	if f.GetSet().Spec.UpdateStrategy.Paused {
		t.Errorf("the rollout paused itself though it completed")
	}
}

// TestNoStallOutsideRollout: a complete set is not waiting on anything, so
// a new pod whose app crash-loops (or stays Pending) is reported, and no
// progress deadline runs: no Stalled, no pause, and the next image bump
// rolls out.
func TestNoStallOutsideRollout(t *testing.T) {
	const pods = 3
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 1)
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = new(int32(3))
	f.startComplete(set, pods)

	crashing := f.NewPod("p04")
	crashing.Spec.Containers[0].Image = "mysql-crashes:8.4"
	f.CreatePod(crashing)
	// Bound to a node no kubelet serves: it stays Pending.
	pending := f.NewPod("p05")
	pending.Spec.NodeName = "no-such-node"
	f.CreatePod(pending)
	f.WaitStatus("both new pods matched", func(s v1alpha1.SidecarSetStatus) bool { return s.MatchedPods == pods+2 })
	// Three times the deadline: a clock that ran would have stalled by now.
	for end := time.Now().Add(9 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		set := f.GetSet()
		if c := fixture.Condition(set.Status, v1alpha1.ConditionStalled); c != metav1.ConditionFalse || set.Spec.UpdateStrategy.Paused {
			t.Fatalf("Stalled %s, paused %v with no rollout under way: %+v", c, set.Spec.UpdateStrategy.Paused, set.Status.Conditions)
		}
	}
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	f.WaitPods("the ready pods updated", func(ps []corev1.Pod) bool { return fixture.CountImage(ps[:pods], "exporter:v2") == pods })
}

// TestBudgetSelectsWholeNamespace: a policy/v1 budget with selector {}
// covers every pod of its namespace, and the rollout honours it.
func TestBudgetSelectsWholeNamespace(t *testing.T) {
	const pods = 4
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 1)
	set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromString("100%"))
	f.startComplete(set, pods)
	f.createBudget("everything", &metav1.LabelSelector{}, pods)

	f.rollOut("exporter:v2", pods, 1, "the budget's 1")
}

// TestBudgetSharedBySets: two SidecarSets on the same pods, bumped at once,
// share one budget that allows one disruption: each counting only its own
// pods would let both take it.
func TestBudgetSharedBySets(t *testing.T) {
	const pods = 4
	f := newFixture(t)
	first := f.SidecarSet("exporter:v1", 1)
	first.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromString("100%"))
	f.CreateSet(first)
	second := f.SidecarSet("shipper:v1", 1)
	second.Name = f.Set + "-logs"
	second.Spec.Containers[0].Name = "shipper"
	second.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromString("100%"))
	f.startComplete(second, pods)
	f.createBudget("db", &metav1.LabelSelector{MatchLabels: f.Labels}, pods)

	w := f.WatchNotReady()
	for _, name := range []string{first.Name, second.Name} {
		f.UpdateNamedSet(name, func(set *v1alpha1.SidecarSet) {
			set.Spec.Containers[0].Image = strings.Replace(set.Spec.Containers[0].Image, ":v1", ":v2", 1)
		})
	}
	f.WaitPods("both sidecars updated and every pod ready", func(ps []corev1.Pod) bool {
		for _, p := range ps {
			if fixture.Image(&p, "exporter") != "exporter:v2" || fixture.Image(&p, "shipper") != "shipper:v2" || !fixture.PodReady(&p) {
				return false
			}
		}
		return len(ps) == pods
	})
	if got := w.Max(); got > 1 {
		t.Errorf("%d pods not ready at once, more than the budget's 1\n%s", got, f.Describe())
	}
}

// TestStalledRolloutInjectsCompletedRevision: while a rollout that stalled
// has paused itself, a new pod gets the last revision that completed, not
// the failing one; resumed, new pods get the latest again.
func TestStalledRolloutInjectsCompletedRevision(t *testing.T) {
	const pods = 2
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 0)
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = new(int32(2))
	f.startComplete(set, pods)

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter-pull-fails:v2" })
	f.WaitSet("the rollout paused itself", func(s *v1alpha1.SidecarSet) bool {
		return s.Spec.UpdateStrategy.Paused && fixture.Condition(s.Status, v1alpha1.ConditionStalled) == metav1.ConditionTrue
	})
	// The webhook reads the set from its cache, a moment behind.
	time.Sleep(500 * time.Millisecond)
	f.CreatePod(f.NewPod("p10"))
	if got := fixture.Image(f.Pod("p10"), "exporter"); got != "exporter:v1" {
		t.Errorf("new pod while stalled got exporter %s, want exporter:v1 of the completed revision", got)
	}
	f.WaitPods("p10 ready", func(ps []corev1.Pod) bool {
		for _, p := range ps {
			if p.Name == "p10" {
				return fixture.PodReady(&p)
			}
		}
		return false
	})

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Paused = false })
	// The status of the resumed spec: the manager's cache holds it.
	f.WaitStatus("the resumed spec observed", func(v1alpha1.SidecarSetStatus) bool { return true })
	f.CreatePod(f.NewPod("p11"))
	if got := fixture.Image(f.Pod("p11"), "exporter"); got != "exporter-pull-fails:v2" {
		t.Errorf("new pod after resume got exporter %s, want the latest exporter-pull-fails:v2", got)
	}
}

// TestProgressTimeInStatus: the progress deadline runs from the status, so
// a manager restarted more often than progressDeadlineSeconds still stalls.
func TestProgressTimeInStatus(t *testing.T) {
	const pods = 2
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 0)
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = new(int32(4))
	st := f.startComplete(set, pods)
	if st.LastProgressTime != nil {
		t.Errorf("lastProgressTime %v with no rollout under way, want none", st.LastProgressTime)
	}

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter-pull-fails:v2" })
	st = f.WaitStatus("lastProgressTime set", func(s v1alpha1.SidecarSetStatus) bool { return s.LastProgressTime != nil })
	started := st.LastProgressTime.Time
	// Restarts more often than the deadline, for longer than it: a clock
	// kept in memory would start again with each.
	var lastRestart time.Time
	for range 5 {
		time.Sleep(time.Second)
		if err := sys.StopManager(); err != nil {
			t.Fatal(err)
		}
		if err := sys.StartManager(); err != nil {
			t.Fatalf("start the manager again: %v", err)
		}
		lastRestart = time.Now()
	}
	st = f.WaitStatusFor(30*time.Second, "Stalled", func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Condition(s, v1alpha1.ConditionStalled) == metav1.ConditionTrue
	})
	stalled := fixture.SetCondition(st, v1alpha1.ConditionStalled).LastTransitionTime.Time
	if stalled.Before(started.Add(4 * time.Second)) {
		t.Errorf("Stalled at %s, before the deadline from %s", stalled, started)
	}
	if !stalled.Before(lastRestart.Truncate(time.Second)) {
		t.Errorf("Stalled at %s, only after the restarts (the last at %s): the deadline restarted with the manager", stalled, lastRestart)
	}
}
