package kubeletsim

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/internal/testenv"
)

// The integration tests share one control plane and two simulators: sim, the
// fast one the default scheduler name goes to (timings shortened so crash
// loops and jobs finish quickly), and slow, reached through its own
// scheduler name, whose containers take over a second to start so that
// start order shows in the second-precision timestamps.
var (
	env  *testenv.Env
	cs   kubernetes.Interface
	sim  *Sim
	slow *Sim
)

const slowScheduler = "kubeletsim-slow"

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	testenv.SetLogger()
	var err error
	env, err = testenv.Start(testenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeletsim tests need a real control plane:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop control plane:", err)
		}
	}()
	if cs, err = kubernetes.NewForConfig(env.Config); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sim, err = New(env.Config, Options{
		CompletesAfter: 500 * time.Millisecond,
		CrashesAfter:   300 * time.Millisecond,
		BackOff:        500 * time.Millisecond,
		MaxBackOff:     2 * time.Second,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	slow, err = New(env.Config, Options{Nodes: 1, NodePrefix: "slow-node-", SchedulerName: slowScheduler,
		StartDelay: 1100 * time.Millisecond, SyncDelay: 2 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	ctx, cancel := context.WithCancel(context.Background())
	runErrs := make(chan error, 2)
	for _, s := range []*Sim{sim, slow} {
		go func() { runErrs <- s.Run(ctx) }()
	}
	// Stop the simulators before the control plane.
	defer func() {
		cancel()
		for range 2 {
			if err := <-runErrs; err != nil {
				fmt.Fprintln(os.Stderr, "simulator:", err)
			}
		}
	}()
	readyCtx, readyCancel := context.WithTimeout(ctx, time.Minute)
	defer readyCancel()
	for _, s := range []*Sim{sim, slow} {
		if err := s.Ready(readyCtx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// Helpers. Polls are generous: the machine has two shared cores.

const timeout = 90 * time.Second

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newNamespace(t testing.TB) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(testContext(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kubeletsim-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

func pod(ns, name string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{Containers: containers}}
}

func ctr(name, image string) corev1.Container { return corev1.Container{Name: name, Image: image} }

func create(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	got, err := cs.CoreV1().Pods(p.Namespace).Create(testContext(t), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	return got
}

// waitFor polls pod ns/name until ok holds and returns it.
func waitFor(t *testing.T, ns, name, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(testContext(t), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p
		return ok(p), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: waiting for %s: %v\nlast status: %s", ns, name, what, err, describe(last))
	}
	return last
}

func describe(p *corev1.Pod) string {
	if p == nil {
		return "<none>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s node %q", p.Status.Phase, p.Spec.NodeName)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, "\n  condition %s=%s %s %s", c.Type, c.Status, c.Reason, c.Message)
	}
	for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		fmt.Fprintf(&b, "\n  container %s ready=%v restarts=%d state=%+v image=%s", c.Name, c.Ready, c.RestartCount, c.State, c.Image)
	}
	return b.String()
}

func isReady(p *corev1.Pod) bool {
	c := findCondition(p.Status.Conditions, corev1.PodReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

// statusOf returns the status of container name in p, or an empty one if
// the simulator has not reported it yet.
func statusOf(p *corev1.Pod, name string) corev1.ContainerStatus {
	for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if c.Name == name {
			return c
		}
	}
	return corev1.ContainerStatus{}
}

// podEvents returns the Events about p whose reason is reason.
func podEvents(t *testing.T, p *corev1.Pod, reason string) []corev1.Event {
	t.Helper()
	list, err := cs.CoreV1().Events(p.Namespace).List(testContext(t), metav1.ListOptions{
		FieldSelector: fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.uid", string(p.UID)), fields.OneTermEqualSelector("reason", reason)).String(),
	})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	return list.Items
}

// waitForEvents waits until at least n Events with reason are recorded
// about p (Events are written asynchronously) and returns them.
func waitForEvents(t *testing.T, p *corev1.Pod, reason string, n int) []corev1.Event {
	t.Helper()
	var got []corev1.Event
	err := wait.PollUntilContextTimeout(testContext(t), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		got = podEvents(t, p, reason)
		return len(got) >= n, nil
	})
	if err != nil {
		t.Fatalf("pod %s: waiting for %d %s events, have %d: %v", p.Name, n, reason, len(got), err)
	}
	return got
}

func patchImages(t *testing.T, p *corev1.Pod, field string, images map[string]string) {
	t.Helper()
	var parts []string
	for name, image := range images {
		parts = append(parts, fmt.Sprintf(`{"name":%q,"image":%q}`, name, image))
	}
	slices.Sort(parts)
	patch := fmt.Sprintf(`{"spec":{%q:[%s]}}`, field, strings.Join(parts, ","))
	if _, err := cs.CoreV1().Pods(p.Namespace).Patch(testContext(t), p.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch images of %s: %v", p.Name, err)
	}
}

// setRegistry re-points tags in the simulated registry and waits until the
// simulator has seen it, so a pod created next pulls the new digest.
func setRegistry(t *testing.T, pushed map[string]string) {
	t.Helper()
	ctx := testContext(t)
	want := RegistryConfigMap(pushed)
	cms := cs.CoreV1().ConfigMaps(RegistryNamespace)
	cm, err := cms.Get(ctx, RegistryName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cms.Create(ctx, want, metav1.CreateOptions{})
	case err == nil:
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		for k, v := range want.Data {
			cm.Data[k] = v
		}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("set the simulated registry: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for ref, digest := range pushed {
			if sim.reg.resolve(mustParse(t, ref)) != digest {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the simulator did not see the registry change: %v", err)
	}
}

func TestNodesAreRegisteredReadyWithLeases(t *testing.T) {
	ctx := testContext(t)
	if diff := cmp.Diff([]string{"sim-node-0", "sim-node-1", "sim-node-2"}, sim.NodeNames()); diff != "" {
		t.Errorf("node names (-want +got):\n%s", diff)
	}
	for _, name := range sim.NodeNames() {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get node: %v", err)
		}
		var ready bool
		for _, c := range node.Status.Conditions {
			ready = ready || c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		}
		if !ready || node.Status.Allocatable.Pods().Value() < 1000 {
			t.Errorf("node %s: ready %v, allocatable pods %v; want Ready with room for 1000+ pods", name, ready, node.Status.Allocatable.Pods())
		}
		lease, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get lease of %s: %v", name, err)
		}
		if lease.Spec.RenewTime == nil || time.Since(lease.Spec.RenewTime.Time) > time.Minute {
			t.Errorf("lease of %s not renewed: %v", name, lease.Spec.RenewTime)
		}
	}
}

func TestBindingRoundRobinAndSelectors(t *testing.T) {
	ns := newNamespace(t)
	nodes := map[string]bool{}
	for i := range 3 {
		p := create(t, pod(ns, fmt.Sprintf("rr-%d", i), ctr("main", "nginx:1.25")))
		nodes[waitFor(t, ns, p.Name, "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" }).Spec.NodeName] = true
	}
	if len(nodes) != 3 {
		t.Errorf("three pods went to %v, want one on each node", nodes)
	}

	pinned := pod(ns, "selector", ctr("main", "nginx:1.25"))
	pinned.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "sim-node-2"}
	create(t, pinned)
	if got := waitFor(t, ns, pinned.Name, "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" }).Spec.NodeName; got != "sim-node-2" {
		t.Errorf("pod with nodeSelector went to %s, want sim-node-2", got)
	}

	// How a DaemonSet pod names its node.
	affinity := pod(ns, "affinity", ctr("main", "nginx:1.25"))
	affinity.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"sim-node-1"}}}}},
	}}}
	create(t, affinity)
	if got := waitFor(t, ns, affinity.Name, "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" }).Spec.NodeName; got != "sim-node-1" {
		t.Errorf("pod with node affinity went to %s, want sim-node-1", got)
	}
}

