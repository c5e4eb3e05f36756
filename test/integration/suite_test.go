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
	"sync"
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
	"github.com/sidecarset/sidecarset/internal/kubeletsim"
	"github.com/sidecarset/sidecarset/internal/manager"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

var (
	env *testenv.Env

	mgrMu     sync.Mutex
	mgrCancel context.CancelFunc
	mgrDone   <-chan error
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	testenv.SetLogger()
	hooks, err := testenv.WebhookOptions("")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env, err = testenv.Start(testenv.Options{ControllerManager: true, Webhooks: hooks})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the control plane:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop the control plane:", err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	sim, err := kubeletsim.New(env.Config, kubeletsim.Options{
		Nodes:        3,
		BackOff:      200 * time.Millisecond,
		MaxBackOff:   time.Second,
		CrashesAfter: 200 * time.Millisecond,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() { _ = sim.Run(ctx) }()
	if err := sim.Ready(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "start the simulated nodes:", err)
		return 1
	}
	if err := startManager(); err != nil {
		fmt.Fprintln(os.Stderr, "start the manager:", err)
		return 1
	}
	defer stopManager()
	return m.Run()
}

func startManager() error {
	mgrMu.Lock()
	defer mgrMu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	opts := manager.DefaultOptions()
	// Fixed metrics and probe ports would collide with any other suite
	// running on the machine at the same time.
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	_, done, err := env.StartManager(ctx, nil, opts)
	if err != nil {
		cancel()
		return err
	}
	mgrCancel, mgrDone = cancel, done
	return nil
}

func stopManager() {
	mgrMu.Lock()
	defer mgrMu.Unlock()
	mgrCancel()
	<-mgrDone
}

// fixture is one test's namespace, pod labels and SidecarSet name, so tests
// never see each other's pods.
type fixture struct {
	t      *testing.T
	ns     string
	labels map[string]string
	set    string
	// gen is the SidecarSet's generation after the test's last write;
	// waitStatus waits for a status that observed it.
	gen int64
}

func newFixture(t *testing.T) *fixture {
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
		labels := map[string]string{}
		for k, v := range f.labels {
			labels[k] = v
		}
		for k, v := range extra {
			labels[k] = v
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("p%02d", i), Labels: labels, Annotations: annotations},
			Spec: corev1.PodSpec{
				Containers:                    []corev1.Container{{Name: "mysql", Image: "mysql:8.4"}},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
			},
		}
		if err := env.Client.Create(f.t.Context(), pod); err != nil {
			f.t.Fatalf("create pod: %v", err)
		}
	}
	f.waitPods("all pods Ready", func(pods []corev1.Pod) bool {
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

func (f *fixture) waitStatus(what string, cond func(v1alpha1.SidecarSetStatus) bool) v1alpha1.SidecarSetStatus {
	f.t.Helper()
	var st v1alpha1.SidecarSetStatus
	err := wait.PollUntilContextTimeout(f.t.Context(), 100*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		st = f.getSet().Status
		return st.ObservedGeneration >= f.gen && cond(st), nil
	})
	if err != nil {
		f.t.Fatalf("wait for %s: %v\nstatus: %+v\n%s", what, err, st, f.describe())
	}
	return st
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

func condition(st v1alpha1.SidecarSetStatus, t string) metav1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return metav1.ConditionUnknown
}

// events returns the messages of events with reason on objects in ns (""
// for cluster-scoped objects' events in default).
func events(t *testing.T, ns, reason string) []corev1.Event {
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
