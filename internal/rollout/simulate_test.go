package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// sim runs a rollout over real pod objects. Each tick the kubelet acts, then
// the controller classifies every pod, plans and writes. The kubelet lags
// like a real one: a pod written in one tick still runs its old container
// in the next (updating), restarts in the one after (updated, not ready),
// and is ready in the one after that.
type sim struct {
	t    *testing.T
	set  *v1alpha1.SidecarSet
	pods []*corev1.Pod
	// phase per pod: 1 written, kubelet not yet acting; 2 restarted.
	phase map[string]int
	// written lists the pods each non-empty plan wrote.
	written [][]string
	// unpullable is an image the kubelet never manages to pull.
	unpullable string
	// neverReady is an image whose containers run but never pass their
	// readiness probe.
	neverReady string
	// before, when set, sees every update before it is written.
	before func(pod *corev1.Pod, u PodUpdate)
}

// newSim injects exporter:v1 into n pods, all ready except notReady, then
// declares image with strategy.
func newSim(t *testing.T, n int, image string, s v1alpha1.UpdateStrategy, notReady ...string) *sim {
	v1 := testSet("exporter:v1")
	x := &sim{t: t, set: testSet(image), phase: map[string]int{}}
	x.set.Spec.UpdateStrategy = s
	for _, name := range names(n) {
		pod := injectedPod(name, v1)
		for _, nr := range notReady {
			if nr == name {
				setReady(pod, false)
			}
		}
		x.pods = append(x.pods, pod)
	}
	return x
}

func (x *sim) kubelet() {
	for _, pod := range x.pods {
		switch x.phase[pod.Name] {
		case 1:
			x.phase[pod.Name] = 2
			if swap(pod) {
				setReady(pod, false)
			}
			x.failPulls(pod)
		case 2:
			delete(x.phase, pod.Name)
			setReady(pod, !x.failPulls(pod) && !x.unready(pod))
		}
	}
}

// unready reports whether a container of pod runs the neverReady image.
func (x *sim) unready(pod *corev1.Pod) bool {
	for _, st := range pod.Status.ContainerStatuses {
		if x.neverReady != "" && st.Image == x.neverReady {
			return true
		}
	}
	return false
}

// failPulls leaves every container of the unpullable image waiting, as the
// kubelet does when the pull fails, and reports whether there was one.
func (x *sim) failPulls(pod *corev1.Pod) bool {
	failed := false
	for i, st := range pod.Status.ContainerStatuses {
		if x.unpullable != "" && st.Image == x.unpullable {
			pod.Status.ContainerStatuses[i] = corev1.ContainerStatus{Name: st.Name, Image: st.Image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}
			failed = true
		}
	}
	return failed
}

// tick runs one kubelet pass and one reconcile, and reports whether
// anything moved. It checks on every plan that ready pods are written only
// within maxUnavailable: with maxUnavailable 1, a ready pod is written only
// when no other pod is updating or updated but not ready.
func (x *sim) tick() bool {
	x.kubelet()
	latest := NewLatest(x.set)
	var pods []Pod
	for _, pod := range x.pods {
		pods = append(pods, Classify(pod, record(pod), latest))
	}
	plan, err := Next(Input{Latest: latest, Pods: pods, Strategy: x.set.Spec.UpdateStrategy})
	if err != nil {
		x.t.Fatalf("Next: %v", err)
	}
	var wasReady int
	var wrote []string
	for _, u := range plan.Updates {
		if u.Disrupts {
			wasReady++
		}
		wrote = append(wrote, u.Pod.Name)
	}
	// Counted here rather than taken from plan.Scope, to check Next
	// against the rule and not against itself.
	var unavailable int
	for _, p := range pods {
		if p.Disrupting {
			unavailable++
		}
	}
	if room := plan.Scope.MaxUnavailable - unavailable; wasReady > max(room, 0) {
		x.t.Errorf("plan %v writes %d ready pods with %d unavailable of maxUnavailable %d",
			wrote, wasReady, unavailable, plan.Scope.MaxUnavailable)
	}
	for _, u := range plan.Updates {
		for _, pod := range x.pods {
			if pod.Name == u.Pod.Name {
				if x.before != nil {
					x.before(pod, u)
				}
				applyUpdate(pod, u)
				x.phase[pod.Name] = 1
			}
		}
	}
	if len(wrote) > 0 {
		x.written = append(x.written, wrote)
	}
	return len(wrote) > 0 || len(x.phase) > 0
}