// The seed's experiment, as run on the real node.
func TestImagePatchRestartsOnlyThoseContainers(t *testing.T) {
	ns := newNamespace(t)
	p := create(t, pod(ns, "seed",
		ctr("main", "main:v1"), ctr("sidecar-a", "sidecar-a:v1"), ctr("sidecar-b", "sidecar-b:v1"), ctr("sidecar-c", "sidecar-c:v1")))
	before := waitFor(t, ns, p.Name, "Ready", isReady)
	for _, c := range before.Status.ContainerStatuses {
		if !strings.HasPrefix(c.ContainerID, "containerd://") || len(c.ContainerID) != len("containerd://")+64 {
			t.Errorf("%s: containerID %q, want containerd://<64 hex>", c.Name, c.ContainerID)
		}
		if want := "docker.io/library/" + c.Name + ":v1"; c.Image != want {
			t.Errorf("%s: image %q, want %q", c.Name, c.Image, want)
		}
		if want := "docker.io/library/" + c.Name + "@" + sha("docker.io/library/"+c.Name+":v1"); c.ImageID != want {
			t.Errorf("%s: imageID %q, want %q", c.Name, c.ImageID, want)
		}
	}

	patchImages(t, p, "containers", map[string]string{"sidecar-a": "sidecar-a:v2", "sidecar-c": "sidecar-c:v2"})
	after := waitFor(t, ns, p.Name, "the patched sidecars to restart and the pod to be Ready", func(p *corev1.Pod) bool {
		for _, c := range p.Status.ContainerStatuses {
			if (c.Name == "sidecar-a" || c.Name == "sidecar-c") && (c.RestartCount != 1 || !c.Ready) {
				return false
			}
		}
		return isReady(p)
	})

	for i, c := range after.Status.ContainerStatuses {
		old := before.Status.ContainerStatuses[i]
		if c.Name == "sidecar-a" || c.Name == "sidecar-c" {
			if c.ContainerID == old.ContainerID || c.ImageID == old.ImageID || c.Image != "docker.io/library/"+c.Name+":v2" {
				t.Errorf("%s: containerID %s -> %s, imageID %s -> %s, image %s; want a new container of the new image",
					c.Name, old.ContainerID, c.ContainerID, old.ImageID, c.ImageID, c.Image)
			}
			if last := c.LastTerminationState.Terminated; last == nil || last.ContainerID != old.ContainerID {
				t.Errorf("%s: lastState %+v, want the old container terminated", c.Name, c.LastTerminationState)
			}
			continue
		}
		if c.RestartCount != 0 || c.ContainerID != old.ContainerID || !c.State.Running.StartedAt.Equal(&old.State.Running.StartedAt) {
			t.Errorf("%s restarted: restartCount %d, containerID %s -> %s", c.Name, c.RestartCount, old.ContainerID, c.ContainerID)
		}
	}
	if after.UID != before.UID || after.Status.PodIP != before.Status.PodIP || !after.Status.StartTime.Equal(before.Status.StartTime) {
		t.Errorf("pod identity changed: uid %s -> %s, podIP %s -> %s, startTime %v -> %v",
			before.UID, after.UID, before.Status.PodIP, after.Status.PodIP, before.Status.StartTime, after.Status.StartTime)
	}

	killing := waitForEvents(t, after, "Killing", 2)
	var msgs []string
	for _, e := range killing {
		msgs = append(msgs, e.Message)
		if e.Source.Component != "kubelet" || e.Source.Host != after.Spec.NodeName {
			t.Errorf("Killing event from %+v, want the kubelet on %s", e.Source, after.Spec.NodeName)
		}
	}
	slices.Sort(msgs)
	if diff := cmp.Diff([]string{
		"Container sidecar-a definition changed, will be restarted",
		"Container sidecar-c definition changed, will be restarted",
	}, msgs); diff != "" {
		t.Errorf("Killing events (-want +got):\n%s", diff)
	}
}

