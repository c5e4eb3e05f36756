// Package integration tests the whole loop: a real kube-apiserver, etcd and
// kube-controller-manager, simulated nodes, and the sidecarset manager with
// its webhooks called over TLS by the apiserver. Every assertion is made from
// the outside: pod specs and statuses, SidecarSet status, events.
package integration

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/stack"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

var (
	env *testenv.Env
	sys *stack.Stack
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	testenv.SetLogger()
	opts := stack.TestOptions()
	// Simulated nodes that act at once hide races; make test runs the
	// suite a second time with image pulls and container starts that take
	// this long, and nodes that act on a pod's change half of it later.
	if d := os.Getenv("SIDECARSET_SIM_DELAY"); d != "" {
		delay, err := time.ParseDuration(d)
		if err != nil {
			fmt.Fprintf(os.Stderr, "SIDECARSET_SIM_DELAY: %v\n", err)
			return 1
		}
		opts.Sim.PullDelay, opts.Sim.StartDelay, opts.Sim.SyncDelay = delay, delay/2, delay/2
	}
	var err error
	sys, err = stack.Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := sys.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop:", err)
		}
	}()
	env = sys.Env
	return m.Run()
}

// fixture is one test's namespace, pod labels and SidecarSet name, so tests
// never see each other's pods.
type fixture struct {
	t      testing.TB
	ns     string
	labels map[string]string
	set    string
	// gen is the SidecarSet's generation after the test's last write;
	// waitStatus waits for a status that observed it.
	gen int64
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	name := strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, strings.ToLower(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	name = strings.Trim(name, "-")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"}}
	if err := env.Client.Create(t.Context(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return &fixture{t: t, ns: ns.Name, labels: map[string]string{"example.com/db": ns.Name}, set: ns.Name}
}

// sidecarSet returns a SidecarSet selecting the fixture's pods, with an
// exporter sidecar whose readiness takes readyAfter seconds, so a rollout's
// pace is visible from outside.
func (f *fixture) sidecarSet(image string, readyAfter int32) *v1alpha1.SidecarSet {
	c := corev1.Container{Name: "exporter", Image: image}
	if readyAfter > 0 {
		c.ReadinessProbe = &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstrPort(9104)}},
			InitialDelaySeconds: readyAfter,
		}
	}
	return &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: f.set},
		Spec: v1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: f.labels},
			Containers: []v1alpha1.SidecarContainer{{Container: c}},
		},
	}
}

func (f *fixture) createSet(set *v1alpha1.SidecarSet) {
	f.t.Helper()
	if err := env.Client.Create(f.t.Context(), set); err != nil {
		f.t.Fatalf("create SidecarSet: %v", err)
	}
	f.gen = set.Generation
	f.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), set) })
	// Pods created before the manager's cache holds the set would be
	// created without it.
	if err := testenv.WaitObserved(f.t.Context(), env.Client, set.Name); err != nil {
		f.t.Fatal(err)
	}
}

// updateSet changes the fixture's SidecarSet, retrying on conflicts (the
// controller may pause it concurrently).
func (f *fixture) updateSet(change func(*v1alpha1.SidecarSet)) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(f.t.Context(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		set := &v1alpha1.SidecarSet{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: f.set}, set); err != nil {
			return false, err
		}
		change(set)
		err := env.Client.Update(ctx, set)
		if apierrors.IsConflict(err) {
			return false, nil
		}
		f.gen = set.Generation
		return err == nil, err
	})
	if err != nil {
		f.t.Fatalf("update SidecarSet: %v", err)
	}
}

// waitSet waits until the fixture's SidecarSet satisfies cond.
func (f *fixture) waitSet(what string, cond func(*v1alpha1.SidecarSet) bool) *v1alpha1.SidecarSet {
	f.t.Helper()
	return f.waitSetFor(90*time.Second, what, cond)
}

func (f *fixture) waitSetFor(timeout time.Duration, what string, cond func(*v1alpha1.SidecarSet) bool) *v1alpha1.SidecarSet {
	f.t.Helper()
	var set *v1alpha1.SidecarSet
	err := wait.PollUntilContextTimeout(f.t.Context(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		set = f.getSet()
		return cond(set), nil
	})
	if err != nil {
		f.t.Fatalf("wait for %s: %v\nstatus: %+v\n%s", what, err, set.Status, f.describe())
	}
	return set
}

