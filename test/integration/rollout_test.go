package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

func intstrPort(p int32) intstr.IntOrString { return intstr.FromInt32(p) }

// watcher samples the pods while a rollout runs and keeps the largest value
// of count seen.
type watcher struct {
	mu      sync.Mutex
	max     int
	stop    context.CancelFunc
	stopped chan struct{}
}

func (f *fixture) watchMax(count func([]corev1.Pod) int) *watcher {
	ctx, cancel := context.WithCancel(f.t.Context())
	w := &watcher{stop: cancel, stopped: make(chan struct{})}
	go func() {
		defer close(w.stopped)
		for ctx.Err() == nil {
			var list corev1.PodList
			// Not f.pods: a failure there would call Fatal off the test's
			// goroutine.
			if err := env.Client.List(ctx, &list, client.InNamespace(f.ns)); err == nil {
				n := count(list.Items)
				w.mu.Lock()
				w.max = max(w.max, n)
				w.mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return w
}

// watchUnavailable keeps the largest number of pods seen at once that carry
// img in their spec but are not Ready: pods the rollout made unavailable.
func (f *fixture) watchUnavailable(img string) *watcher {
	return f.watchMax(func(pods []corev1.Pod) int {
		n := 0
		for _, p := range pods {
			if image(&p, "exporter") == img && !podReady(&p) {
				n++
			}
		}
		return n
	})
}

func (w *watcher) Max() int {
	w.stop()
	<-w.stopped
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.max
}

func countImage(pods []corev1.Pod, img string) int {
	n := 0
	for _, p := range pods {
		if image(&p, "exporter") == img {
			n++
		}
	}
	return n
}

// TestSeedRollout is the source article's scenario: 12 pods, partition
// 100% → 50% → 0, maxUnavailable 1: the update goes one pod at a time, the
// next only after the previous is Ready, and stops where the partition says.
func TestSeedRollout(t *testing.T) {
	for _, tc := range []struct {
		name           string
		maxUnavailable intstr.IntOrString
		want           int
	}{
		{"maxUnavailable 1", intstr.FromInt32(1), 1},
		{"maxUnavailable 3", intstr.FromInt32(3), 3},
		{"maxUnavailable 25%", intstr.FromString("25%"), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			set := f.sidecarSet("exporter:v1", 1)
			set.Spec.UpdateStrategy.Partition = new(intstr.FromString("100%"))
			set.Spec.UpdateStrategy.MaxUnavailable = &tc.maxUnavailable
			f.createSet(set)
			f.createPods(12, nil, nil)
			before := appIDs(f.pods())
			f.waitStatus("12 matched, ready", func(s v1alpha1.SidecarSetStatus) bool {
				return s.MatchedPods == 12 && s.UpdatedReadyPods == 12 && s.ReadyPods == 12
			})

			f.updateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
			st := f.waitStatus("new revision observed, partition 100% holds every pod", func(s v1alpha1.SidecarSetStatus) bool {
				return s.MatchedPods == 12 && s.UpdatedPods == 0
			})
			time.Sleep(time.Second)
			if n := countImage(f.pods(), "exporter:v2"); n != 0 {
				t.Fatalf("partition 100%% updated %d pods; status %+v", n, st)
			}

			w := f.watchUnavailable("exporter:v2")
			f.updateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = new(intstr.FromString("50%")) })
			f.waitStatus("6 updated and ready", func(s v1alpha1.SidecarSetStatus) bool {
				return s.UpdatedReadyPods == 6 && condition(s, v1alpha1.ConditionComplete) == "True"
			})
			time.Sleep(500 * time.Millisecond)
			pods := f.pods()
			if n := countImage(pods, "exporter:v2"); n != 6 {
				t.Errorf("partition 50%% of 12: %d pods on the new image, want 6\n%s", n, f.describe())
			}
			// The partition keeps the last pods by name: p01..p06 move.
			for _, p := range pods[:6] {
				if image(&p, "exporter") != "exporter:v2" {
					t.Errorf("pod %s not updated; want p01..p06 first", p.Name)
				}
			}

			f.updateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = new(intstr.FromInt32(0)) })
			f.waitStatus("12 updated and ready", func(s v1alpha1.SidecarSetStatus) bool {
				return s.UpdatedReadyPods == 12 && s.UpdatedPods == 12 && condition(s, v1alpha1.ConditionComplete) == "True"
			})
			if got := w.Max(); got > tc.want || got < tc.want {
				t.Errorf("at most %d pod(s) were unavailable at once, want exactly %d (maxUnavailable)", got, tc.want)
			}
			for _, p := range f.pods() {
				st := containerStatus(&p, "exporter")
				if st.RestartCount != 1 || st.Image == "" {
					t.Errorf("pod %s exporter restartCount %d, want 1 (one in-place restart)", p.Name, st.RestartCount)
				}
			}
			f.assertAppsUntouched(before)
		})
	}
}