func TestRegistryRepushAndSharedDigests(t *testing.T) {
	ns := newNamespace(t)

	// A re-push: the tag now points at another digest; a node that never
	// pulled it gets the new one.
	repushed := "sha256:" + strings.Repeat("1f", 32)
	setRegistry(t, map[string]string{"repushed:v1": repushed})
	p := create(t, pod(ns, "repushed", ctr("main", "repushed:v1")))
	got := statusOf(waitFor(t, ns, p.Name, "Ready", isReady), "main")
	if want := "docker.io/library/repushed@" + repushed; got.ImageID != want {
		t.Errorf("imageID %s, want %s", got.ImageID, want)
	}

	// Same digest, new tag: a node that knows the digest as shared:v1 shows
	// that tag for shared:v2; another node shows shared:v2.
	a := pod(ns, "tag-v1", ctr("main", "shared:v1"))
	a.Spec.NodeName = "sim-node-0"
	create(t, a)
	waitFor(t, ns, a.Name, "Ready", isReady)
	digest := sha("docker.io/library/shared:v1")
	setRegistry(t, map[string]string{"shared:v2": digest})
	for node, wantImage := range map[string]string{"sim-node-0": "docker.io/library/shared:v1", "sim-node-1": "docker.io/library/shared:v2"} {
		b := pod(ns, "tag-v2-"+node, ctr("main", "shared:v2"))
		b.Spec.NodeName = node
		create(t, b)
		got := statusOf(waitFor(t, ns, b.Name, "Ready", isReady), "main")
		if got.Image != wantImage || got.ImageID != "docker.io/library/shared@"+digest {
			t.Errorf("on %s: image %s, imageID %s; want %s, docker.io/library/shared@%s", node, got.Image, got.ImageID, wantImage, digest)
		}
	}
}

