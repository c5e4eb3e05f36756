//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

// TestMain sends the control-plane client's logs to stderr (errors only,
// see testenv.SetLogger) and, once every test is done, removes the manager
// binary that tests running it as a process built
// (fixture.Cluster.ManagerProcess).
func TestMain(m *testing.M) {
	testenv.SetLogger()
	code := m.Run()
	if err := testenv.RemoveManagerBinary(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// TestManagerKilled: the manager's binary, run as a process, is killed
// with SIGKILL three times during a rollout over six pods on the real node
// (partition 2, maxUnavailable 1): right after the first pod was written,
// while the second pod's exporter is restarting, and right after the third
// was written, before the last due pod. Each time a new process starts; it
// knows from the pods alone what was done. The rollout completes with
// exactly the four due pods updated, each written once (one spec change,
// and its record never names another container as the one the write
// replaces) and its exporter restarted once onto the new image, the two
// pods the partition keeps untouched, no app container restarted and never
// more than one pod down.
//
// A killed process cannot give its Lease up: the next one leads once the
// Lease has expired, 15s after the last renewal (controller-runtime's
// default, which the binary keeps; it has no flag for it), and the next
// process tries every 2s. Measured on 2 cores: the next process answers
// /readyz 0.4-0.6s after the kill and leads 15-19.5s after it; the whole
// test takes 80-90s (110-125s under -race), the rollout about 55s of it.
func TestManagerKilled(t *testing.T) {
	const (
		pods   = 6
		target = 4
		v1, v2 = "exporter:v1", "exporter:v2"
	)
	began := time.Now()
	c, err := fixture.StartReal(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if path, err := c.SaveLogs(); err != nil {
				t.Error(err)
			} else {
				t.Logf("control plane and node logs: %s", path)
			}
		}
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		t.Logf("whole test: %v", time.Since(began).Round(time.Millisecond))
	})
	f := fixture.New(t, c)
	mgr := c.ManagerProcess(t)

	// The exporter turns ready 2s after it starts: a restart is visible
	// from outside long enough to kill the manager during it.
	set := f.SidecarSet(v1, 2)
	set.Spec.UpdateStrategy.Partition = new(intstr.FromInt32(pods - target))
	set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromInt32(1))
	f.CreateSet(set)
	f.CreatePods(pods, nil, nil)
	f.WaitStatus("all matched and ready", fixture.Complete(pods))
	before := f.Pods()
	apps := fixture.AppIDs(before)

	w := f.WatchNotReady()
	records := watchRecords(t, c, f.NS, f.Set)
	rolled := time.Now()
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = v2 })

	// kill waits for the moment when holds, kills the manager there, and
	// starts the next process.
	kill := func(moment string, when func([]corev1.Pod) bool) {
		t.Helper()
		f.WaitPods(moment, when)
		pid := mgr.Pid()
		seen := f.Describe()
		if err := mgr.Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		if err := mgr.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		ready := time.Since(killed)
		if err := mgr.WaitLeading(t.Context(), fixture.LeadTimeout); err != nil {
			t.Fatal(err)
		}
		t.Logf("killed manager process %d %s; the next one ready %v and leading %v after the kill; the pods when killed:\n%s",
			pid, moment, ready.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond), seen)
	}
	kill("right after the first pod was written", func(ps []corev1.Pod) bool {
		return fixture.CountImage(ps, v2) >= 1
	})
	kill("while the second pod's exporter restarts", func(ps []corev1.Pod) bool {
		return fixture.CountImage(ps, v2) == 2 && restarting(ps, v2) != ""
	})
	kill("right after the third pod was written", func(ps []corev1.Pod) bool {
		return fixture.CountImage(ps, v2) >= 3
	})

	st := f.WaitComplete(target)
	t.Logf("rollout complete %v after the new image was declared", time.Since(rolled).Round(time.Millisecond))
	if got := w.Max(); got > 1 {
		t.Errorf("%d pods not ready at once, more than maxUnavailable 1", got)
	}
	if st.MatchedPods != pods || st.UpdatedPods != target || st.ReadyPods != pods {
		t.Errorf("status matched %d, updated %d, ready %d; want %d, %d, %d", st.MatchedPods, st.UpdatedPods, st.ReadyPods, pods, target, pods)
	}

	replaced := records()
	after := f.Pods()
	if n := fixture.CountImage(after, v2); n != target {
		t.Errorf("%d pods updated, want %d (partition %d of %d)\n%s", n, target, pods-target, pods, f.Describe())
	}
	v1ID, err := c.ImageID(v1)
	if err != nil {
		t.Fatal(err)
	}
	v2ID, err := c.ImageID(v2)
	if err != nil {
		t.Fatal(err)
	}
	steps := f.SetEventPods(controller.ReasonRolloutStep)
	for i, p := range after {
		was := fixture.ContainerStatus(&before[i], "exporter")
		now := fixture.ContainerStatus(&p, "exporter")
		if p.UID != before[i].UID {
			t.Errorf("pod %s was replaced: UID %s → %s", p.Name, before[i].UID, p.UID)
		}
		wantRestarts, wantID, wantVersion, wantEvents := int32(1), v2ID, "v2", 1
		if fixture.Image(&p, "exporter") == v2 {
			// Written once: the spec changed once, and every version of
			// the pod's record named the container that ran before the
			// rollout as the one the write replaces. A second write after
			// the kubelet had acted on the first would name the new one.
			if p.Generation != before[i].Generation+1 {
				t.Errorf("pod %s: generation %d → %d, want one spec change", p.Name, before[i].Generation, p.Generation)
			}
			if diff := cmp.Diff([]string{was.ContainerID}, replaced[p.Name]); diff != "" {
				t.Errorf("pod %s: the containers its records said a write replaces (-want +got):\n%s", p.Name, diff)
			}
		} else {
			// Kept by the partition: the same container as before.
			wantRestarts, wantID, wantVersion, wantEvents = 0, v1ID, "v1", 0
			if now.ContainerID != was.ContainerID || p.Generation != before[i].Generation {
				t.Errorf("pod %s, kept by the partition: exporter container %s → %s, generation %d → %d",
					p.Name, was.ContainerID, now.ContainerID, before[i].Generation, p.Generation)
			}
		}
		if now.RestartCount != wantRestarts || now.ImageID != wantID || !now.Ready {
			t.Errorf("pod %s: exporter restarted %d time(s), imageID %s, ready %v; want %d, %s, ready",
				p.Name, now.RestartCount, now.ImageID, now.Ready, wantRestarts, wantID)
		}
		out, err := c.Exec(t.Context(), &p, "exporter", "cat", "/version")
		if err != nil {
			t.Error(err)
		} else if strings.TrimSpace(out) != wantVersion {
			t.Errorf("pod %s: exporter holds version %q, want %q", p.Name, out, wantVersion)
		}
		// A killed process may not have sent its event.
		if n := steps[p.Name]; n > wantEvents {
			t.Errorf("pod %s is named in %d %s event(s), want at most %d", p.Name, n, controller.ReasonRolloutStep, wantEvents)
		}
	}
	if t.Failed() {
		t.Logf("%s events per pod: %v", controller.ReasonRolloutStep, steps)
	}
	f.AssertAppsUntouched(apps)
}

