package integration

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// TestStatefulSetRollout: a database StatefulSet of six pods made by
// kube-controller-manager; the exporter's new image goes in place through
// partition steps, one pod at a time (maxUnavailable 1). The pods keep
// their identity, their app containers never restart, each updated exporter
// runs the new image's content, and no more than one pod is disrupted at
// any sampled moment.
func TestStatefulSetRollout(t *testing.T) {
	const pods = 6
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 1)
	set.Spec.UpdateStrategy.Partition = new(intstr.FromInt32(pods))
	set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromInt32(1))
	f.CreateSet(set)

	template := f.NewPod("")
	f.C.FitPod(&template.Spec)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.NS, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](pods),
			Selector:            &metav1.LabelSelector{MatchLabels: f.Labels},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template:            corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: f.Labels}, Spec: template.Spec},
		},
	}
	if err := f.Client.Create(t.Context(), sts); err != nil {
		t.Fatal(err)
	}
	f.WaitReady(pods)
	f.WaitStatus("all matched and ready", fixture.Complete(pods))
	before := f.Pods()
	apps := fixture.AppIDs(before)

	w := f.WatchNotReady()
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	for _, keep := range []int32{4, 2, 0} {
		f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = new(intstr.FromInt32(keep)) })
		f.WaitStatus(fmt.Sprintf("partition %d", keep), func(s v1alpha1.SidecarSetStatus) bool {
			return s.UpdatedReadyPods == pods-keep && fixture.Condition(s, v1alpha1.ConditionComplete) == metav1.ConditionTrue
		})
		ps := f.Pods()
		if n := fixture.CountImage(ps, "exporter:v2"); n != int(pods-keep) {
			t.Errorf("partition %d of %d: %d pods on the new image, want %d\n%s", keep, pods, n, pods-keep, f.Describe())
		}
		f.assertRuns(ps, "exporter", "exporter:v2", "v2")
	}
	if got := w.Max(); got > 1 {
		t.Errorf("%d pods not ready at once, more than maxUnavailable 1", got)
	}
	after := f.Pods()
	for i, p := range after {
		if p.UID != before[i].UID || p.Status.PodIP != before[i].Status.PodIP {
			t.Errorf("pod %s was replaced: UID %s → %s, IP %s → %s", p.Name, before[i].UID, p.UID, before[i].Status.PodIP, p.Status.PodIP)
		}
		if n := fixture.ContainerStatus(&p, "exporter").RestartCount; n != 1 {
			t.Errorf("pod %s: exporter restarted %d times, want once", p.Name, n)
		}
	}
	f.AssertAppsUntouched(apps)
}

// assertRuns checks, for each pod whose spec declares image for container,
// that the container runs it: its status shows the image's imageID and, on
// a real node, the container's /version holds version.
func (f *testFixture) assertRuns(pods []corev1.Pod, container, image, version string) {
	f.T.Helper()
	wantID, err := f.C.ImageID(image)
	if err != nil {
		f.T.Fatal(err)
	}
	for _, p := range pods {
		if fixture.Image(&p, container) != image {
			continue
		}
		if got := fixture.ContainerStatus(&p, container).ImageID; got != wantID {
			f.T.Errorf("pod %s: %s runs imageID %s, want %s (of %s)", p.Name, container, got, wantID, image)
		}
		out, err := f.C.Exec(f.T.Context(), &p, container, "cat", "/version")
		switch {
		case errors.Is(err, fixture.ErrNoProcesses):
		case err != nil:
			f.T.Error(err)
		case strings.TrimSpace(out) != version:
			f.T.Errorf("pod %s: %s holds version %q, want %q", p.Name, container, out, version)
		}
	}
}