func TestPullFailureCrashLoopAndNeverReady(t *testing.T) {
	ns := newNamespace(t)
	pulls := create(t, pod(ns, "pull-fails", ctr("main", "example.com/pull-fails/app:v1")))
	crash := create(t, pod(ns, "crashes", ctr("main", "crashes:v1")))
	never := create(t, pod(ns, "never-ready", ctr("main", "never-ready:v1")))

	t.Run("pull failure", func(t *testing.T) {
		got := waitFor(t, ns, pulls.Name, "ImagePullBackOff", func(p *corev1.Pod) bool {
			w := statusOf(p, "main").State.Waiting
			return w != nil && w.Reason == "ImagePullBackOff"
		})
		if got.Status.Phase != corev1.PodPending || isReady(got) {
			t.Errorf("phase %s, ready %v; want Pending and not Ready", got.Status.Phase, isReady(got))
		}
		// ErrImagePull shows before each back-off; the Events keep it.
		var errs []string
		for _, e := range waitForEvents(t, got, "Failed", 2) {
			errs = append(errs, e.Message)
		}
		if !slices.Contains(errs, "Error: ErrImagePull") {
			t.Errorf("Failed events %q lack Error: ErrImagePull", errs)
		}
	})

	t.Run("crash loop", func(t *testing.T) {
		waitFor(t, ns, crash.Name, "CrashLoopBackOff", func(p *corev1.Pod) bool {
			c := statusOf(p, "main")
			return c.State.Waiting != nil && c.State.Waiting.Reason == "CrashLoopBackOff" && c.RestartCount >= 1
		})
		got := waitFor(t, ns, crash.Name, "restartCount to reach 3", func(p *corev1.Pod) bool {
			return statusOf(p, "main").RestartCount >= 3
		})
		last := statusOf(got, "main").LastTerminationState.Terminated
		if last == nil || last.ExitCode != 1 || last.Reason != "Error" {
			t.Errorf("lastState %+v, want terminated Error, exit code 1", last)
		}
		waitForEvents(t, got, "BackOff", 1)
	})

	t.Run("turns unready", func(t *testing.T) {
		// Ready for a moment only: every status the pod takes is watched.
		turns := create(t, pod(ns, "turns-unready", ctr("main", "turns-unready:v1")))
		w, err := cs.CoreV1().Pods(ns).Watch(testContext(t), metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", turns.Name).String(), ResourceVersion: turns.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		wasReady := false
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				t.Fatalf("watch: %+v", ev.Object)
			}
			if isReady(p) {
				wasReady = true
				continue
			}
			if c := statusOf(p, "main"); wasReady {
				if c.State.Running == nil || c.Ready || c.RestartCount != 0 {
					t.Errorf("container %+v; want still running, not ready, never restarted", c)
				}
				return
			}
		}
		t.Fatal("the watch ended before the pod was Ready and then not")
	})

	t.Run("never ready", func(t *testing.T) {
		got := waitFor(t, ns, never.Name, "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		c := statusOf(got, "main")
		if c.State.Running == nil || !ptr.Deref(c.Started, false) || c.Ready || isReady(got) {
			t.Errorf("container %+v, pod Ready %v; want running, started, not ready", c, isReady(got))
		}
	})
}

