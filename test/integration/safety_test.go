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
)

// watchNotReady keeps the largest number of the fixture's pods seen at once
// that are not Ready. The tests using it start from all pods Ready, so it
// counts the pods a rollout disrupted.
func (f *fixture) watchNotReady() *watcher {
	return f.watchMax(func(pods []corev1.Pod) int {
		n := 0
		for _, p := range pods {
			if !podReady(&p) {
				n++
			}
		}
		return n
	})
}

// watchStatusAgainstPods keeps the largest value of count seen over the
// set's status and the pods, the pods read after the status: what the
// status says, the pods had done by then.
func (f *fixture) watchStatusAgainstPods(count func(v1alpha1.SidecarSetStatus, []corev1.Pod) int) *watcher {
	ctx, cancel := context.WithCancel(f.t.Context())
	w := &watcher{stop: cancel, stopped: make(chan struct{})}
	go func() {
		defer close(w.stopped)
		for ctx.Err() == nil {
			set := &v1alpha1.SidecarSet{}
			var list corev1.PodList
			if env.Client.Get(ctx, client.ObjectKey{Name: f.set}, set) == nil &&
				env.Client.List(ctx, &list, client.InNamespace(f.ns)) == nil {
				n := count(set.Status, list.Items)
				w.mu.Lock()
				w.max = max(w.max, n)
				w.mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return w
}

// rollOut declares image for the exporter, waits until every one of pods
// runs it and the set is complete, and checks that no more than
// maxNotReady pods were not ready at once (limit names what allows them).
func (f *fixture) rollOut(image string, pods int32, maxNotReady int, limit string) {
	f.t.Helper()
	w := f.watchNotReady()
	f.updateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = image })
	f.waitStatus("complete on "+image, func(s v1alpha1.SidecarSetStatus) bool {
		return complete(pods)(s) && countImage(f.pods(), image) == int(pods)
	})
	if got := w.Max(); got > maxNotReady {
		f.t.Errorf("%d pods not ready at once, more than %s\n%s", got, limit, f.describe())
	}
}

// createBudget creates a PodDisruptionBudget over selector that allows one
// disruption of its pods, and waits until the disruption controller says
// so.
func (f *fixture) createBudget(name string, selector *metav1.LabelSelector, pods int32) {
	f.t.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			// An integer minAvailable: maxUnavailable and percentages need
			// the pods' controllers to know the expected count.
			MinAvailable: new(intstr.FromInt32(pods - 1)),
			Selector:     selector,
		},
	}
	if err := env.Client.Create(f.t.Context(), pdb); err != nil {
		f.t.Fatal(err)
	}
	f.waitBudget(pdb, pods, 1)
}

// startComplete creates set and pods matching it, and waits until the set
// says Complete with every pod updated and ready.
func (f *fixture) startComplete(set *v1alpha1.SidecarSet, pods int32) v1alpha1.SidecarSetStatus {
	f.t.Helper()
	f.createSet(set)
	f.createPods(int(pods), nil, nil)
	return f.waitStatus("all matched, ready and complete", complete(pods))
}

// complete reports whether the status says Complete with every matched pod
// updated and ready.
func complete(pods int32) func(v1alpha1.SidecarSetStatus) bool {
	return func(s v1alpha1.SidecarSetStatus) bool {
		return condition(s, v1alpha1.ConditionComplete) == metav1.ConditionTrue &&
			s.MatchedPods == pods && s.UpdatedReadyPods == pods
	}
}