// settle ticks until nothing moves.
func (x *sim) settle() {
	for range 200 {
		if !x.tick() {
			return
		}
	}
	x.t.Fatal("the rollout did not settle within 200 ticks")
}

func (x *sim) updated() []string {
	latest := NewLatest(x.set)
	var out []string
	for _, pod := range x.pods {
		p := Classify(pod, record(pod), latest)
		if p.Updated && p.Ready {
			out = append(out, pod.Name)
		}
	}
	return out
}

// The seed's case: 12 pods all ready, partition 50%, maxUnavailable 1: six
// pods are updated one at a time, the next only once the previous is ready
// (tick checks that on every plan).
func TestSimulateSeedPartition50MaxUnavailable1(t *testing.T) {
	x := newSim(t, 12, "exporter:v2", strategy("50%", "1"))
	x.settle()
	want := [][]string{{"p01"}, {"p02"}, {"p03"}, {"p04"}, {"p05"}, {"p06"}}
	if diff := cmp.Diff(want, x.written); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(podRange(1, 6), x.updated()); diff != "" {
		t.Errorf("updated and ready at the end (-want +got):\n%s", diff)
	}
}

// Pods that were not ready go first, all at once, and take nothing from
// maxUnavailable: the first plan writes them and one ready pod.
func TestSimulateNotReadyFirst(t *testing.T) {
	x := newSim(t, 12, "exporter:v2", strategy("50%", "1"), "p03", "p09", "p11")
	x.settle()
	want := [][]string{{"p03", "p09", "p11", "p01"}, {"p02"}, {"p04"}}
	if diff := cmp.Diff(want, x.written); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"p01", "p02", "p03", "p04", "p09", "p11"}, x.updated()); diff != "" {
		t.Errorf("updated and ready at the end (-want +got):\n%s", diff)
	}
}

// maxUnavailable 3, or 25% of 12, with the partition walked down by hand:
// 100% writes nothing, 50% two batches of three, 0 the other two.
func TestSimulatePartitionSteps(t *testing.T) {
	for _, mu := range []string{"3", "25%"} {
		t.Run("maxUnavailable "+mu, func(t *testing.T) {
			x := newSim(t, 12, "exporter:v2", strategy("100%", mu))
			steps := []struct {
				partition string
				want      [][]string
			}{
				{"100%", nil},
				{"50%", [][]string{podRange(1, 3), podRange(4, 6)}},
				{"0", [][]string{podRange(7, 9), podRange(10, 12)}},
			}
			for _, step := range steps {
				x.set.Spec.UpdateStrategy.Partition = intOrPercent(step.partition)
				x.written = nil
				x.settle()
				if diff := cmp.Diff(step.want, x.written); diff != "" {
					t.Errorf("partition %s: writes (-want +got):\n%s", step.partition, diff)
				}
			}
			if diff := cmp.Diff(names(12), x.updated()); diff != "" {
				t.Errorf("updated and ready at the end (-want +got):\n%s", diff)
			}
		})
	}
}

// A new image that never pulls: the first pod stays updating, nothing
// else is written, and the other pods keep the old image.
func TestSimulateBrokenImageStopsAtOne(t *testing.T) {
	x := newSim(t, 4, "exporter:broken", strategy("0", "1"))
	x.unpullable = "exporter:broken"
	x.settle()
	if diff := cmp.Diff([][]string{{"p01"}}, x.written); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	latest := NewLatest(x.set)
	got := verdictOf(Classify(x.pods[0], record(x.pods[0]), latest))
	want := verdict{Updated: true, Updating: true, Upgradable: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("p01 (-want +got):\n%s", diff)
	}
}

// A new image for the native sidecar rolls out the same way: written into
// spec.initContainers, judged from initContainerStatuses.
func TestSimulateNativeSidecar(t *testing.T) {
	x := newSim(t, 3, "exporter:v1", strategy("0", "1"))
	x.set.Spec.InitContainers[0].Image = "fluent-bit:3.2"
	x.settle()
	want := [][]string{{"p01"}, {"p02"}, {"p03"}}
	if diff := cmp.Diff(want, x.written); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(names(3), x.updated()); diff != "" {
		t.Errorf("updated and ready at the end (-want +got):\n%s", diff)
	}
	for _, pod := range x.pods {
		if got := pod.Spec.InitContainers[0].Image; got != "fluent-bit:3.2" {
			t.Errorf("%s: shipper image %q, want fluent-bit:3.2", pod.Name, got)
		}
		if got := pod.Spec.Containers[1].Image; got != "exporter:v1" {
			t.Errorf("%s: exporter image %q, want it untouched", pod.Name, got)
		}
	}
}
