package integration

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// withExporter adds to pod, as its owner would have written it before any
// SidecarSet existed, the container the set declares, at image.
func withExporter(pod *corev1.Pod, set *v1alpha1.SidecarSet, image string) *corev1.Pod {
	c := *set.Spec.Containers[0].Container.DeepCopy()
	c.Image = image
	pod.Spec.Containers = append(pod.Spec.Containers, c)
	return pod
}

// TestAdoption: with adoptionPolicy SameName, pods created before the set
// that already run its sidecar (another image) get its records without a
// restart, count as matched, and are updated in place like injected pods.
// A pod that opted out of injection, and one without the sidecar, stay
// unmanaged.
func TestAdoption(t *testing.T) {
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 1)
	set.Spec.AdoptionPolicy = v1alpha1.AdoptSameName
	// Held first, to see the adoption alone.
	set.Spec.UpdateStrategy.Partition = new(intstr.FromString("100%"))
	for _, name := range []string{"p01", "p02", "p03"} {
		f.CreatePod(withExporter(f.NewPod(name), set, "exporter:v0"))
	}
	optedOut := withExporter(f.NewPod("p04"), set, "exporter:v0")
	optedOut.Annotations = map[string]string{v1alpha1.AnnotationInject: "false"}
	f.CreatePod(optedOut)
	f.CreatePod(f.NewPod("p05"))
	f.WaitReady(5)
	before := fixture.AppIDs(f.Pods())
	exporterIDs := map[string]string{}
	for _, p := range f.Pods() {
		exporterIDs[p.Name] = fixture.ContainerStatus(&p, "exporter").ContainerID
	}

	created := time.Now()
	f.CreateSet(set)
	f.WaitStatus("3 adopted, 2 unmanaged", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == 3 && s.UnmanagedPods == 2 && s.ReadyPods == 3
	})
	// The first reconcile adopts; a later one would wait for the periodic
	// recount.
	if took := time.Since(created); took >= controller.UnmanagedRecount {
		t.Errorf("adoption took %s, as long as the unmanaged recount (%s): the first reconcile did not adopt", took, controller.UnmanagedRecount)
	}
	for _, p := range f.Pods() {
		adopted := p.Name <= "p03"
		state, err := revision.Decode(p.Annotations)
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		_, recorded := state[f.Set]
		if got := p.Annotations[v1alpha1.AnnotationInjected] == f.Set && recorded &&
			p.Labels[v1alpha1.LabelManaged] == "true"; got != adopted {
			t.Errorf("pod %s: records %v (injected %q, state %q, managed label %q), want %v",
				p.Name, got, p.Annotations[v1alpha1.AnnotationInjected], p.Annotations[v1alpha1.AnnotationState],
				p.Labels[v1alpha1.LabelManaged], adopted)
		}
		if adopted && state[f.Set].Containers[0].Image != "exporter:v0" {
			t.Errorf("pod %s: record %+v, want the image it runs, exporter:v0", p.Name, state[f.Set])
		}
	}
	for _, name := range []string{"p01", "p02", "p03"} {
		f.WaitPodEvent(name, controller.ReasonAdopted)
	}
	if got := f.PodEvents(controller.ReasonAdopted); len(got) != 3 {
		t.Errorf("%s events per pod %v, want p01..p03", controller.ReasonAdopted, got)
	}
	f.AssertNothingRestarted()

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = new(intstr.FromInt32(0)) })
	st := f.WaitStatus("adopted pods updated in place", func(s v1alpha1.SidecarSetStatus) bool {
		return s.UpdatedReadyPods == 3 && fixture.Condition(s, v1alpha1.ConditionComplete) == metav1.ConditionTrue
	})
	if st.UnmanagedPods != 2 {
		t.Errorf("unmanagedPods %d after the rollout, want 2 (p04 opted out, p05 has no exporter)", st.UnmanagedPods)
	}
	for _, p := range f.Pods() {
		st := fixture.ContainerStatus(&p, "exporter")
		switch p.Name {
		case "p01", "p02", "p03":
			if fixture.Image(&p, "exporter") != "exporter:v1" || st.RestartCount != 1 || st.ContainerID == exporterIDs[p.Name] {
				t.Errorf("adopted pod %s: exporter %s restartCount %d; want exporter:v1 after one in-place restart",
					p.Name, fixture.Image(&p, "exporter"), st.RestartCount)
			}
		case "p04":
			if fixture.Image(&p, "exporter") != "exporter:v0" || st.RestartCount != 0 {
				t.Errorf("opted-out pod p04: exporter %s restartCount %d; want it untouched", fixture.Image(&p, "exporter"), st.RestartCount)
			}
		case "p05":
			if len(p.Spec.Containers) != 1 {
				t.Errorf("pod p05 without a sidecar got containers %v", p.Spec.Containers)
			}
		}
	}
	f.AssertAppsUntouched(before)
}

// TestUnmanaged: with adoptionPolicy Never, matching pods without the set's
// record are counted, not touched: pods created before the set (with or
// without a same-named sidecar), and pods that opted out of injection.
func TestUnmanaged(t *testing.T) {
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 0)
	f.CreatePod(f.NewPod("p01"))
	f.CreatePod(f.NewPod("p02"))
	f.CreatePod(withExporter(f.NewPod("p03"), set, "exporter:v0"))
	f.WaitReady(3)
	before := fixture.AppIDs(f.Pods())
	f.CreateSet(set)
	f.WaitStatus("3 unmanaged", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == 0 && s.UnmanagedPods == 3
	})

	optedOut := f.NewPod("p04")
	optedOut.Annotations = map[string]string{v1alpha1.AnnotationInject: "false"}
	f.CreatePod(optedOut)
	f.CreatePod(f.NewPod("p05"))
	f.CreatePod(f.NewPod("p06"))
	f.WaitReady(6)
	// Unmanaged pods are recounted every controller.UnmanagedRecount, or at
	// once when the spec changes.
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.RevisionHistoryLimit = new(int32(5)) })
	st := f.WaitStatus("4 unmanaged, 2 injected", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == 2 && s.UnmanagedPods == 4
	})
	if st.UpdatedReadyPods != 2 {
		t.Errorf("status %+v: want the 2 injected pods updated and ready", st)
	}
	for _, p := range f.Pods() {
		injected := p.Name == "p05" || p.Name == "p06"
		if got := strings.Contains(p.Annotations[v1alpha1.AnnotationInjected], f.Set); got != injected {
			t.Errorf("pod %s carries the set's record: %v, want %v", p.Name, got, injected)
		}
		if p.Name == "p03" && fixture.Image(&p, "exporter") != "exporter:v0" {
			t.Errorf("unmanaged pod p03 exporter = %s, want exporter:v0 untouched", fixture.Image(&p, "exporter"))
		}
	}
	f.AssertNothingRestarted()
	f.AssertAppsUntouched(before)
}
