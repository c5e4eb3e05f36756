package kubeletsim

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// These tests drive the state machine by hand, with a clock they set, and
// look at the status and Events the kubelet would produce.

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// world is one node and one pod, advanced by hand.
type world struct {
	t   *testing.T
	m   *machine
	pod *corev1.Pod
	rt  *podRuntime
}

func newWorld(t *testing.T, pod *corev1.Pod) *world {
	reg := &registry{}
	ids := 0
	m := &machine{
		timing: timing{completes: time.Second, crashes: time.Second, backOff: 10 * time.Second, maxBackOff: 40 * time.Second},
		reg:    reg,
		images: newNodeImages(),
		newID: func() string {
			ids++
			return fmt.Sprintf("containerd://%064d", ids)
		},
	}
	rt := newPodRuntime(pod.UID)
	rt.podIP, rt.startTime = "10.244.0.1", t0
	return &world{t: t, m: m, pod: pod, rt: rt}
}

// at advances the pod to now, stores its status as the apiserver would,
// and returns the Events.
func (w *world) at(now time.Time) []event {
	events := w.m.advance(w.pod, w.rt, now)
	w.pod.Status = podStatus(w.pod, w.rt, "127.0.10.1", now)
	return events
}

func (w *world) status(name string) corev1.ContainerStatus {
	for _, cs := range append(w.pod.Status.InitContainerStatuses, w.pod.Status.ContainerStatuses...) {
		if cs.Name == name {
			return cs
		}
	}
	w.t.Fatalf("no status for container %s", name)
	return corev1.ContainerStatus{}
}

func (w *world) condition(typ corev1.PodConditionType) corev1.ConditionStatus {
	if c := findCondition(w.pod.Status.Conditions, typ); c != nil {
		return c.Status
	}
	return ""
}

func testPod(containers ...string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-1", Generation: 1}}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c, Image: c + ":v1"})
	}
	return pod
}

func sidecarSpec(name, image string) corev1.Container {
	return corev1.Container{Name: name, Image: image, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}
}

func reasons(events []event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.container+" "+e.reason)
	}
	return out
}

func TestImageChangeRestartsOnlyThatContainer(t *testing.T) {
	w := newWorld(t, testPod("main", "sidecar-a", "sidecar-b", "sidecar-c"))
	w.at(t0)
	if w.pod.Status.Phase != corev1.PodRunning || w.condition(corev1.PodReady) != corev1.ConditionTrue {
		t.Fatalf("phase %s, Ready %s; want Running and Ready", w.pod.Status.Phase, w.condition(corev1.PodReady))
	}
	before := w.pod.Status.DeepCopy()

	w.pod.Spec.Containers[1].Image = "sidecar-a:v2"
	w.pod.Spec.Containers[3].Image = "sidecar-c:v2"
	events := w.at(t0.Add(time.Minute))

	var killed []string
	for _, e := range events {
		if e.reason == "Killing" {
			killed = append(killed, e.message)
		}
	}
	want := []string{
		"Container sidecar-a definition changed, will be restarted",
		"Container sidecar-c definition changed, will be restarted",
	}
	if diff := cmp.Diff(want, killed); diff != "" {
		t.Errorf("Killing events (-want +got):\n%s", diff)
	}
	for i, cs := range w.pod.Status.ContainerStatuses {
		old := before.ContainerStatuses[i]
		changed := cs.Name == "sidecar-a" || cs.Name == "sidecar-c"
		if changed {
			if cs.RestartCount != 1 || cs.ContainerID == old.ContainerID || cs.ImageID == old.ImageID {
				t.Errorf("%s: restartCount %d, containerID %s (was %s), imageID %s (was %s); want a new container of the new image",
					cs.Name, cs.RestartCount, cs.ContainerID, old.ContainerID, cs.ImageID, old.ImageID)
			}
			if got := cs.LastTerminationState.Terminated; got == nil || got.ContainerID != old.ContainerID || got.ExitCode != killedExitCode {
				t.Errorf("%s: lastState %+v, want the killed container", cs.Name, got)
			}
			if cs.Image != "docker.io/library/"+cs.Name+":v2" {
				t.Errorf("%s: image %s, want the normalized new reference", cs.Name, cs.Image)
			}
			continue
		}
		if diff := cmp.Diff(old, cs); diff != "" {
			t.Errorf("%s changed (-before +after):\n%s", cs.Name, diff)
		}
	}
	if !before.StartTime.Equal(w.pod.Status.StartTime) || before.PodIP != w.pod.Status.PodIP {
		t.Errorf("startTime or podIP changed")
	}
}

