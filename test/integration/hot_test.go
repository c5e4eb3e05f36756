package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// hotEmpty is the image the idle slot runs: busybox sleeping, with a
// /version, so that it passes the exporter's readiness probe.
const hotEmpty = "hot-empty:v1"

// hotSet is the fixture's set with its exporter upgraded hot. On a real
// node the exporter runs in its handoff mode: the slots share an emptyDir
// for its control sockets, and its readiness probe passes once it serves
// (its mark in its own filesystem) or in an image without the exporter
// (the empty one).
func (f *testFixture) hotSet(image string) *v1alpha1.SidecarSet {
	set := f.SidecarSet(image, 1)
	c := &set.Spec.Containers[0]
	c.UpgradeStrategy = &v1alpha1.UpgradeStrategy{UpgradeType: v1alpha1.HotUpgrade, HotUpgradeEmptyImage: hotEmpty}
	c.ReadinessProbe.Exec.Command = []string{"sh", "-c", "test -e /tmp/serving || ! test -e /bin/exporter"}
	c.Env = []corev1.EnvVar{{Name: "EXPORTER_HANDOFF_DIR", Value: "/handoff"}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "handoff", MountPath: "/handoff"}}
	set.Spec.Volumes = []corev1.Volume{{Name: "handoff", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	return set
}

// assertSlots checks that every pod runs serving in the slot named by
// servingSlot (1 or 2) and the empty image in the other, with their
// version annotations.
func (f *testFixture) assertSlots(serving string, servingSlot int, version string) {
	f.T.Helper()
	slots := v1alpha1.HotSlots("exporter")
	on, idle := slots[servingSlot-1], slots[2-servingSlot]
	for _, p := range f.Pods() {
		got := fmt.Sprintf("%s=%s %s=%s; versions %s/%s, %s/%s", on, fixture.Image(&p, on), idle, fixture.Image(&p, idle),
			p.Annotations[v1alpha1.AnnotationHotVersionPrefix+on], p.Annotations[v1alpha1.AnnotationHotVersionAltPrefix+on],
			p.Annotations[v1alpha1.AnnotationHotVersionPrefix+idle], p.Annotations[v1alpha1.AnnotationHotVersionAltPrefix+idle])
		want := fmt.Sprintf("%s=%s %s=%s; versions %s/0, 0/%s", on, serving, idle, hotEmpty, version, version)
		if got != want {
			f.T.Errorf("pod %s: %s, want %s", p.Name, got, want)
		}
		if fixture.Image(&p, "exporter") != "" {
			f.T.Errorf("pod %s has a container exporter besides its slots", p.Name)
		}
	}
}

// pollExporter asks the exporter of pod for its version from inside the
// pod, every 50ms until stop is called, and returns the answers in order,
// "FAIL" for a request nobody answered. Only a real node runs processes:
// elsewhere stop returns nil.
func (f *testFixture) pollExporter(pod *corev1.Pod) (stop func() []string) {
	if f.C.Kind != fixture.Real {
		return func() []string { return nil }
	}
	ctx := f.T.Context()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := f.C.Exec(ctx, pod, fixture.AppContainer, "sh", "-c",
			// nc rather than busybox's static wget, which crashes.
			`rm -f /tmp/stop; while [ ! -e /tmp/stop ]; do
				v=$(printf 'GET /version HTTP/1.0\r\n\r\n' | nc -w 2 127.0.0.1 9104 2>/dev/null | tail -n 1)
				echo "${v:-FAIL}"; sleep 0.05
			done`)
		done <- result{out, err}
	}()
	return func() []string {
		if _, err := f.C.Exec(context.WithoutCancel(ctx), pod, fixture.AppContainer, "touch", "/tmp/stop"); err != nil {
			f.T.Fatal(err)
		}
		r := <-done
		if r.err != nil {
			f.T.Fatal(r.err)
		}
		return strings.Fields(r.out)
	}
}

