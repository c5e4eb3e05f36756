package faults

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/manager"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

// managerProcess replaces the cluster's manager with the manager's binary
// as a child process the test may kill, without leader election: one
// process runs at a time, and a killed one's Lease would hold its
// successor back 15s (TestHAFailover measures that handover). When the test
// ends the process is stopped, its output printed if the test failed, and
// the cluster's manager starts again.
func managerProcess(t *testing.T) *testenv.ManagerProcess {
	t.Helper()
	bin, err := testenv.ManagerBinary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Stack.StopManager(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stack.StartManager(); err != nil {
			t.Errorf("start the cluster's manager again: %v", err)
		}
	})
	logs := &fixture.Logs{}
	p, err := cluster.Env.NewManagerProcess(testenv.ProcessOptions{
		Binary:    bin,
		Namespace: manager.DefaultOptions().Namespace,
		Output:    logs,
		Args:      []string{"--leader-elect=false"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("manager processes' output:\n%s", logs.String())
		}
	})
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return p
}

// killPoints draws n distinct counts of written pods in (0, total), none
// on a step's end (where the rollout waits for the test, not the
// manager), in increasing order.
func killPoints(r *rand.Rand, n, total int, ends []int) []int {
	var points []int
	for len(points) < n {
		p := 1 + r.IntN(total-1)
		if !slices.Contains(points, p) && !slices.Contains(ends, p) {
			points = append(points, p)
		}
	}
	slices.Sort(points)
	return points
}