func TestReadinessFollowsTheProbeDelayAgainAfterARestart(t *testing.T) {
	pod := testPod("main", "sidecar")
	pod.Spec.Containers[1].ReadinessProbe = &corev1.Probe{InitialDelaySeconds: 5}
	w := newWorld(t, pod)
	w.at(t0)
	if w.condition(corev1.PodReady) != corev1.ConditionFalse || !w.status("main").Ready || w.status("sidecar").Ready {
		t.Fatalf("at start: want main ready, sidecar not yet, pod not Ready")
	}
	if got := w.rt.nextWake(t0); !got.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("next wake %v, want when the probe's initial delay ends", got)
	}
	w.at(t0.Add(5 * time.Second))
	if w.condition(corev1.PodReady) != corev1.ConditionTrue {
		t.Fatalf("after the initial delay the pod is not Ready")
	}
	w.pod.Spec.Containers[1].Image = "sidecar:v2"
	w.at(t0.Add(time.Minute))
	if w.condition(corev1.PodReady) != corev1.ConditionFalse || w.status("sidecar").Ready {
		t.Errorf("right after the restart: want the sidecar and the pod not ready")
	}
	w.at(t0.Add(time.Minute + 5*time.Second))
	if w.condition(corev1.PodReady) != corev1.ConditionTrue {
		t.Errorf("the pod is not Ready again after the restarted container's delay")
	}
}

func TestCrashLoop(t *testing.T) {
	w := newWorld(t, testPod("main"))
	w.pod.Spec.Containers[0].Image = "crashes:v1"
	type step struct {
		at       time.Duration
		state    string
		restarts int32
	}
	state := func(cs corev1.ContainerStatus) string {
		switch {
		case cs.State.Running != nil:
			return "running"
		case cs.State.Terminated != nil:
			return "terminated " + cs.State.Terminated.Reason
		}
		return cs.State.Waiting.Reason
	}
	// First exit: restarted at once. Then back-off 10s, 20s, 40s (the cap).
	for _, s := range []step{
		{0, "running", 0},
		{1 * time.Second, "running", 1},
		{2 * time.Second, "CrashLoopBackOff", 1},
		{12 * time.Second, "running", 2},
		{13 * time.Second, "CrashLoopBackOff", 2},
		{33 * time.Second, "running", 3},
		{34 * time.Second, "CrashLoopBackOff", 3},
		{74 * time.Second, "running", 4},
		{75 * time.Second, "CrashLoopBackOff", 4},
		{115 * time.Second, "running", 5},
	} {
		w.at(t0.Add(s.at))
		cs := w.status("main")
		if got := state(cs); got != s.state || cs.RestartCount != s.restarts {
			t.Errorf("at +%v: %s with restartCount %d, want %s with %d", s.at, got, cs.RestartCount, s.state, s.restarts)
		}
		if s.restarts > 0 {
			if last := cs.LastTerminationState.Terminated; last == nil || last.ExitCode != 1 || last.Reason != "Error" {
				t.Errorf("at +%v: lastState %+v, want terminated Error exit 1", s.at, last)
			}
		}
	}
	if w.pod.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s, want Running: the container has run before", w.pod.Status.Phase)
	}
}