// A node with SyncDelay acts on a changed image some time after the write,
// as a real kubelet does: until then the status shows the container that
// ran before, still ready, and, as the real kubelet publishes a sync's
// status before it acts on the spec, the new generation observed.
func TestSyncDelayKeepsTheOldContainerAWhile(t *testing.T) {
	ns := newNamespace(t)
	p := pod(ns, "lagging", ctr("main", "main:v1"), ctr("sidecar", "sidecar:v1"))
	p.Spec.SchedulerName = slowScheduler
	create(t, p)
	before := waitFor(t, ns, p.Name, "Ready", isReady)
	patchImages(t, before, "containers", map[string]string{"sidecar": "sidecar:v2"})
	time.Sleep(500 * time.Millisecond)
	soon, err := cs.CoreV1().Pods(ns).Get(testContext(t), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, was := statusOf(soon, "sidecar"), statusOf(before, "sidecar"); got.ContainerID != was.ContainerID || !isReady(soon) ||
		soon.Status.ObservedGeneration != soon.Generation || soon.Generation == before.Generation {
		t.Errorf("half a second after the write: sidecar %s (was %s), Ready %v, observedGeneration %d of %d; want the old container, ready, the write's generation observed",
			got.ContainerID, was.ContainerID, isReady(soon), soon.Status.ObservedGeneration, soon.Generation)
	}
	after := waitFor(t, ns, p.Name, "the sidecar restarted and the pod Ready", func(p *corev1.Pod) bool {
		return statusOf(p, "sidecar").RestartCount == 1 && isReady(p) && p.Status.ObservedGeneration == p.Generation
	})
	if got := statusOf(after, "main"); got.RestartCount != 0 {
		t.Errorf("main restarted: %+v", got)
	}
}

// A node with SyncDelay syncs one change at a time, as the kubelet's pod
// worker does: a change made while it acts on an earlier one waits, and the
// status keeps the generation being synced until that sync ends.
func TestSyncDelayOneChangeAtATime(t *testing.T) {
	ns := newNamespace(t)
	p := pod(ns, "serial", ctr("main", "main:v1"), ctr("sidecar", "sidecar:v1"))
	p.Spec.SchedulerName = slowScheduler
	create(t, p)
	before := waitFor(t, ns, p.Name, "Ready", isReady)
	patchImages(t, before, "containers", map[string]string{"sidecar": "sidecar:v2"})
	time.Sleep(300 * time.Millisecond)
	patchImages(t, before, "containers", map[string]string{"sidecar": "sidecar:v3"})
	time.Sleep(700 * time.Millisecond)
	soon, err := cs.CoreV1().Pods(ns).Get(testContext(t), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, was := statusOf(soon, "sidecar"), statusOf(before, "sidecar"); got.ContainerID != was.ContainerID ||
		soon.Status.ObservedGeneration != before.Generation+1 || soon.Generation != before.Generation+2 {
		t.Errorf("a second after the first write: sidecar %s (was %s), observedGeneration %d of %d; want the old container and the first write's generation %d observed",
			got.ContainerID, was.ContainerID, soon.Status.ObservedGeneration, soon.Generation, before.Generation+1)
	}
	after := waitFor(t, ns, p.Name, "sidecar:v3 running, the pod Ready", func(p *corev1.Pod) bool {
		st := statusOf(p, "sidecar")
		return strings.HasSuffix(st.Image, "/sidecar:v3") && st.State.Running != nil && isReady(p) && p.Status.ObservedGeneration == p.Generation
	})
	if got := statusOf(after, "main"); got.RestartCount != 0 {
		t.Errorf("main restarted: %+v", got)
	}
}

func TestNativeSidecarStartsBeforeAppAndRestartsAlone(t *testing.T) {
	ns := newNamespace(t)
	p := pod(ns, "native", ctr("main", "main:v1"))
	p.Spec.SchedulerName = slowScheduler
	p.Spec.InitContainers = []corev1.Container{
		ctr("setup", "setup:v1"),
		{Name: "proxy", Image: "proxy:v1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
	}
	create(t, p)
	before := waitFor(t, ns, p.Name, "Ready", isReady)
	setup, proxy, main := statusOf(before, "setup"), statusOf(before, "proxy"), statusOf(before, "main")
	if setup.State.Terminated == nil || setup.State.Terminated.Reason != "Completed" {
		t.Fatalf("setup: %+v, want terminated Completed", setup.State)
	}
	if proxy.State.Running == nil || main.State.Running == nil {
		t.Fatalf("proxy %+v, main %+v: want both running", proxy.State, main.State)
	}
	// Each start takes over a second here, so the order shows in seconds.
	if proxy.State.Running.StartedAt.Before(&setup.State.Terminated.FinishedAt) || !proxy.State.Running.StartedAt.Before(&main.State.Running.StartedAt) {
		t.Errorf("setup finished %v, proxy started %v, main started %v; want that order",
			setup.State.Terminated.FinishedAt, proxy.State.Running.StartedAt, main.State.Running.StartedAt)
	}

	patchImages(t, before, "initContainers", map[string]string{"proxy": "proxy:v2"})
	after := waitFor(t, ns, p.Name, "proxy restarted and the pod Ready", func(p *corev1.Pod) bool {
		return statusOf(p, "proxy").RestartCount == 1 && isReady(p)
	})
	if got := statusOf(after, "main"); got.RestartCount != 0 || got.ContainerID != main.ContainerID {
		t.Errorf("main restarted: %+v", got)
	}
	if got := statusOf(after, "proxy"); got.ContainerID == proxy.ContainerID || got.ImageID == proxy.ImageID {
		t.Errorf("proxy: %+v, want a new container of the new image", got)
	}
	killing := waitForEvents(t, after, "Killing", 1)
	if len(killing) != 1 || killing[0].Message != "Init container proxy definition changed" || killing[0].InvolvedObject.FieldPath != "spec.initContainers{proxy}" {
		t.Errorf("Killing events %+v, want one: Init container proxy definition changed", killing)
	}
}

func TestJobWithNativeSidecarSucceeds(t *testing.T) {
	ns := newNamespace(t)
	p := pod(ns, "job", ctr("main", "job-completes:v1"))
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	p.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "proxy:v1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
	create(t, p)
	got := waitFor(t, ns, p.Name, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if c := statusOf(got, "main").State.Terminated; c == nil || c.ExitCode != 0 || c.Reason != "Completed" {
		t.Errorf("main: %+v, want terminated Completed", c)
	}
	if c := statusOf(got, "proxy").State.Terminated; c == nil {
		t.Errorf("the sidecar was not stopped")
	}
}

func TestDeletedPodDisappears(t *testing.T) {
	ns := newNamespace(t)
	p := create(t, pod(ns, "doomed", ctr("main", "nginx:1.25")))
	running := waitFor(t, ns, p.Name, "Ready", isReady)
	// The default grace period of 30 s: the simulator does not wait it out,
	// its containers stop at once.
	if err := cs.CoreV1().Pods(ns).Delete(testContext(t), p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	err := wait.PollUntilContextTimeout(testContext(t), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("the deleted pod is still there: %v", err)
	}
	if got := waitForEvents(t, running, "Killing", 1); got[0].Message != "Stopping container main" {
		t.Errorf("Killing event %q, want Stopping container main", got[0].Message)
	}
}

// The playground may restart its simulator: the new one finds the nodes and
// pods the old one left and carries on without restarting anything.
func TestRestartedSimulatorKeepsItsPods(t *testing.T) {
	opts := Options{Nodes: 1, NodePrefix: "restart-node-", SchedulerName: "kubeletsim-restart"}
	start := func() (stop func()) {
		s, err := New(env.Config, opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(testContext(t))
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		stop = func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("simulator: %v", err)
			}
		}
		if err := s.Ready(ctx); err != nil {
			stop()
			t.Fatal(err)
		}
		return stop
	}

	ns := newNamespace(t)
	stopFirst := start()
	p := pod(ns, "survivor", ctr("main", "main:v1"), ctr("sidecar", "sidecar:v1"))
	p.Spec.SchedulerName = opts.SchedulerName
	create(t, p)
	before := waitFor(t, ns, p.Name, "Ready", isReady)
	stopFirst()

	stopSecond := start()
	defer stopSecond()
	patchImages(t, before, "containers", map[string]string{"sidecar": "sidecar:v2"})
	after := waitFor(t, ns, p.Name, "the sidecar restarted and the pod Ready", func(p *corev1.Pod) bool {
		return statusOf(p, "sidecar").RestartCount == 1 && isReady(p)
	})
	if got, was := statusOf(after, "main"), statusOf(before, "main"); got.ContainerID != was.ContainerID || got.RestartCount != 0 {
		t.Errorf("main restarted across the simulator restart: %s -> %s", was.ContainerID, got.ContainerID)
	}
	if after.Status.PodIP != before.Status.PodIP || !after.Status.StartTime.Equal(before.Status.StartTime) {
		t.Errorf("podIP %s -> %s, startTime %v -> %v; want both kept", before.Status.PodIP, after.Status.PodIP, before.Status.StartTime, after.Status.StartTime)
	}
}