func (f *fixture) getSet() *v1alpha1.SidecarSet {
	f.t.Helper()
	set := &v1alpha1.SidecarSet{}
	if err := env.Client.Get(f.t.Context(), client.ObjectKey{Name: f.set}, set); err != nil {
		f.t.Fatalf("get SidecarSet: %v", err)
	}
	return set
}

// createPods creates n pods p01..pNN with an app container "mysql", adds
// extra to their labels, and waits until all are Ready.
func (f *fixture) createPods(n int, extra map[string]string, annotations map[string]string) {
	f.t.Helper()
	for i := 1; i <= n; i++ {
		pod := f.newPod(fmt.Sprintf("p%02d", i))
		for k, v := range extra {
			pod.Labels[k] = v
		}
		pod.Annotations = annotations
		f.createPod(pod)
	}
	f.waitReady(n)
}

// newPod returns a pod of the fixture, matching its SidecarSet, with the app
// container "mysql" alone.
func (f *fixture) newPod(name string) *corev1.Pod {
	labels := map[string]string{}
	for k, v := range f.labels {
		labels[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "mysql", Image: "mysql:8.4"}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
}

func (f *fixture) createPod(pod *corev1.Pod) {
	f.t.Helper()
	if err := env.Client.Create(f.t.Context(), pod); err != nil {
		f.t.Fatalf("create pod %s: %v", pod.Name, err)
	}
}

// waitReady waits until the namespace holds n pods, all Ready.
func (f *fixture) waitReady(n int) {
	f.t.Helper()
	f.waitPods(fmt.Sprintf("%d pods Ready", n), func(pods []corev1.Pod) bool {
		if len(pods) < n {
			return false
		}
		for _, p := range pods {
			if !podReady(&p) {
				return false
			}
		}
		return true
	})
}

// pod returns the named pod of the fixture.
func (f *fixture) pod(name string) *corev1.Pod {
	f.t.Helper()
	pod := &corev1.Pod{}
	if err := env.Client.Get(f.t.Context(), client.ObjectKey{Namespace: f.ns, Name: name}, pod); err != nil {
		f.t.Fatalf("get pod %s: %v", name, err)
	}
	return pod
}

func (f *fixture) pods() []corev1.Pod {
	f.t.Helper()
	var list corev1.PodList
	if err := env.Client.List(f.t.Context(), &list, client.InNamespace(f.ns)); err != nil {
		f.t.Fatalf("list pods: %v", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

func (f *fixture) waitPods(what string, cond func([]corev1.Pod) bool) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(f.t.Context(), 100*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return cond(f.pods()), nil
	})
	if err != nil {
		f.t.Fatalf("wait for %s: %v\n%s", what, err, f.describe())
	}
}

// waitStatus waits until the fixture's SidecarSet has a status that
// observed the test's last write and satisfies cond.
func (f *fixture) waitStatus(what string, cond func(v1alpha1.SidecarSetStatus) bool) v1alpha1.SidecarSetStatus {
	f.t.Helper()
	return f.waitStatusFor(90*time.Second, what, cond)
}

func (f *fixture) waitStatusFor(timeout time.Duration, what string, cond func(v1alpha1.SidecarSetStatus) bool) v1alpha1.SidecarSetStatus {
	f.t.Helper()
	return f.waitSetFor(timeout, what, func(set *v1alpha1.SidecarSet) bool {
		return set.Status.ObservedGeneration >= f.gen && cond(set.Status)
	}).Status
}

// describe prints the pods' sidecar images and readiness for failure output.
func (f *fixture) describe() string {
	var b strings.Builder
	for _, p := range f.pods() {
		fmt.Fprintf(&b, "  %s ready=%v", p.Name, podReady(&p))
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			fmt.Fprintf(&b, " %s=%s", c.Name, c.Image)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func image(p *corev1.Pod, name string) string {
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

func containerStatus(p *corev1.Pod, name string) corev1.ContainerStatus {
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if s.Name == name {
			return s
		}
	}
	return corev1.ContainerStatus{}
}

// appIDs records the app container's containerID per pod.
func appIDs(pods []corev1.Pod) map[string]string {
	ids := map[string]string{}
	for _, p := range pods {
		ids[p.Name] = containerStatus(&p, "mysql").ContainerID
	}
	return ids
}

// assertAppsUntouched fails if any app container restarted or was replaced
// since before was taken: a sidecar update must never restart the app.
func (f *fixture) assertAppsUntouched(before map[string]string) {
	f.t.Helper()
	for _, p := range f.pods() {
		st := containerStatus(&p, "mysql")
		if st.RestartCount != 0 || (before[p.Name] != "" && st.ContainerID != before[p.Name]) {
			f.t.Errorf("app container of %s restarted: restartCount %d, containerID %s (was %s)",
				p.Name, st.RestartCount, st.ContainerID, before[p.Name])
		}
	}
}

// restarts returns, per pod, the restartCount of the named container.
func restarts(pods []corev1.Pod, container string) map[string]int32 {
	out := map[string]int32{}
	for _, p := range pods {
		out[p.Name] = containerStatus(&p, container).RestartCount
	}
	return out
}

// assertNothingRestarted fails if any container of the fixture's pods
// restarted, sidecars included.
func (f *fixture) assertNothingRestarted() {
	f.t.Helper()
	for _, p := range f.pods() {
		for _, st := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if st.RestartCount != 0 {
				f.t.Errorf("pod %s: container %s restarted %d time(s), want none", p.Name, st.Name, st.RestartCount)
			}
		}
	}
}

func condition(st v1alpha1.SidecarSetStatus, t string) metav1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return metav1.ConditionUnknown
}

func setCondition(st v1alpha1.SidecarSetStatus, t string) *metav1.Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// occurrences is how many times an event was emitted. The events library
// folds a repeat of an event (same object, reason and action) into a series
// on the first one, keeping its message; the count lives in the series.
func occurrences(e corev1.Event) int {
	n := 1
	if e.Series != nil {
		n = max(n, int(e.Series.Count))
	}
	return max(n, int(e.Count))
}

// setEvents returns the events with reason on the fixture's SidecarSet.
// The set is cluster-scoped: its events are in namespace default.
func (f *fixture) setEvents(reason string) []corev1.Event {
	f.t.Helper()
	var out []corev1.Event
	for _, e := range events(f.t, metav1.NamespaceDefault, reason) {
		if e.InvolvedObject.Kind == "SidecarSet" && e.InvolvedObject.Name == f.set {
			out = append(out, e)
		}
	}
	return out
}

// setEventCount counts the occurrences of events with reason on the
// fixture's SidecarSet.
func (f *fixture) setEventCount(reason string) int {
	f.t.Helper()
	n := 0
	for _, e := range f.setEvents(reason) {
		n += occurrences(e)
	}
	return n
}

// podEvents counts, per pod of the fixture, the occurrences of events with
// reason.
func (f *fixture) podEvents(reason string) map[string]int {
	f.t.Helper()
	out := map[string]int{}
	for _, e := range events(f.t, f.ns, reason) {
		if e.InvolvedObject.Kind == "Pod" {
			out[e.InvolvedObject.Name] += occurrences(e)
		}
	}
	return out
}

// waitSetEvent waits for an event with reason on the fixture's SidecarSet
// and returns the events with that reason.
func (f *fixture) waitSetEvent(reason string) []corev1.Event {
	f.t.Helper()
	var got []corev1.Event
	err := wait.PollUntilContextTimeout(f.t.Context(), 100*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		got = f.setEvents(reason)
		return len(got) > 0, nil
	})
	if err != nil {
		f.t.Fatalf("wait for event %s on SidecarSet %s: %v", reason, f.set, err)
	}
	return got
}

// waitPodEvent waits for an event with reason on the named pod.
func (f *fixture) waitPodEvent(pod, reason string) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(f.t.Context(), 100*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return f.podEvents(reason)[pod] > 0, nil
	})
	if err != nil {
		f.t.Fatalf("wait for event %s on pod %s: %v", reason, pod, err)
	}
}

// events returns the events with reason on objects in ns.
func events(t testing.TB, ns, reason string) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	if err := env.Client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("list events: %v", err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func rawStrategic(patch []byte) client.Patch {
	return client.RawPatch(types.StrategicMergePatchType, patch)
}