// TestOrdinaryInitContainer: an ordinary init container exits 0 once the pod
// started and never runs again. It takes no part in completion or
// readiness, so maxUnavailable still holds for the running sidecars, and a
// new image of it reaches new pods only, which the status says.
func TestOrdinaryInitContainer(t *testing.T) {
	const pods = 4
	f := newFixture(t)
	set := f.sidecarSet("exporter:v1", 1)
	set.Spec.InitContainers = []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: "schema", Image: "schema:v1"}}}
	f.startComplete(set, pods)
	before := appIDs(f.pods())

	f.rollOut("exporter:v2", pods, 1, "maxUnavailable 1")

	f.updateSet(func(s *v1alpha1.SidecarSet) { s.Spec.InitContainers[0].Image = "schema:v2" })
	st := f.waitStatus("complete on the new init image", complete(pods))
	if c := setCondition(st, v1alpha1.ConditionComplete); !strings.Contains(c.Message, "reaches new pods only") {
		t.Errorf("Complete message %q does not say the init image reaches new pods only", c.Message)
	}
	for _, p := range f.pods() {
		if got := p.Spec.InitContainers[0].Image; got != "schema:v1" {
			t.Errorf("pod %s: init container image %s written in place, want schema:v1 as it ran", p.Name, got)
		}
	}
	f.createPod(f.newPod("p99"))
	f.waitReady(pods + 1)
	if got := f.pod("p99").Spec.InitContainers[0].Image; got != "schema:v2" {
		t.Errorf("new pod p99: init container image %s, want schema:v2", got)
	}
	f.assertAppsUntouched(before)
}

// TestDigestPin: pinning the running tag to its own digest is an image
// change the kubelet restarts the container for, though the running
// container already shows that digest. The rollout must wait for each
// restart: with maxUnavailable 1, one pod at a time.
func TestDigestPin(t *testing.T) {
	const pods = 4
	f := newFixture(t)
	f.startComplete(f.sidecarSet("exporter:v1", 1), pods)
	before := appIDs(f.pods())

	id := containerStatus(f.pod("p01"), "exporter").ImageID
	pinned := "exporter@" + id[strings.LastIndex(id, "@")+1:]
	w := f.watchNotReady()
	// The status never counts more pods updated and ready than have
	// really restarted their exporter and are ready again.
	old := f.getSet().Status.LatestRevision
	overcount := f.watchStatusAgainstPods(func(st v1alpha1.SidecarSetStatus, ps []corev1.Pod) int {
		if st.LatestRevision == old {
			// Not judged against the pinned revision yet.
			return 0
		}
		done := 0
		for _, p := range ps {
			if containerStatus(&p, "exporter").RestartCount > 0 && podReady(&p) {
				done++
			}
		}
		return int(st.UpdatedReadyPods) - done
	})
	f.updateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = pinned })
	f.waitStatus("complete on the pinned image", func(s v1alpha1.SidecarSetStatus) bool {
		return complete(pods)(s) && countImage(f.pods(), pinned) == pods
	})
	if got := w.Max(); got > 1 {
		t.Errorf("%d pods not ready at once, more than maxUnavailable 1\n%s", got, f.describe())
	}
	if got := overcount.Max(); got > 0 {
		t.Errorf("status counted %d pod(s) updated and ready before their exporter restarted", got)
	}
	for name, n := range restarts(f.pods(), "exporter") {
		if n != 1 {
			t.Errorf("pod %s: exporter restarted %d times, want 1", name, n)
		}
	}
	f.assertAppsUntouched(before)
}

// TestUndoAfterFailedPull: an image that never pulls stalls at one pod;
// declaring the previous image again (rollout undo) writes back the image
// whose imageID was recorded before. The pod's new container of it is the
// swap: the rollout completes, and the next one honours maxUnavailable.
func TestUndoAfterFailedPull(t *testing.T) {
	const pods = 4
	f := newFixture(t)
	f.startComplete(f.sidecarSet("exporter:v1", 1), pods)

	f.updateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter-pull-fails:v2" })
	f.waitPods("the first pod fails to pull", func(ps []corev1.Pod) bool {
		st := containerStatus(&ps[0], "exporter")
		return st.State.Waiting != nil && strings.Contains(st.State.Waiting.Reason, "Image")
	})
	f.updateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v1" })
	f.waitStatus("complete after the undo", complete(pods))

	f.rollOut("exporter:v3", pods, 1, "maxUnavailable 1")
}