func TestPullFailure(t *testing.T) {
	w := newWorld(t, testPod("main"))
	w.pod.Spec.Containers[0].Image = "example.com/pull-fails/app:v1"
	for _, s := range []struct {
		at     time.Duration
		reason string
	}{
		{0, "ErrImagePull"},
		{1 * time.Second, "ImagePullBackOff"},
		{10 * time.Second, "ErrImagePull"},
		{11 * time.Second, "ImagePullBackOff"},
		{29 * time.Second, "ImagePullBackOff"}, // the second back-off is 20s
		{30 * time.Second, "ErrImagePull"},
	} {
		w.at(t0.Add(s.at))
		cs := w.status("main")
		if cs.State.Waiting == nil || cs.State.Waiting.Reason != s.reason {
			t.Errorf("at +%v: state %+v, want waiting %s", s.at, cs.State, s.reason)
		}
	}
	if w.pod.Status.Phase != corev1.PodPending || w.condition(corev1.PodReady) != corev1.ConditionFalse {
		t.Errorf("phase %s, Ready %s; want Pending, not Ready", w.pod.Status.Phase, w.condition(corev1.PodReady))
	}
	if w.status("main").ImageID != "" {
		t.Errorf("an image that never pulled has an imageID")
	}

	// Fixing the image starts the container at once, with no back-off.
	w.pod.Spec.Containers[0].Image = "app:v1"
	w.at(t0.Add(31 * time.Second))
	if cs := w.status("main"); cs.State.Running == nil || cs.RestartCount != 0 {
		t.Errorf("after fixing the image: %+v, want running with restartCount 0", cs)
	}
}

func TestNeverPullPolicy(t *testing.T) {
	w := newWorld(t, testPod("main", "bad"))
	w.pod.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
	w.pod.Spec.Containers[1].Image, w.pod.Spec.Containers[1].ImagePullPolicy = "pull-fails:v1", corev1.PullNever
	w.at(t0)
	if w.status("main").State.Running == nil {
		t.Errorf("an ordinary image with pull policy Never should run (as if imported)")
	}
	if cs := w.status("bad"); cs.State.Waiting == nil || cs.State.Waiting.Reason != "ErrImageNeverPull" {
		t.Errorf("pull-fails with pull policy Never: %+v, want ErrImageNeverPull", cs.State)
	}
}

func TestNativeSidecarOrderAndJobCompletion(t *testing.T) {
	pod := testPod()
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.InitContainers = []corev1.Container{
		{Name: "setup", Image: "setup:v1"},
		sidecarSpec("proxy", "proxy:v1"),
		sidecarSpec("logs", "logs:v1"),
	}
	pod.Spec.InitContainers[1].StartupProbe = &corev1.Probe{InitialDelaySeconds: 2}
	pod.Spec.Containers = []corev1.Container{{Name: "main", Image: "job-completes:v1"}}
	w := newWorld(t, pod)

	events := w.at(t0)
	if diff := cmp.Diff([]string{
		"setup Pulling", "setup Pulled", "setup Created", "setup Started",
		"proxy Pulling", "proxy Pulled", "proxy Created", "proxy Started",
	}, reasons(events)); diff != "" {
		t.Errorf("at start, only setup then proxy run (-want +got):\n%s", diff)
	}
	if w.condition(corev1.PodInitialized) != corev1.ConditionFalse || w.pod.Status.Phase != corev1.PodPending {
		t.Errorf("not initialized while proxy has not started")
	}
	if cs := w.status("setup"); cs.State.Terminated == nil || cs.State.Terminated.Reason != "Completed" || !cs.Ready {
		t.Errorf("setup: %+v, want terminated Completed and ready", cs)
	}

	events = w.at(t0.Add(2 * time.Second))
	if diff := cmp.Diff([]string{
		"logs Pulling", "logs Pulled", "logs Created", "logs Started",
		"main Pulling", "main Pulled", "main Created", "main Started",
	}, reasons(events)); diff != "" {
		t.Errorf("once proxy started: logs, then main (-want +got):\n%s", diff)
	}
	if w.pod.Status.Phase != corev1.PodRunning || w.condition(corev1.PodInitialized) != corev1.ConditionTrue {
		t.Errorf("phase %s, want Running and initialized", w.pod.Status.Phase)
	}

	events = w.at(t0.Add(3 * time.Second))
	if diff := cmp.Diff([]event{
		{container: "logs", init: true, reason: "Killing", message: "Stopping container logs"},
		{container: "proxy", init: true, reason: "Killing", message: "Stopping container proxy"},
	}, events, cmp.AllowUnexported(event{})); diff != "" {
		t.Errorf("when main completes the sidecars stop, last first (-want +got):\n%s", diff)
	}
	if w.pod.Status.Phase != corev1.PodSucceeded {
		t.Errorf("phase %s, want Succeeded", w.pod.Status.Phase)
	}
	if c := findCondition(w.pod.Status.Conditions, corev1.PodReady); c.Status != corev1.ConditionFalse || c.Reason != "PodCompleted" {
		t.Errorf("Ready %+v, want False PodCompleted", c)
	}
	if !w.rt.nextWake(t0.Add(3 * time.Second)).IsZero() {
		t.Errorf("a finished pod still wants to wake up")
	}
}