// TestManagerKilled: a 500-pod rollout, maxUnavailable 10%, walked down
// in partition steps 400 → 200 → 0, while the manager is killed with
// SIGKILL (the OOM killer, a crash) at 20 random points, each when a drawn
// number of pods has been written, and started again after a random
// downtime. After every restart the rollout goes on from where the pods
// and the set's status say it is: in the end every pod took the new
// revision exactly once (one spec change, one exporter restart, the
// records naming the old revision then the new one), none went past the
// partition in force and never more than 50 pods were not Ready at once,
// at any moment the pod watch saw; no app container restarted.
//
// The progress deadline lives in status.lastProgressTime, so a restart
// must not move it. A second set, over three pods, is stuck the whole
// time (its new image never gets ready) with progressDeadlineSeconds 60,
// and the same manager processes reconcile it: its lastProgressTime must
// stay what it was before the first kill, and it must stall 60s after
// that, though the manager was restarted within those 60s.
func TestManagerKilled(t *testing.T) {
	const (
		pods, kills    = 500, 20
		maxUnavailable = pods / 10
		deadline       = 60 * time.Second
	)
	steps := []int{400, 200, 0}
	ends := []int{pods - steps[0], pods - steps[1]}
	r := newRand(t)
	points := killPoints(r, kills, pods, ends)
	t.Logf("kill points (pods written): %v", points)

	p := managerProcess(t)
	f := fixture.New(t, cluster)
	set := f.SidecarSet("exporter:v1", 1)
	set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromString("10%"))
	f.CreateSet(set)
	began := time.Now()
	createPods(f, pods)
	f.WaitStatusFor(3*time.Minute, "all matched, ready and complete", fixture.Complete(pods))
	t.Logf("%d pods created, injected and ready in %v", pods, time.Since(began).Round(time.Second))
	before := f.Pods()
	apps := fixture.AppIDs(before)
	generations := map[string]int64{}
	for _, p := range before {
		generations[p.Name] = p.Generation
	}

	stuck := stuckRollout(t, deadline)

	log := watchPods(t, f, "exporter:v2")
	var killedAt []time.Time
	crashes := 0
	rolled := time.Now()
	prev := 0
	for i, partition := range steps {
		allowed := pods - partition
		log.allow(allowed)
		f.UpdateSet(func(s *v1alpha1.SidecarSet) {
			s.Spec.Containers[0].Image = "exporter:v2"
			s.Spec.UpdateStrategy.Partition = new(intstr.FromInt32(int32(partition)))
		})
		for _, at := range points {
			if at <= prev || at >= allowed {
				continue
			}
			waitWritten(t, f, log, at)
			// Anywhere in the reconcile that wrote that pod, or the next.
			time.Sleep(time.Duration(r.IntN(300)) * time.Millisecond)
			select {
			case <-p.Endpoint("").Exited:
				crashes++
				t.Errorf("the manager process had exited before kill %d", len(killedAt)+1)
			default:
			}
			if err := p.Kill(); err != nil {
				t.Fatal(err)
			}
			killedAt = append(killedAt, time.Now())
			// Down as long as a restart takes on a node, or less.
			time.Sleep(time.Duration(r.IntN(2000)) * time.Millisecond)
			if err := p.Start(t.Context()); err != nil {
				t.Fatalf("restart %d: %v", len(killedAt), err)
			}
		}
		prev = allowed
		f.WaitStatusFor(3*time.Minute, fmt.Sprintf("step %d complete", i+1), func(s v1alpha1.SidecarSetStatus) bool {
			return fixture.Condition(s, v1alpha1.ConditionComplete) == metav1.ConditionTrue && s.UpdatedReadyPods == int32(allowed)
		})
		t.Logf("partition %d: %d pods updated and ready, %d kills so far, %v into the rollout",
			partition, allowed, len(killedAt), time.Since(rolled).Round(time.Second))
	}
	took := time.Since(rolled)
	log.stop(t)
	select {
	case <-p.Endpoint("").Exited:
		crashes++
		t.Error("the manager process had exited when the rollout ended")
	default:
	}

	if len(killedAt) != kills {
		t.Errorf("%d kills, want %d", len(killedAt), kills)
	}
	if log.maxNotReady > maxUnavailable {
		t.Errorf("%d pods not Ready at once, more than maxUnavailable 10%% (%d)", log.maxNotReady, maxUnavailable)
	}
	if log.overPartition > 0 {
		t.Errorf("%d pods written beyond the partition in force at one moment", log.overPartition)
	}
	log.assertOnce(t, "exporter:v1", generations)
	for _, p := range f.Pods() {
		if img := fixture.Image(&p, "exporter"); img != "exporter:v2" || !fixture.PodReady(&p) {
			t.Errorf("pod %s: exporter %s, ready %v; want exporter:v2, ready", p.Name, img, fixture.PodReady(&p))
		}
		if n := fixture.ContainerStatus(&p, "exporter").RestartCount; n != 1 {
			t.Errorf("pod %s: exporter restarted %d times, want once", p.Name, n)
		}
	}
	f.AssertAppsUntouched(apps)
	stuck.check(t, killedAt)
	t.Logf("faults: %d SIGKILLs survived, %d crashes, rollout of %d pods in %v, %d pod versions watched, at most %d pods not Ready at once (maxUnavailable %d)",
		len(killedAt), crashes, pods, took.Round(time.Second), log.events, log.maxNotReady, maxUnavailable)
	if !t.Failed() {
		results.add(map[string]any{"faults_kills_survived": len(killedAt)},
			"## Manager killed (TestManagerKilled)",
			"",
			fmt.Sprintf("- SIGKILLs survived: %d of %d, manager crashes: %d", len(killedAt), kills, crashes),
			fmt.Sprintf("- rollout of %d pods, partition 400 → 200 → 0, maxUnavailable 10%% (%d): %v", pods, maxUnavailable, took.Round(time.Second)),
			fmt.Sprintf("- at most %d pods not Ready at once, 0 beyond the partition, over %d pod versions watched", log.maxNotReady, log.events),
			"- every pod written once, its exporter restarted once, no app container restarted",
			fmt.Sprintf("- stuck set (progressDeadlineSeconds %d): stalled %v after its last progress, with %d kills in between",
				int(deadline/time.Second), stuck.stalledAfter.Round(time.Second), stuck.killsBefore(killedAt)),
		)
	}
}