// TestNeverReadyPods is the seed's scenario with two of twelve pods whose
// app never gets ready: they go first and hold no maxUnavailable slot,
// neither when written nor afterwards, so the rollout completes one ready
// pod at a time without stalling.
func TestNeverReadyPods(t *testing.T) {
	const pods = 12
	f := newFixture(t)
	set := f.sidecarSet("exporter:v1", 1)
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = new(int32(5))
	f.createSet(set)
	for i, name := range []string{"p01", "p02", "p03", "p04", "p05", "p06", "p07", "p08", "p09", "p10", "p11", "p12"} {
		pod := f.newPod(name)
		if i == 4 || i == 9 {
			pod.Spec.Containers[0].Image = "mysql-never-ready:8.4"
		}
		f.createPod(pod)
	}
	f.waitStatus("all matched, ten ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == pods && s.ReadyPods == pods-2
	})

	f.updateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	st := f.waitStatus("complete with the two never-ready pods reported", func(s v1alpha1.SidecarSetStatus) bool {
		return condition(s, v1alpha1.ConditionComplete) == metav1.ConditionTrue && s.UpdatedPods == pods && s.UpdatedReadyPods == pods-2
	})
	if c := condition(st, v1alpha1.ConditionStalled); c != metav1.ConditionFalse {
		t.Errorf("Stalled %s, want False", c)
	}
	if f.getSet().Spec.UpdateStrategy.Paused {
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
	set := f.sidecarSet("exporter:v1", 1)
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = new(int32(3))
	f.startComplete(set, pods)

	crashing := f.newPod("p04")
	crashing.Spec.Containers[0].Image = "mysql-crashes:8.4"
	f.createPod(crashing)
	// Bound to a node no kubelet serves: it stays Pending.
	pending := f.newPod("p05")
	pending.Spec.NodeName = "no-such-node"
	f.createPod(pending)
	f.waitStatus("both new pods matched", func(s v1alpha1.SidecarSetStatus) bool { return s.MatchedPods == pods+2 })
	// Three times the deadline: a clock that ran would have stalled by now.
	for end := time.Now().Add(9 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		set := f.getSet()
		if c := condition(set.Status, v1alpha1.ConditionStalled); c != metav1.ConditionFalse || set.Spec.UpdateStrategy.Paused {
			t.Fatalf("Stalled %s, paused %v with no rollout under way: %+v", c, set.Spec.UpdateStrategy.Paused, set.Status.Conditions)
		}
	}
	f.updateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	f.waitPods("the ready pods updated", func(ps []corev1.Pod) bool { return countImage(ps[:pods], "exporter:v2") == pods })
}

// TestBudgetSelectsWholeNamespace: a policy/v1 budget with selector {}
// covers every pod of its namespace, and the rollout honours it.
func TestBudgetSelectsWholeNamespace(t *testing.T) {
	const pods = 4
	f := newFixture(t)
	set := f.sidecarSet("exporter:v1", 1)
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
	first := f.sidecarSet("exporter:v1", 1)
	first.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromString("100%"))
	f.createSet(first)
	second := f.sidecarSet("shipper:v1", 1)
	second.Name = f.set + "-logs"
	second.Spec.Containers[0].Name = "shipper"
	second.Spec.Containers[0].ReadinessProbe.TCPSocket.Port = intstr.FromInt32(2020)
	second.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromString("100%"))
	f.startComplete(second, pods)
	f.createBudget("db", &metav1.LabelSelector{MatchLabels: f.labels}, pods)

	w := f.watchNotReady()
	for _, name := range []string{first.Name, second.Name} {
		set := &v1alpha1.SidecarSet{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, set); err != nil {
			t.Fatal(err)
		}
		set.Spec.Containers[0].Image = strings.Replace(set.Spec.Containers[0].Image, ":v1", ":v2", 1)
		if err := env.Client.Update(t.Context(), set); err != nil {
			t.Fatal(err)
		}
	}
	f.waitPods("both sidecars updated and every pod ready", func(ps []corev1.Pod) bool {
		for _, p := range ps {
			if image(&p, "exporter") != "exporter:v2" || image(&p, "shipper") != "shipper:v2" || !podReady(&p) {
				return false
			}
		}
		return len(ps) == pods
	})
	if got := w.Max(); got > 1 {
		t.Errorf("%d pods not ready at once, more than the budget's 1\n%s", got, f.describe())
	}
}