func TestFailedInitContainerFailsANeverPod(t *testing.T) {
	pod := testPod("main")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.InitContainers = []corev1.Container{sidecarSpec("proxy", "proxy:v1"), {Name: "setup", Image: "crashes:v1"}}
	w := newWorld(t, pod)
	w.at(t0)
	events := w.at(t0.Add(time.Second))
	if w.pod.Status.Phase != corev1.PodFailed {
		t.Errorf("phase %s, want Failed", w.pod.Status.Phase)
	}
	if diff := cmp.Diff([]string{"proxy Killing"}, reasons(events)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if cs := w.status("main"); cs.ContainerID != "" {
		t.Errorf("main ran in a pod whose init failed")
	}
}

func TestNativeSidecarImageChange(t *testing.T) {
	pod := testPod("main")
	pod.Spec.InitContainers = []corev1.Container{sidecarSpec("proxy", "proxy:v1")}
	w := newWorld(t, pod)
	w.at(t0)
	main := w.status("main")
	w.pod.Spec.InitContainers[0].Image = "proxy:v2"
	events := w.at(t0.Add(time.Minute))
	if events[0].reason != "Killing" || events[0].message != "Init container proxy definition changed" {
		t.Errorf("first event %+v, want Killing: Init container proxy definition changed", events[0])
	}
	if cs := w.status("proxy"); cs.RestartCount != 1 || cs.State.Running == nil {
		t.Errorf("proxy: %+v, want running again with restartCount 1", cs)
	}
	if diff := cmp.Diff(main, w.status("main")); diff != "" {
		t.Errorf("main changed (-before +after):\n%s", diff)
	}
}

func TestDeletionStopsRegularContainersThenSidecarsInReverse(t *testing.T) {
	pod := testPod("a", "b")
	pod.Spec.InitContainers = []corev1.Container{sidecarSpec("s1", "s1:v1"), sidecarSpec("s2", "s2:v1")}
	w := newWorld(t, pod)
	w.at(t0)
	w.pod.DeletionTimestamp = ptr.To(metav1.NewTime(t0.Add(time.Second)))
	events := w.at(t0.Add(time.Second))
	if diff := cmp.Diff([]string{"a Killing", "b Killing", "s2 Killing", "s1 Killing"}, reasons(events)); diff != "" {
		t.Errorf("stop order (-want +got):\n%s", diff)
	}
	for _, cs := range append(w.pod.Status.InitContainerStatuses, w.pod.Status.ContainerStatuses...) {
		if cs.State.Terminated == nil {
			t.Errorf("%s still %+v", cs.Name, cs.State)
		}
	}
}

func TestStatusKeepsOtherWritersConditions(t *testing.T) {
	w := newWorld(t, testPod("main"))
	w.pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/gate"}}
	w.pod.Status.Conditions = []corev1.PodCondition{{Type: "SidecarSetUpgradable", Status: corev1.ConditionTrue}}
	w.at(t0)
	if w.condition("SidecarSetUpgradable") != corev1.ConditionTrue {
		t.Errorf("the controller's condition was dropped")
	}
	if c := findCondition(w.pod.Status.Conditions, corev1.PodReady); c.Status != corev1.ConditionFalse || c.Reason != "ReadinessGatesNotReady" {
		t.Errorf("Ready %+v, want False ReadinessGatesNotReady", c)
	}
	w.pod.Status.Conditions = append(w.pod.Status.Conditions, corev1.PodCondition{Type: "example.com/gate", Status: corev1.ConditionTrue})
	w.at(t0.Add(time.Second))
	if w.condition(corev1.PodReady) != corev1.ConditionTrue {
		t.Errorf("the pod is not Ready once its readiness gate is True")
	}
}

// A restarted simulator rebuilds the runtime from the status and reports the
// same status: nothing restarts, nothing is rewritten.
func TestRestoreFromStatus(t *testing.T) {
	pod := testPod("main", "crashy")
	pod.Spec.Containers[1].Image = "crashes:v1"
	pod.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "setup:v1"}, sidecarSpec("proxy", "proxy:v1")}
	w := newWorld(t, pod)
	w.at(t0)
	w.at(t0.Add(time.Second))
	w.at(t0.Add(2 * time.Second)) // crashy in CrashLoopBackOff
	now := t0.Add(3 * time.Second)
	w.at(now)

	fresh := newWorld(t, pod)
	fresh.m.reg = w.m.reg
	rt := fresh.m.restore(w.pod)
	got := podStatus(w.pod, rt, "127.0.10.1", now)
	// Only crashy differs: its back-off is forgotten, so it restarts at once.
	want := w.pod.Status.DeepCopy()
	if !apiequality.Semantic.DeepEqual(want.InitContainerStatuses, got.InitContainerStatuses) {
		t.Errorf("init container statuses (-want +got):\n%s", cmp.Diff(want.InitContainerStatuses, got.InitContainerStatuses))
	}
	if !apiequality.Semantic.DeepEqual(want.ContainerStatuses[0], got.ContainerStatuses[0]) {
		t.Errorf("main (-want +got):\n%s", cmp.Diff(want.ContainerStatuses[0], got.ContainerStatuses[0]))
	}
	fresh.m.advance(w.pod, rt, now)
	if cs := podStatus(w.pod, rt, "127.0.10.1", now).ContainerStatuses[1]; cs.State.Running == nil || cs.RestartCount != 2 {
		t.Errorf("crashy after restore: %+v, want running with restartCount 2", cs)
	}

	// A spec changed while no simulator ran counts as a changed definition.
	changed := w.pod.DeepCopy()
	changed.Spec.Containers[0].Image = "main:v2"
	rt = fresh.m.restore(changed)
	events := fresh.m.advance(changed, rt, now)
	if len(events) == 0 || events[0].message != "Container main definition changed, will be restarted" {
		t.Errorf("events %+v, want main killed for its changed definition", events)
	}
}

