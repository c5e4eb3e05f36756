package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

// hotPod is a Pod with the slots p-1 and p-2 of sidecar "p": each slot's
// version, its image in the spec, and whether its container has taken
// over (complete, running and ready).
func hotPod(v1 int64, image1 string, ready1 bool, v2 int64, image2 string, ready2 bool) Pod {
	slot := func(name string, v int64, image string, ready bool) (revision.ContainerState, Container) {
		rc := revision.ContainerState{Name: name, Image: image, Hot: &revision.HotSlot{Of: "p", Version: v}}
		return rc, Container{Name: name, Runs: true, Image: image, StatusImage: image, Running: true, Ready: ready, Complete: ready, Recorded: rc}
	}
	r1, c1 := slot("p-1", v1, image1, ready1)
	r2, c2 := slot("p-2", v2, image2, ready2)
	return Pod{Key: key("p01"), Record: revision.SetState{Containers: []revision.ContainerState{r1, r2}}, Containers: []Container{c1, c2}}
}

// The worked cases of hot.go.
func TestHotStep(t *testing.T) {
	type write struct {
		Slot    string
		Image   string
		Version int64
	}
	tests := []struct {
		name          string
		pod           Pod
		target, empty string
		want          *write
	}{{
		name: "the idle slot gets the new image as the next version",
		pod:  hotPod(1, "a", true, 0, "E", true), target: "b", empty: "E",
		want: &write{"p-2", "b", 2},
	}, {
		name: "nothing while the next slot starts",
		pod:  hotPod(1, "a", true, 2, "b", false), target: "b", empty: "E",
	}, {
		name: "handoff: the old slot gets the empty image once the next one took over",
		pod:  hotPod(1, "a", true, 2, "b", true), target: "b", empty: "E",
		want: &write{"p-1", "E", 0},
	}, {
		name: "a newer image waits for the handoff of a next slot that took over",
		pod:  hotPod(1, "a", true, 2, "b", true), target: "c", empty: "E",
		want: &write{"p-1", "E", 0},
	}, {
		name: "a newer image goes into a next slot that has not taken over",
		pod:  hotPod(1, "a", true, 2, "b", false), target: "c", empty: "E",
		want: &write{"p-2", "c", 2},
	}, {
		name: "undo: the next slot goes back to the empty image",
		pod:  hotPod(1, "a", true, 2, "b", false), target: "a", empty: "E",
		want: &write{"p-2", "E", 0},
	}, {
		name: "undo after the next slot took over: its handoff first",
		pod:  hotPod(1, "a", true, 2, "b", true), target: "a", empty: "E",
		want: &write{"p-1", "E", 0},
	}, {
		name: "complete, the second slot serving",
		pod:  hotPod(0, "E", true, 2, "b", true), target: "b", empty: "E",
	}, {
		name: "a new empty image goes into the idle slot",
		pod:  hotPod(0, "E", true, 2, "b", true), target: "b", empty: "E2",
		want: &write{"p-1", "E2", 0},
	}, {
		name: "after a handoff the idle first slot takes the next version",
		pod:  hotPod(0, "E", true, 2, "b", true), target: "c", empty: "E",
		want: &write{"p-1", "c", 3},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pairs := hotPairs(tt.pod.Record)
			if len(pairs) != 1 {
				t.Fatalf("hotPairs found %d pairs, want 1", len(pairs))
			}
			var got *write
			if name, w, ok := pairs[0].step(tt.pod, tt.target, tt.empty); ok {
				got = &write{name, w.image, w.version}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("step (-want +got):\n%s", diff)
			}
		})
	}
}

// hotSet declares "proxy" upgraded hot, idling on empty:1.
func hotSet(image string) *v1alpha1.SidecarSet {
	return testutil.SidecarSet(setName).Selector(map[string]string{"app": "db"}).
		HotContainer("proxy", image, "empty:1").MinReadySeconds(0).Obj()
}

// newHotSim injects hotSet(proxy:v1) into n running, ready pods with the
// webhook's injection.
func newHotSim(t *testing.T, n int, s v1alpha1.UpdateStrategy) *sim {
	set := hotSet("proxy:v1")
	set.Spec.UpdateStrategy = s
	x := &sim{t: t, set: set, phase: map[string]int{}}
	for _, name := range names(n) {
		pod := testutil.Pod(testNS, name).Labels(map[string]string{"app": "db"}).Container("mysql", "mysql:8").Obj()
		res := inject.Inject(pod, nil, []*v1alpha1.SidecarSet{set}, inject.Options{})
		if len(res.Injected) != 1 {
			t.Fatalf("inject %s: %v", name, res.Warnings)
		}
		pod = res.Pod
		for _, c := range pod.Spec.Containers {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, running(c.Name, c.Image))
		}
		pod.Status.Phase = corev1.PodRunning
		setReady(pod, true)
		x.pods = append(x.pods, pod)
	}
	return x
}