// TestNotReadyPodsFirst: pods that were not Ready before the update go
// first, all at once, outside maxUnavailable.
func TestNotReadyPodsFirst(t *testing.T) {
	f := newFixture(t)
	set := f.sidecarSet("exporter:v1", 0)
	set.Spec.UpdateStrategy.Partition = new(intstr.FromString("50%"))
	f.createSet(set)
	f.createPods(6, nil, nil)
	// p04..p06 run a broken sidecar by hand: not ready.
	for _, p := range f.pods()[3:] {
		patch := []byte(`{"spec":{"containers":[{"name":"exporter","image":"exporter-never-ready:v1"}]}}`)
		if err := env.Client.Patch(t.Context(), &p, rawStrategic(patch)); err != nil {
			t.Fatal(err)
		}
	}
	f.waitPods("p04..p06 not ready", func(pods []corev1.Pod) bool {
		return !podReady(&pods[3]) && !podReady(&pods[4]) && !podReady(&pods[5])
	})
	f.updateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	f.waitStatus("3 updated", func(s v1alpha1.SidecarSetStatus) bool { return s.UpdatedPods == 3 })
	pods := f.pods()
	for i, p := range pods {
		want := "exporter:v1"
		if i >= 3 {
			want = "exporter:v2"
		}
		if image(&p, "exporter") != want {
			t.Errorf("pod %s exporter = %s, want %s (not-ready pods first, partition keeps 3)", p.Name, image(&p, "exporter"), want)
		}
	}
}

func TestNativeSidecarInPlace(t *testing.T) {
	f := newFixture(t)
	set := f.sidecarSet("exporter:v1", 0)
	set.Spec.InitContainers = []v1alpha1.SidecarContainer{{Container: corev1.Container{
		Name: "shipper", Image: "shipper:v1", RestartPolicy: new(corev1.ContainerRestartPolicyAlways)}}}
	f.createSet(set)
	f.createPods(3, nil, nil)
	before := appIDs(f.pods())
	shipperIDs := map[string]string{}
	for _, p := range f.pods() {
		shipperIDs[p.Name] = containerStatus(&p, "shipper").ContainerID
	}
	f.updateSet(func(s *v1alpha1.SidecarSet) { s.Spec.InitContainers[0].Image = "shipper:v2" })
	f.waitStatus("3 updated and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.UpdatedReadyPods == 3 && s.UpdatedPods == 3
	})
	for _, p := range f.pods() {
		st := containerStatus(&p, "shipper")
		if image(&p, "shipper") != "shipper:v2" || st.RestartCount != 1 || st.ContainerID == shipperIDs[p.Name] {
			t.Errorf("pod %s native sidecar: image %s restartCount %d containerID changed %v; want updated in place",
				p.Name, image(&p, "shipper"), st.RestartCount, st.ContainerID != shipperIDs[p.Name])
		}
		if st := containerStatus(&p, "exporter"); st.RestartCount != 0 {
			t.Errorf("pod %s: exporter restarted though only the native sidecar changed", p.Name)
		}
	}
	f.assertAppsUntouched(before)
}