// TestProbeDelay: a real kubelet's readiness comes at the first probe after
// the initial delay, so the period rounds the delay up (a readiness probe
// with initialDelaySeconds 1 and the default periodSeconds 10 made a
// container ready after about 10s on a real node).
func TestProbeDelay(t *testing.T) {
	for _, tc := range []struct {
		name  string
		probe *corev1.Probe
		want  time.Duration
	}{
		{"no probe", nil, 0},
		{"no delay", &corev1.Probe{PeriodSeconds: 10}, 0},
		{"delay below the default period", &corev1.Probe{InitialDelaySeconds: 1, PeriodSeconds: 10}, 10 * time.Second},
		{"delay a multiple of the period", &corev1.Probe{InitialDelaySeconds: 4, PeriodSeconds: 2}, 4 * time.Second},
		{"delay between two probes", &corev1.Probe{InitialDelaySeconds: 5, PeriodSeconds: 2}, 6 * time.Second},
		{"period of one second", &corev1.Probe{InitialDelaySeconds: 3, PeriodSeconds: 1}, 3 * time.Second},
		{"period not defaulted", &corev1.Probe{InitialDelaySeconds: 3}, 3 * time.Second},
	} {
		if got := probeDelay(tc.probe); got != tc.want {
			t.Errorf("%s: probeDelay = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestResize: a resize is applied in place, the container keeps running
// under its ID and the status shows the new cpu and memory; a resource whose
// resizePolicy says RestartContainer restarts the container instead, and
// the next one runs with the new resources. A native sidecar resizes too.
func TestResize(t *testing.T) {
	res := func(cpu, mem string) corev1.ResourceRequirements {
		l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
		return corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
	}
	pod := testPod("main", "exporter", "shipper")
	pod.Spec.Containers[1].Resources = res("250m", "64Mi")
	pod.Spec.Containers[2].Resources = res("250m", "64Mi")
	pod.Spec.Containers[2].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	pod.Spec.InitContainers = []corev1.Container{sidecarSpec("native", "native:v1")}
	pod.Spec.InitContainers[0].Resources = res("100m", "32Mi")
	w := newWorld(t, pod)
	w.at(t0)
	before := w.pod.Status.DeepCopy()
	if got := w.status("exporter").Resources; got == nil || !apiequality.Semantic.DeepEqual(*got, res("250m", "64Mi")) {
		t.Fatalf("exporter status resources %v, want the spec's", got)
	}
	if got := w.status("main").Resources; got == nil {
		t.Fatalf("main's status has no resources: the apiserver takes that for a node that cannot resize")
	}

	w.pod.Spec.Containers[1].Resources = res("500m", "128Mi")
	w.pod.Spec.Containers[2].Resources = res("500m", "128Mi")
	w.pod.Spec.InitContainers[0].Resources = res("200m", "32Mi")
	w.pod.Generation++
	events := w.at(t0.Add(time.Minute))

	for _, name := range []string{"exporter", "native"} {
		st := w.status(name)
		old := before.ContainerStatuses[1]
		if name == "native" {
			old = before.InitContainerStatuses[0]
		}
		if st.ContainerID != old.ContainerID || st.RestartCount != 0 {
			t.Errorf("%s: containerID %s (was %s), restartCount %d; want the same container", name, st.ContainerID, old.ContainerID, st.RestartCount)
		}
	}
	if got := *w.status("exporter").Resources; !apiequality.Semantic.DeepEqual(got, res("500m", "128Mi")) {
		t.Errorf("exporter status resources %v after the resize, want the new ones", got)
	}
	if got := *w.status("native").Resources.Requests.Cpu(); got.String() != "200m" {
		t.Errorf("native requests cpu %s after the resize, want 200m", got.String())
	}
	shipper := w.status("shipper")
	if shipper.ContainerID == before.ContainerStatuses[2].ContainerID || shipper.RestartCount != 1 {
		t.Errorf("shipper (memory RestartContainer): containerID %s, restartCount %d; want a new container", shipper.ContainerID, shipper.RestartCount)
	}
	if got := shipper.Resources; got == nil || !apiequality.Semantic.DeepEqual(*got, res("500m", "128Mi")) {
		t.Errorf("shipper status resources %v, want the new ones", got)
	}
	if diff := cmp.Diff([]string{"shipper Killing", "shipper Pulled", "shipper Created", "shipper Started"}, reasons(events)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if c := w.condition(corev1.PodResizeInProgress); c != "" {
		t.Errorf("PodResizeInProgress %s once every container shows its spec's resources", c)
	}
}

// TestResizeInProgress: while the kubelet has not applied a resize the
// status says so, for the generation it saw.
func TestResizeInProgress(t *testing.T) {
	pod := testPod("main")
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	w := newWorld(t, pod)
	w.at(t0)
	w.pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	w.pod.Generation++
	// The status of the new spec, before the node acted on it.
	w.pod.Status = podStatus(w.pod, w.rt, "127.0.10.1", t0.Add(time.Second))
	c := findCondition(w.pod.Status.Conditions, corev1.PodResizeInProgress)
	if c == nil || c.Status != corev1.ConditionTrue || c.ObservedGeneration != w.pod.Generation {
		t.Fatalf("PodResizeInProgress = %+v, want True at generation %d", c, w.pod.Generation)
	}
	w.at(t0.Add(2 * time.Second))
	if c := w.condition(corev1.PodResizeInProgress); c != "" {
		t.Errorf("PodResizeInProgress %s after the resize", c)
	}
}
