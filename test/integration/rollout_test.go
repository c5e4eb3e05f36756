package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

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
			set := f.SidecarSet("exporter:v1", 1)
			set.Spec.UpdateStrategy.Partition = new(intstr.FromString("100%"))
			set.Spec.UpdateStrategy.MaxUnavailable = &tc.maxUnavailable
			f.CreateSet(set)
			f.CreatePods(12, nil, nil)
			before := fixture.AppIDs(f.Pods())
			f.WaitStatus("12 matched, ready", func(s v1alpha1.SidecarSetStatus) bool {
				return s.MatchedPods == 12 && s.UpdatedReadyPods == 12 && s.ReadyPods == 12
			})

			f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
			st := f.WaitStatus("new revision observed, partition 100% holds every pod", func(s v1alpha1.SidecarSetStatus) bool {
				return s.MatchedPods == 12 && s.UpdatedPods == 0
			})
			time.Sleep(time.Second)
			if n := fixture.CountImage(f.Pods(), "exporter:v2"); n != 0 {
				t.Fatalf("partition 100%% updated %d pods; status %+v", n, st)
			}

			w := f.WatchUnavailable("exporter:v2")
			f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = new(intstr.FromString("50%")) })
			f.WaitStatus("6 updated and ready", func(s v1alpha1.SidecarSetStatus) bool {
				return s.UpdatedReadyPods == 6 && fixture.Condition(s, v1alpha1.ConditionComplete) == "True"
			})
			time.Sleep(500 * time.Millisecond)
			pods := f.Pods()
			if n := fixture.CountImage(pods, "exporter:v2"); n != 6 {
				t.Errorf("partition 50%% of 12: %d pods on the new image, want 6\n%s", n, f.Describe())
			}
			// The partition keeps the last pods by name: p01..p06 move.
			for _, p := range pods[:6] {
				if fixture.Image(&p, "exporter") != "exporter:v2" {
					t.Errorf("pod %s not updated; want p01..p06 first", p.Name)
				}
			}

			f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = new(intstr.FromInt32(0)) })
			f.WaitStatus("12 updated and ready", func(s v1alpha1.SidecarSetStatus) bool {
				return s.UpdatedReadyPods == 12 && s.UpdatedPods == 12 && fixture.Condition(s, v1alpha1.ConditionComplete) == "True"
			})
			if got := w.Max(); got > tc.want || got < tc.want {
				t.Errorf("at most %d pod(s) were unavailable at once, want exactly %d (maxUnavailable)", got, tc.want)
			}
			for _, p := range f.Pods() {
				st := fixture.ContainerStatus(&p, "exporter")
				if st.RestartCount != 1 || st.Image == "" {
					t.Errorf("pod %s exporter restartCount %d, want 1 (one in-place restart)", p.Name, st.RestartCount)
				}
			}
			f.AssertAppsUntouched(before)
		})
	}
}

// TestNotReadyPodsFirst: pods that were not Ready before the update go
// first, all at once, outside maxUnavailable.
func TestNotReadyPodsFirst(t *testing.T) {
	f := newFixture(t)
	// A readiness probe: without one a running container is ready.
	set := f.SidecarSet("exporter:v1", 1)
	set.Spec.UpdateStrategy.Partition = new(intstr.FromString("50%"))
	f.CreateSet(set)
	f.CreatePods(6, nil, nil)
	// p04..p06 run a broken sidecar by hand: not ready.
	for _, p := range f.Pods()[3:] {
		patch := []byte(`{"spec":{"containers":[{"name":"exporter","image":"exporter-never-ready:v1"}]}}`)
		if err := env.Client.Patch(t.Context(), &p, fixture.RawStrategic(patch)); err != nil {
			t.Fatal(err)
		}
	}
	f.WaitPods("p04..p06 not ready", func(pods []corev1.Pod) bool {
		return !fixture.PodReady(&pods[3]) && !fixture.PodReady(&pods[4]) && !fixture.PodReady(&pods[5])
	})
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	f.WaitStatus("3 updated", func(s v1alpha1.SidecarSetStatus) bool { return s.UpdatedPods == 3 })
	pods := f.Pods()
	for i, p := range pods {
		want := "exporter:v1"
		if i >= 3 {
			want = "exporter:v2"
		}
		if fixture.Image(&p, "exporter") != want {
			t.Errorf("pod %s exporter = %s, want %s (not-ready pods first, partition keeps 3)", p.Name, fixture.Image(&p, "exporter"), want)
		}
	}
}

