package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/imageref"
	"github.com/sidecarset/sidecarset/internal/manager"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// lastRelease is the commit of the last release: the manager a cluster
// upgrades from, or rolls back to.
const lastRelease = "6a4b1a7"

// lastReleaseManagerEnv names the environment variable that gives the path
// of a sidecarset-manager binary built from lastRelease, which `make test`
// sets to what hack/last-release.sh builds:
//
//	export SIDECARSET_LAST_RELEASE_MANAGER=$(hack/last-release.sh)
//
// Without it, the tests that run that manager skip: a clone without the
// history cannot build it, and the tests never read git.
const lastReleaseManagerEnv = "SIDECARSET_LAST_RELEASE_MANAGER"

// recordLastReleaseEnv, set beside lastReleaseManagerEnv, makes
// TestRecordLastReleaseMidRollout write midRolloutFile again.
const recordLastReleaseEnv = "SIDECARSET_RECORD_LAST_RELEASE"

// midRolloutFile holds a rollout of the last release's manager, caught in
// the middle (midRollout).
const midRolloutFile = "testdata/upgrade/last-release-mid-rollout.json"

// lastReleaseManager returns the path lastReleaseManagerEnv gives, and
// skips the test without it.
func lastReleaseManager(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(lastReleaseManagerEnv)
	if bin == "" {
		t.Skipf("needs the manager of the last release (%s): set %s to its binary", lastRelease, lastReleaseManagerEnv)
	}
	simulatedOnly(t, "the rollout is caught between two managers at moments only simulated nodes' delays make wide enough")
	return bin
}

// midRollout is a rollout of the last release's manager, caught in the
// middle by killing that manager (TestRecordLastReleaseMidRollout): the set,
// its revisions, and every pod as it was created (injected by the last
// release's webhook) and as it was when the manager died, records, spec and
// status as the apiserver held them.
type midRollout struct {
	// Release is the commit the manager was built from.
	Release string `json:"release"`
	// How says how the rollout was made and caught.
	How string `json:"how"`
	// CapturedAt is when the pods were read, right after the kill.
	CapturedAt metav1.MicroTime `json:"capturedAt"`
	// Labels are the labels the set selected the pods by.
	Labels map[string]string `json:"labels"`
	// Set is the SidecarSet: its name, generation, spec and status.
	Set v1alpha1.SidecarSet `json:"set"`
	// Revisions are the set's ControllerRevisions.
	Revisions []appsv1.ControllerRevision `json:"revisions"`
	// Pods are the set's pods, by name.
	Pods []recordedPod `json:"pods"`
}

// recordedPod is one pod of a midRollout.
type recordedPod struct {
	// Created is the pod as the apiserver stored its creation: the last
	// release's webhook had injected it.
	Created corev1.Pod `json:"created"`
	// Captured is the pod when the manager died.
	Captured corev1.Pod `json:"captured"`
}