// TestStalledRolloutInjectsCompletedRevision: while a rollout that stalled
// has paused itself, a new pod gets the last revision that completed, not
// the failing one; resumed, new pods get the latest again.
func TestStalledRolloutInjectsCompletedRevision(t *testing.T) {
	const pods = 2
	f := newFixture(t)
	set := f.sidecarSet("exporter:v1", 0)
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = new(int32(2))
	f.startComplete(set, pods)

	f.updateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter-pull-fails:v2" })
	f.waitSet("the rollout paused itself", func(s *v1alpha1.SidecarSet) bool {
		return s.Spec.UpdateStrategy.Paused && condition(s.Status, v1alpha1.ConditionStalled) == metav1.ConditionTrue
	})
	// The webhook reads the set from its cache, a moment behind.
	time.Sleep(500 * time.Millisecond)
	f.createPod(f.newPod("p10"))
	if got := image(f.pod("p10"), "exporter"); got != "exporter:v1" {
		t.Errorf("new pod while stalled got exporter %s, want exporter:v1 of the completed revision", got)
	}
	f.waitPods("p10 ready", func(ps []corev1.Pod) bool {
		for _, p := range ps {
			if p.Name == "p10" {
				return podReady(&p)
			}
		}
		return false
	})

	f.updateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Paused = false })
	// The status of the resumed spec: the manager's cache holds it.
	f.waitStatus("the resumed spec observed", func(v1alpha1.SidecarSetStatus) bool { return true })
	f.createPod(f.newPod("p11"))
	if got := image(f.pod("p11"), "exporter"); got != "exporter-pull-fails:v2" {
		t.Errorf("new pod after resume got exporter %s, want the latest exporter-pull-fails:v2", got)
	}
}

// TestProgressTimeInStatus: the progress deadline runs from the status, so
// a manager restarted more often than progressDeadlineSeconds still stalls.
func TestProgressTimeInStatus(t *testing.T) {
	const pods = 2
	f := newFixture(t)
	set := f.sidecarSet("exporter:v1", 0)
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = new(int32(4))
	st := f.startComplete(set, pods)
	if st.LastProgressTime != nil {
		t.Errorf("lastProgressTime %v with no rollout under way, want none", st.LastProgressTime)
	}

	f.updateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter-pull-fails:v2" })
	st = f.waitStatus("lastProgressTime set", func(s v1alpha1.SidecarSetStatus) bool { return s.LastProgressTime != nil })
	started := st.LastProgressTime.Time
	// Restarts more often than the deadline, for longer than it: a clock
	// kept in memory would start again with each.
	var lastRestart time.Time
	for range 5 {
		time.Sleep(time.Second)
		sys.StopManager()
		if err := sys.StartManager(); err != nil {
			t.Fatalf("start the manager again: %v", err)
		}
		lastRestart = time.Now()
	}
	st = f.waitStatusFor(30*time.Second, "Stalled", func(s v1alpha1.SidecarSetStatus) bool {
		return condition(s, v1alpha1.ConditionStalled) == metav1.ConditionTrue
	})
	stalled := setCondition(st, v1alpha1.ConditionStalled).LastTransitionTime.Time
	if stalled.Before(started.Add(4 * time.Second)) {
		t.Errorf("Stalled at %s, before the deadline from %s", stalled, started)
	}
	if !stalled.Before(lastRestart.Truncate(time.Second)) {
		t.Errorf("Stalled at %s, only after the restarts (the last at %s): the deadline restarted with the manager", stalled, lastRestart)
	}
}
