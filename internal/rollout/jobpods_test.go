package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

// TestJobPodNativeSidecar: in a Job's pod, jobPods NativeSidecar put the
// regular sidecar exporter into the init containers. The rollout finds it
// there by its record: a new image is upgradable in place, the write goes
// into spec.initContainers, and completion is judged from the init
// container's status.
func TestJobPodNativeSidecar(t *testing.T) {
	pod := testutil.Pod(testNS, "job-0").Labels(map[string]string{"app": "db"}).
		RestartPolicy(corev1.RestartPolicyNever).Container("mysql", "mysql:8").Obj()
	res := inject.Inject(pod, nil, []*v1alpha1.SidecarSet{testSet("exporter:v1")}, inject.Options{})
	if len(res.Injected) != 1 {
		t.Fatalf("not injected: %v", res.Warnings)
	}
	pod = res.Pod
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("containers %v, want the app's only", pod.Spec.Containers)
	}
	for _, c := range pod.Spec.InitContainers {
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, running(c.Name, c.Image))
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{running("mysql", "mysql:8")}
	setReady(pod, true)
	pod.Status.Phase = corev1.PodRunning

	latest := NewLatest(testSet("exporter:v2"))
	p := Classify(pod, record(pod), latest)
	if diff := cmp.Diff(verdict{Upgradable: true, PodReady: true, Ready: true}, verdictOf(p)); diff != "" {
		t.Fatalf("classified before the update (-want +got):\n%s", diff)
	}
	plan, err := Next(Input{Latest: latest, Pods: []Pod{p}})
	if err != nil || len(plan.Updates) != 1 {
		t.Fatalf("plan %+v, err %v", plan, err)
	}
	if diff := cmp.Diff([]ContainerImage{{Name: "exporter", Init: true, Image: "exporter:v2"}}, plan.Updates[0].Containers); diff != "" {
		t.Errorf("update (-want +got):\n%s", diff)
	}
	applyUpdate(pod, plan.Updates[0])
	if got := pod.Spec.InitContainers[1]; got.Name != "exporter" || got.Image != "exporter:v2" {
		t.Errorf("init container %s has image %s, want exporter with exporter:v2", got.Name, got.Image)
	}
	if p := Classify(pod, record(pod), latest); !p.Updating || p.Ready {
		t.Errorf("written, not swapped: updating %v, ready %v; want updating, not ready", p.Updating, p.Ready)
	}
	swap(pod)
	want := verdict{Updated: true, Upgradable: true, PodReady: true, Ready: true}
	if diff := cmp.Diff(want, verdictOf(Classify(pod, record(pod), latest))); diff != "" {
		t.Errorf("classified after the swap (-want +got):\n%s", diff)
	}
}