func TestNativeSidecarInPlace(t *testing.T) {
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 0)
	set.Spec.InitContainers = []v1alpha1.SidecarContainer{{Container: corev1.Container{
		Name: "shipper", Image: "shipper:v1", RestartPolicy: new(corev1.ContainerRestartPolicyAlways)}}}
	f.CreateSet(set)
	f.CreatePods(3, nil, nil)
	before := fixture.AppIDs(f.Pods())
	shipperIDs := map[string]string{}
	for _, p := range f.Pods() {
		shipperIDs[p.Name] = fixture.ContainerStatus(&p, "shipper").ContainerID
	}
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.InitContainers[0].Image = "shipper:v2" })
	f.WaitStatus("3 updated and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.UpdatedReadyPods == 3 && s.UpdatedPods == 3
	})
	for _, p := range f.Pods() {
		st := fixture.ContainerStatus(&p, "shipper")
		if fixture.Image(&p, "shipper") != "shipper:v2" || st.RestartCount != 1 || st.ContainerID == shipperIDs[p.Name] {
			t.Errorf("pod %s native sidecar: image %s restartCount %d containerID changed %v; want updated in place",
				p.Name, fixture.Image(&p, "shipper"), st.RestartCount, st.ContainerID != shipperIDs[p.Name])
		}
		if st := fixture.ContainerStatus(&p, "exporter"); st.RestartCount != 0 {
			t.Errorf("pod %s: exporter restarted though only the native sidecar changed", p.Name)
		}
	}
	f.AssertAppsUntouched(before)
}

// TestUpdateOrder: updateStrategy.priorityStrategy and scatterStrategy
// decide which pods go first, and so which ones the partition keeps.
func TestUpdateOrder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels []map[string]string
		order  func(*v1alpha1.UpdateStrategy)
		// updated are the pods on the new image once the partition is reached.
		partition int32
		updated   []string
	}{
		{
			name: "replicas first, the primary kept",
			labels: []map[string]string{
				{"role": "primary"}, {"role": "replica"}, {"role": "replica"}, {"role": "replica"},
			},
			order: func(s *v1alpha1.UpdateStrategy) {
				s.PriorityStrategy = &v1alpha1.UpdatePriorityStrategy{WeightPriority: []v1alpha1.UpdatePriorityWeightTerm{{
					Weight: 100, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "replica"}},
				}}}
			},
			partition: 1,
			updated:   []string{"p02", "p03", "p04"},
		},
		{
			name:   "zones scattered",
			labels: []map[string]string{{"zone": "a"}, {"zone": "a"}, {"zone": "b"}, {"zone": "b"}},
			order: func(s *v1alpha1.UpdateStrategy) {
				s.ScatterStrategy = []v1alpha1.UpdateScatterTerm{{Key: "zone", Value: "a"}}
			},
			partition: 2,
			// By name alone p01 and p02, both in zone a, would go.
			updated: []string{"p01", "p03"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			set := f.SidecarSet("exporter:v1", 0)
			set.Spec.UpdateStrategy.Partition = new(intstr.FromInt32(tc.partition))
			tc.order(&set.Spec.UpdateStrategy)
			f.CreateSet(set)
			for i, l := range tc.labels {
				pod := f.NewPod(fmt.Sprintf("p%02d", i+1))
				maps.Copy(pod.Labels, l)
				f.CreatePod(pod)
			}
			f.WaitReady(len(tc.labels))
			f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
			want := int32(len(tc.updated))
			f.WaitStatus(fmt.Sprintf("%d updated and ready, complete", want), func(s v1alpha1.SidecarSetStatus) bool {
				return s.UpdatedReadyPods == want && fixture.Condition(s, v1alpha1.ConditionComplete) == "True"
			})
			var got []string
			for _, p := range f.Pods() {
				if fixture.Image(&p, "exporter") == "exporter:v2" {
					got = append(got, p.Name)
				}
			}
			if !slices.Equal(got, tc.updated) {
				t.Errorf("pods on the new image: %v, want %v\n%s", got, tc.updated, f.Describe())
			}
		})
	}
}

// TestRolloutStepEvents: a rollout's pod writes are told on the set, one
// RolloutStep event per reconcile that wrote pods, naming the revision and
// every pod it updated; each pod is named once, and none of them gets an
// event of its own from the controller.
func TestRolloutStepEvents(t *testing.T) {
	const pods = 6
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 2)
	set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromInt32(2))
	f.CreateSet(set)
	f.CreatePods(pods, nil, nil)
	f.WaitStatus("all matched and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == pods && s.UpdatedReadyPods == pods
	})

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	st := f.WaitStatus("all updated and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.UpdatedReadyPods == pods && fixture.Condition(s, v1alpha1.ConditionComplete) == "True"
	})
	// Events are sent after the writes, on their own.
	var steps map[string]int
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		steps = f.SetEventPods(controller.ReasonRolloutStep)
		return len(steps) == pods, nil
	})
	if err != nil {
		t.Fatalf("pods named in %s events: %v, want all %d", controller.ReasonRolloutStep, steps, pods)
	}
	for _, p := range f.Pods() {
		if n := steps[p.Name]; n != 1 {
			t.Errorf("pod %s is named in %d %s event(s), want 1", p.Name, n, controller.ReasonRolloutStep)
		}
	}
	for _, e := range f.SetEvents(controller.ReasonRolloutStep) {
		if !strings.Contains(e.Message, "to revision "+st.LatestRevision+": ") {
			t.Errorf("%s event %q does not name the revision %s", controller.ReasonRolloutStep, e.Message, st.LatestRevision)
		}
	}
	var events corev1.EventList
	if err := f.Client.List(t.Context(), &events, client.InNamespace(f.NS)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Pod" && e.ReportingController == "sidecarset-controller" {
			t.Errorf("pod %s has a controller event %s: %s", e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}
