package integration

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// limits returns cpu and memory limits, the apiserver setting the requests
// to them, and an ephemeral-storage request, which no resize may touch.
func limits(cpu, memory string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
		Requests: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("64Mi")},
	}
}

// resizing counts the pods whose exporter spec asks for cpu and memory its
// status does not show applied yet: the kubelet has a resize to do.
func resizing(pods []corev1.Pod) int {
	n := 0
	for i := range pods {
		for _, c := range pods[i].Spec.Containers {
			if c.Name != "exporter" {
				continue
			}
			st := fixture.ContainerStatus(&pods[i], "exporter")
			if st.Resources == nil || st.Resources.Limits.Cpu().Cmp(*c.Resources.Limits.Cpu()) != 0 ||
				st.Resources.Limits.Memory().Cmp(*c.Resources.Limits.Memory()) != 0 {
				n++
			}
		}
	}
	return n
}

// TestResize: a change of a sidecar's cpu and memory alone reaches running
// pods in place, through pods/resize, one pod at a time under
// maxUnavailable 1, without restarting the sidecar or the app; the status
// the kubelet reports shows the new resources. A change of image and
// resources together goes in place too, restarting the sidecar once (more
// memory: a real kubelet refuses to lower a memory limit until it has the
// usage of the container the image change started, and retries). A
// change the apiserver would refuse in a running pod (a limit removed)
// counts the pods not upgradable, and nothing is written.
func TestResize(t *testing.T) {
	const pods = 3
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 0)
	set.Spec.Containers[0].Resources = limits("50m", "32Mi")
	f.startComplete(set, pods)
	apps := fixture.AppIDs(f.Pods())
	ids := map[string]string{}
	for _, p := range f.Pods() {
		ids[p.Name] = fixture.ContainerStatus(&p, "exporter").ContainerID
	}

	w := f.WatchMax(resizing)
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Resources = limits("100m", "64Mi") })
	st := f.WaitStatus("complete on the new resources", fixture.Complete(pods))
	if st.NotUpgradablePods != 0 {
		t.Errorf("%d pods not upgradable after a change of resources alone", st.NotUpgradablePods)
	}
	for _, p := range f.Pods() {
		exporter := fixture.ContainerStatus(&p, "exporter")
		if exporter.Resources == nil || exporter.Resources.Limits.Cpu().String() != "100m" || exporter.Resources.Requests.Memory().String() != "64Mi" {
			t.Errorf("pod %s: exporter status resources %v, want 100m and 64Mi applied", p.Name, exporter.Resources)
		}
		for _, c := range p.Spec.Containers {
			if q, ok := c.Resources.Requests[corev1.ResourceEphemeralStorage]; c.Name == "exporter" && (!ok || q.String() != "64Mi") {
				t.Errorf("pod %s: exporter's ephemeral-storage request %v after the resize, want 64Mi kept", p.Name, c.Resources.Requests)
			}
		}
		if exporter.ContainerID != ids[p.Name] {
			t.Errorf("pod %s: exporter restarted for a resize (containerID %s, was %s)", p.Name, exporter.ContainerID, ids[p.Name])
		}
	}
	if got := w.Max(); got > 1 {
		t.Errorf("%d pods resizing at once, more than maxUnavailable 1\n%s", got, f.Describe())
	}

	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "exporter:v2"
		s.Spec.Containers[0].Resources = limits("100m", "96Mi")
	})
	f.WaitStatus("complete on the new image and resources", func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Complete(pods)(s) && fixture.CountImage(f.Pods(), "exporter:v2") == pods
	})
	for name, n := range fixture.Restarts(f.Pods(), "exporter") {
		if n != 1 {
			t.Errorf("pod %s: exporter restarted %d times for a new image and resources, want once", name, n)
		}
	}
	for _, p := range f.Pods() {
		if got := fixture.ContainerStatus(&p, "exporter").Resources; got == nil || got.Limits.Memory().String() != "96Mi" {
			t.Errorf("pod %s: exporter status resources %v, want 96Mi applied", p.Name, got)
		}
	}
	f.AssertAppsUntouched(apps)

	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		r := limits("100m", "96Mi")
		delete(r.Limits, corev1.ResourceMemory)
		s.Spec.Containers[0].Resources = r
	})
	st = f.WaitStatus("every pod not upgradable", func(s v1alpha1.SidecarSetStatus) bool {
		return s.ObservedGeneration == f.Gen && s.NotUpgradablePods == pods
	})
	for _, p := range f.Pods() {
		if got := fixture.ContainerStatus(&p, "exporter").Resources; got == nil || got.Limits.Memory().String() != "96Mi" {
			t.Errorf("pod %s: exporter resources %v changed by a refused resize", p.Name, got)
		}
		cond := fixture.PodCondition(&p, "SidecarSetUpgradable")
		if cond == nil || cond.Status != corev1.ConditionFalse {
			t.Errorf("pod %s: condition SidecarSetUpgradable %+v, want False", p.Name, cond)
		}
	}
	if c := fixture.SetCondition(st, v1alpha1.ConditionComplete); c == nil || !strings.Contains(c.Message, "not upgradable") {
		t.Errorf("Complete condition %+v does not count the pods not upgradable", c)
	}
	if events := f.WaitSetEvent("PodsNotUpgradable"); len(events) == 0 {
		t.Errorf("no NotUpgradable event on the set")
	}
}