// TestRecordLastReleaseMidRollout writes midRolloutFile: the last release's
// manager, the one binary lastReleaseManagerEnv gives, rolls exporter:v2
// over 8 pods (maxUnavailable 2, Ready 2 s after start) and is killed with
// SIGKILL in the middle, when
//
//	p01, p02  are back (Ready on v2) and their records not settled: the
//	          last release leaves a pod back for less than 3 minutes
//	          unsettled while the rollout has work
//	p03       was written and its new sidecar is starting: not Ready
//	p04       was just written and the kubelet has not acted yet: Ready,
//	          running the container the record names as the one to replace
//	p05..p08  are not written
//
// The partition walks 6, 5, 0 to stagger the writes so. Run it on slow
// simulated nodes, or p04's moment is too short to catch:
//
//	SIDECARSET_RECORD_LAST_RELEASE=1 SIDECARSET_SIM_DELAY=2s \
//	SIDECARSET_LAST_RELEASE_MANAGER=$(hack/last-release.sh) \
//	  go test ./test/integration/ -run TestRecordLastReleaseMidRollout
//
// The file is what TestUpgradeFromLastReleaseMidRollout takes over from.
func TestRecordLastReleaseMidRollout(t *testing.T) {
	if os.Getenv(recordLastReleaseEnv) == "" {
		t.Skipf("writes %s: set %s (and %s) to record it again", midRolloutFile, recordLastReleaseEnv, lastReleaseManagerEnv)
	}
	bin := lastReleaseManager(t)
	f := newFixture(t)
	old := cluster.ManagerProcessOf(t, bin)

	set := f.SidecarSet("exporter:v1", 2)
	// The last release has no minReadySeconds; the set is as its users
	// wrote theirs.
	set.Spec.UpdateStrategy.MinReadySeconds = nil
	set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromInt32(2))
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = new(int32(120))
	f.CreateSet(set)
	created := map[string]corev1.Pod{}
	for i := 1; i <= 8; i++ {
		pod := f.NewPod(fmt.Sprintf("p%02d", i))
		f.CreatePod(pod)
		created[pod.Name] = *pod
	}
	f.WaitComplete(8)

	f.rollStaggered("exporter:v2", func(p04 *corev1.Pod) bool { return notActed(t, f.Set, p04) })
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}

	m := &midRollout{
		Release: lastRelease,
		How: "TestRecordLastReleaseMidRollout, nodes simulated with SIDECARSET_SIM_DELAY=" + os.Getenv(fixture.SimDelayEnv) +
			": the manager of " + lastRelease + " rolled exporter:v2 and was killed with SIGKILL",
		CapturedAt: metav1.NowMicro(),
		Labels:     f.Labels,
	}
	pods := f.Pods()
	caught := []bool{backUnsettled(t, f.Set, &pods[0], "exporter:v2"), backUnsettled(t, f.Set, &pods[1], "exporter:v2"),
		restarting(&pods[2], "exporter:v2"), notActed(t, f.Set, &pods[3])}
	if slices.Contains(caught, false) || fixture.CountImage(pods, "exporter:v1") != 4 {
		t.Fatalf("the pods moved on before the kill (p01, p02 back, p03 restarting, p04 not acted on: %v); run again\n%s", caught, f.Describe())
	}
	for _, p := range pods {
		m.Pods = append(m.Pods, recordedPod{Created: bare(created[p.Name]), Captured: bare(p)})
	}
	got := f.GetSet()
	m.Set = v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: got.Name, Generation: got.Generation}, Spec: got.Spec, Status: got.Status}
	var revs appsv1.ControllerRevisionList
	if err := f.Client.List(t.Context(), &revs, client.InNamespace(manager.DefaultOptions().Namespace),
		client.MatchingLabels{v1alpha1.LabelSidecarSet: f.Set}); err != nil {
		t.Fatal(err)
	}
	for _, r := range revs.Items {
		m.Revisions = append(m.Revisions, appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Name: r.Name, Labels: r.Labels, Annotations: r.Annotations},
			Data:       r.Data, Revision: r.Revision,
		})
	}
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(midRolloutFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(midRolloutFile, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s\n%s", midRolloutFile, f.Describe())
}

// bare returns pod without what the apiserver gives every object of its
// own: its name, labels, annotations, generation, spec and status stay.
func bare(pod corev1.Pod) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Labels: pod.Labels, Annotations: pod.Annotations, Generation: pod.Generation},
		Spec:       pod.Spec,
		Status:     pod.Status,
	}
}

// exporterRecord returns the record of set's exporter in pod.
func exporterRecord(t testing.TB, set string, pod *corev1.Pod) (revision.SetState, revision.ContainerState) {
	t.Helper()
	state, err := revision.Decode(pod.Annotations)
	if err != nil {
		t.Fatalf("pod %s: %v", pod.Name, err)
	}
	rc, _ := state[set].Container("exporter")
	return state[set], rc
}

// rollStaggered declares image for the fixture's 8 pods, of a set with
// maxUnavailable 2, with the partition walking 6, 5, 0 so that the writes
// come apart, and returns once p01 and p02 are back on image with their
// records not settled, p03 is restarting onto it, and p04, written,
// satisfies p04.
func (f *testFixture) rollStaggered(image string, p04 func(*corev1.Pod) bool) {
	t := f.T
	t.Helper()
	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = image
		s.Spec.UpdateStrategy.Partition = new(intstr.FromInt32(6))
	})
	f.WaitPods("p01 and p02 back on "+image+", not settled", func(ps []corev1.Pod) bool {
		return backUnsettled(t, f.Set, &ps[0], image) && backUnsettled(t, f.Set, &ps[1], image)
	})
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = new(intstr.FromInt32(5)) })
	f.WaitPods("p03 restarting onto "+image, func(ps []corev1.Pod) bool { return restarting(&ps[2], image) })
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = new(intstr.FromInt32(0)) })
	f.WaitPods("p04 written", func(ps []corev1.Pod) bool { return fixture.Image(&ps[3], "exporter") == image && p04(&ps[3]) })
}

// backUnsettled: pod runs image, Ready, and its record still describes the
// write.
func backUnsettled(t testing.TB, set string, pod *corev1.Pod, image string) bool {
	rec, _ := exporterRecord(t, set, pod)
	st := fixture.ContainerStatus(pod, "exporter")
	return fixture.Image(pod, "exporter") == image && st.State.Running != nil && imageref.Same(image, st.Image) &&
		fixture.PodReady(pod) && rec.Write != nil
}

// restarting: pod declares image and is not Ready: the kubelet replaced
// its exporter and the new one does not serve yet.
func restarting(pod *corev1.Pod, image string) bool {
	return fixture.Image(pod, "exporter") == image && !fixture.PodReady(pod)
}

// notActed: pod was written, and is Ready with the exporter its record
// names as the one the write replaces still running.
func notActed(t testing.TB, set string, pod *corev1.Pod) bool {
	_, rc := exporterRecord(t, set, pod)
	st := fixture.ContainerStatus(pod, "exporter")
	return fixture.PodReady(pod) && st.State.Running != nil && rc.PreviousContainerID != "" && st.ContainerID == rc.PreviousContainerID
}