// TestHotUpgrade: a HotUpgrade sidecar runs in new pods as exporter-1,
// serving, and exporter-2 idle on the empty image. A new image starts in
// the idle slot beside the old version and, once that is ready, the old
// slot gets the empty image; the next image goes into the other slot.
// maxUnavailable 1 holds through each pod's steps, every slot restarts
// once per step it takes, and the app never restarts. On a real node the
// project's exporter hands its port over, and a client inside the pod is
// answered all along, first by the old version, then by the new one.
func TestHotUpgrade(t *testing.T) {
	const pods = 3
	f := newFixture(t)
	f.startComplete(f.hotSet("exporter:v1"), pods)
	f.assertSlots("exporter:v1", 1, "1")
	apps := fixture.AppIDs(f.Pods())

	stop := f.pollExporter(f.Pod("p01"))
	w := f.WatchNotReady()
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	f.WaitStatus("complete on exporter:v2", func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Complete(pods)(s) && countSlots(f.Pods(), hotEmpty) == pods
	})
	if got := w.Max(); got > 1 {
		t.Errorf("%d pods not ready at once, more than maxUnavailable 1\n%s", got, f.Describe())
	}
	answers := stop()
	f.assertSlots("exporter:v2", 2, "2")
	ps := f.Pods()
	for _, slot := range v1alpha1.HotSlots("exporter") {
		for name, n := range fixture.Restarts(ps, slot) {
			if n != 1 {
				t.Errorf("pod %s: %s restarted %d times, want once", name, slot, n)
			}
		}
	}
	f.AssertAppsUntouched(apps)
	if f.C.Kind == fixture.Real {
		assertHandedOver(t, answers, "v1", "v2")
	}

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v3" })
	f.WaitStatus("complete on exporter:v3", func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Complete(pods)(s) && countSlots(f.Pods(), "exporter:v3") == pods
	})
	f.assertSlots("exporter:v3", 1, "3")
	f.AssertAppsUntouched(apps)
}

// assertHandedOver checks the answers of pollExporter: none failed, the
// old version answered first and the new one last, and never the old one
// again once the new one had.
func assertHandedOver(t *testing.T, answers []string, from, to string) {
	t.Helper()
	if len(answers) == 0 {
		t.Fatal("the exporter was never asked")
	}
	seenNew := false
	for i, a := range answers {
		switch {
		case a == "FAIL":
			t.Errorf("request %d of %d was not answered: the sidecar was down during the hot upgrade", i+1, len(answers))
		case a == to:
			seenNew = true
		case a == from && seenNew:
			t.Errorf("request %d answered by %s after %s had taken over", i+1, from, to)
		case a != from:
			t.Errorf("request %d answered %q, neither %s nor %s", i+1, a, from, to)
		}
	}
	n := 0
	for _, a := range answers {
		if a == from {
			n++
		}
	}
	t.Logf("%d requests during the hot upgrade: %d answered by %s, then %d by %s", len(answers), n, from, len(answers)-n, to)
	if answers[0] != from || answers[len(answers)-1] != to {
		t.Errorf("answers went from %s to %s, want from %s to %s (%d answers)", answers[0], answers[len(answers)-1], from, to, len(answers))
	}
}

// TestHotUpgradeNeverReady: a next version that never becomes ready keeps
// the old one serving and holds maxUnavailable: the rollout writes no
// other pod and stalls; `rollout undo` sends the slot back to the empty
// image.
func TestHotUpgradeNeverReady(t *testing.T) {
	simulatedOnly(t, "an image named never-ready")
	const pods = 3
	f := newFixture(t)
	set := f.hotSet("exporter:v1")
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = new(int32(3))
	f.startComplete(set, pods)
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter-never-ready:v2" })
	st := f.WaitStatus("stalled", func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Condition(s, v1alpha1.ConditionStalled) == "True"
	})
	if st.UpdatedPods != 1 || st.UpdatedReadyPods != 0 {
		t.Errorf("stalled with %d updated and %d updated-ready pods, want 1 and 0", st.UpdatedPods, st.UpdatedReadyPods)
	}
	if n := countSlots(f.Pods(), "exporter:v1"); n != pods {
		t.Errorf("%d pods still serve exporter:v1, want all %d: the old version is emptied only once the new one is ready\n%s", n, pods, f.Describe())
	}
	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "exporter:v1"
		s.Spec.UpdateStrategy.Paused = false
	})
	f.WaitStatus("complete on exporter:v1 again", func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Complete(pods)(s) && countSlots(f.Pods(), hotEmpty) == pods
	})
	f.assertSlots("exporter:v1", 1, "1")
}

// countSlots counts the pods one of whose exporter slots has image.
func countSlots(pods []corev1.Pod, image string) int {
	n := 0
	for _, p := range pods {
		slots := v1alpha1.HotSlots("exporter")
		if fixture.Image(&p, slots[0]) == image || fixture.Image(&p, slots[1]) == image {
			n++
		}
	}
	return n
}