// waitWritten waits until n pods carry the rollout's image.
func waitWritten(t *testing.T, f *fixture.F, log *podLog, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for log.writtenPods() < n {
		select {
		case <-log.done:
			t.Fatalf("wait for %d pods written: the pod watch ended at %d: %v", n, log.writtenPods(), log.problem)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("wait for %d pods written: %d after 2m\n%s", n, log.writtenPods(), f.Describe())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stuck is a rollout that cannot progress: its clock runs from one
// lastProgressTime, whatever happens to the manager.
type stuck struct {
	f *fixture.F
	// since is its lastProgressTime before the first kill.
	since        time.Time
	deadline     time.Duration
	stalledAfter time.Duration
}

// stuckRollout starts a rollout over three pods whose new image never gets
// ready, with progressDeadlineSeconds deadline, and returns once its first
// pod is written and its lastProgressTime has settled.
func stuckRollout(t *testing.T, deadline time.Duration) *stuck {
	t.Helper()
	f := fixture.New(t, cluster)
	set := f.SidecarSet("exporter:v1", 1)
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = new(int32(deadline / time.Second))
	f.CreateSet(set)
	for i := 1; i <= 3; i++ {
		f.CreatePod(f.NewPod("s" + string(rune('0'+i))))
	}
	f.WaitStatus("the stuck set's pods complete", fixture.Complete(3))
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter-never-ready:v2" })
	f.WaitStatus("one pod written", func(s v1alpha1.SidecarSetStatus) bool {
		return s.UpdatedPods == 1 && s.LastProgressTime != nil
	})
	// The write and the status that counts it are two progress marks; the
	// second may come a reconcile later.
	time.Sleep(2 * time.Second)
	st := f.GetSet().Status
	if st.LastProgressTime == nil || st.UpdatedPods != 1 {
		t.Fatalf("stuck set: status %+v, want one pod updated and a lastProgressTime", st)
	}
	return &stuck{f: f, since: st.LastProgressTime.Time, deadline: deadline}
}

// check waits for the stuck set to stall and fails unless it did so at
// its deadline from the lastProgressTime it had before the kills, with
// kills before that.
func (s *stuck) check(t *testing.T, killedAt []time.Time) {
	t.Helper()
	var moved []time.Time
	set := s.f.WaitSetFor(2*s.deadline, "the stuck set stalled", func(set *v1alpha1.SidecarSet) bool {
		if p := set.Status.LastProgressTime; p != nil && !p.Time.Equal(s.since) && !slices.Contains(moved, p.Time) {
			moved = append(moved, p.Time)
		}
		return fixture.Condition(set.Status, v1alpha1.ConditionStalled) == metav1.ConditionTrue
	})
	if len(moved) > 0 {
		t.Errorf("stuck set: lastProgressTime moved from %v to %v with no progress", s.since, moved)
	}
	c := fixture.SetCondition(set.Status, v1alpha1.ConditionStalled)
	s.stalledAfter = c.LastTransitionTime.Sub(s.since)
	// Transition times are in seconds; a kill right at the deadline holds
	// the stall back by a restart.
	if s.stalledAfter < s.deadline-time.Second || s.stalledAfter > s.deadline+20*time.Second {
		t.Errorf("stuck set stalled %v after its last progress, want its deadline %v (+20s for a restart)", s.stalledAfter, s.deadline)
	}
	if n := s.killsBefore(killedAt); n < 3 {
		t.Errorf("only %d kills fell within the stuck set's deadline: the test did not show that restarts keep its clock", n)
	}
	t.Logf("stuck set: stalled %v after its last progress (deadline %v), %d manager kills in between",
		s.stalledAfter.Round(time.Second), s.deadline, s.killsBefore(killedAt))
}

// killsBefore counts the kills between the stuck set's last progress and
// its deadline.
func (s *stuck) killsBefore(killedAt []time.Time) int {
	n := 0
	for _, k := range killedAt {
		if k.After(s.since) && k.Before(s.since.Add(s.deadline)) {
			n++
		}
	}
	return n
}