// slots returns the spec images and recorded versions of pod's proxy
// slots, and the version annotations.
func slots(pod *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, c := range pod.Spec.Containers {
		if c.Name == "proxy-1" || c.Name == "proxy-2" {
			out[c.Name] = c.Image
		}
	}
	for _, rc := range record(pod).Containers {
		if rc.Hot != nil {
			out[rc.Name+" version"] = pod.Annotations[v1alpha1.AnnotationHotVersionPrefix+rc.Name]
			out[rc.Name+" alt"] = pod.Annotations[v1alpha1.AnnotationHotVersionAltPrefix+rc.Name]
		}
	}
	return out
}

// A hot upgrade of three ready pods with maxUnavailable 1: each pod takes
// two writes, the next version into the idle slot and then, once it took
// over, the empty image into the old slot, before the next pod starts;
// the old slot is never emptied before the next one is ready, and the app
// container never restarts. A second upgrade goes into the other slot.
func TestSimulateHotUpgrade(t *testing.T) {
	x := newHotSim(t, 3, strategy("0", "1"))
	x.before = func(pod *corev1.Pod, u PodUpdate) {
		rec := record(pod)
		for _, ci := range u.Containers {
			if ci.Image != "empty:1" {
				continue
			}
			for _, h := range hotPairs(rec) {
				serving := rec.Containers[h.serving]
				next := rec.Containers[h.next]
				if serving.Name != ci.Name {
					continue
				}
				st := containerStatus(pod, next.Name, false)
				if next.Hot.Version == 0 || !st.Ready || st.Image == "empty:1" {
					t.Errorf("%s: %s gets the empty image while %s has not taken over (%+v)", pod.Name, ci.Name, next.Name, st)
				}
			}
		}
	}
	x.set = hotSet("proxy:v2")
	x.set.Spec.UpdateStrategy = strategy("0", "1")
	x.settle()
	want := [][]string{{"p01"}, {"p01"}, {"p02"}, {"p02"}, {"p03"}, {"p03"}}
	if diff := cmp.Diff(want, x.written); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"p01", "p02", "p03"}, x.updated()); diff != "" {
		t.Errorf("updated and ready (-want +got):\n%s", diff)
	}
	wantSlots := map[string]string{
		"proxy-1": "empty:1", "proxy-1 version": "0", "proxy-1 alt": "2",
		"proxy-2": "proxy:v2", "proxy-2 version": "2", "proxy-2 alt": "0",
	}
	for _, pod := range x.pods {
		if diff := cmp.Diff(wantSlots, slots(pod)); diff != "" {
			t.Errorf("%s slots after v2 (-want +got):\n%s", pod.Name, diff)
		}
		if st := containerStatus(pod, "mysql", false); st.RestartCount != 0 {
			t.Errorf("%s: the app container restarted %d times", pod.Name, st.RestartCount)
		}
	}

	x.written = nil
	x.set = hotSet("proxy:v3")
	x.set.Spec.UpdateStrategy = strategy("0", "1")
	x.settle()
	if diff := cmp.Diff(want, x.written); diff != "" {
		t.Errorf("writes of v3 (-want +got):\n%s", diff)
	}
	wantSlots = map[string]string{
		"proxy-1": "proxy:v3", "proxy-1 version": "3", "proxy-1 alt": "0",
		"proxy-2": "empty:1", "proxy-2 version": "0", "proxy-2 alt": "3",
	}
	for _, pod := range x.pods {
		if diff := cmp.Diff(wantSlots, slots(pod)); diff != "" {
			t.Errorf("%s slots after v3 (-want +got):\n%s", pod.Name, diff)
		}
	}
}

// A hot upgrade whose next version never becomes ready holds its pod, and
// maxUnavailable with it: the old version keeps serving, no other pod is
// written, and an undo sends the next slot back to the empty image.
func TestSimulateHotUpgradeNeverReadyThenUndo(t *testing.T) {
	x := newHotSim(t, 3, strategy("0", "1"))
	x.set = hotSet("proxy-never-ready:v2")
	x.set.Spec.UpdateStrategy = strategy("0", "1")
	x.neverReady = "proxy-never-ready:v2"
	for range 6 {
		x.tick()
	}
	if diff := cmp.Diff([][]string{{"p01"}}, x.written); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if got := slots(x.pods[0])["proxy-1"]; got != "proxy:v1" {
		t.Errorf("p01's serving slot runs %s, want proxy:v1 still", got)
	}
	x.set = hotSet("proxy:v1")
	x.set.Spec.UpdateStrategy = strategy("0", "1")
	x.written = nil
	x.settle()
	if diff := cmp.Diff([][]string{{"p01"}}, x.written); diff != "" {
		t.Errorf("writes of the undo (-want +got):\n%s", diff)
	}
	want := map[string]string{
		"proxy-1": "proxy:v1", "proxy-1 version": "1", "proxy-1 alt": "0",
		"proxy-2": "empty:1", "proxy-2 version": "0", "proxy-2 alt": "1",
	}
	for _, pod := range x.pods {
		if diff := cmp.Diff(want, slots(pod)); diff != "" {
			t.Errorf("%s slots after the undo (-want +got):\n%s", pod.Name, diff)
		}
	}
}