// restarting returns the name of a pod whose spec declares image for the
// exporter and whose exporter the kubelet has restarted but not yet seen
// ready: the new container waits for its readiness probe. Empty if there is
// none.
func restarting(pods []corev1.Pod, image string) string {
	for _, p := range pods {
		if fixture.Image(&p, "exporter") != image {
			continue
		}
		if st := fixture.ContainerStatus(&p, "exporter"); st.RestartCount > 0 && !st.Ready {
			return p.Name
		}
	}
	return ""
}

// watchRecords follows every version of the pods in ns from now on and
// keeps, per pod, the exporter containers that set's record named, one
// after another, as the one running before a write. Calling the returned
// function stops the watch and returns them.
func watchRecords(t *testing.T, c *fixture.Cluster, ns, set string) func() map[string][]string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string][]string{}
	var problem error
	stopping, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				select {
				case <-stopping:
					// The watch's connection closing as it stops.
				default:
					problem = fmt.Errorf("pod watch: event %s carries %T: %+v", ev.Type, ev.Object, ev.Object)
				}
				return
			}
			state, err := revision.Decode(p.Annotations)
			if err != nil {
				problem = fmt.Errorf("pod %s: %w", p.Name, err)
				return
			}
			rc, _ := state[set].Container("exporter")
			if id := rc.PreviousContainerID; id != "" && !slices.Contains(seen[p.Name], id) {
				seen[p.Name] = append(seen[p.Name], id)
			}
		}
		select {
		case <-stopping:
		default:
			problem = errors.New("the pod watch ended before the rollout")
		}
	}()
	return func() map[string][]string {
		t.Helper()
		close(stopping)
		w.Stop()
		<-done
		if problem != nil {
			t.Error(problem)
		}
		return seen
	}
}
