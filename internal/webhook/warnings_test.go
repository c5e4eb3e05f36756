package webhook_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/webhook"
)

// warningClient returns a client whose requests' admission warnings w
// collects.
func warningClient(t *testing.T) (client.Client, *warnings) {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// take returns the warnings collected so far and forgets them.
func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	msgs := w.msgs
	w.msgs = nil
	return msgs
}

// resources are requests equal to limits: no warning about the sidecar's
// resources, and a Guaranteed container.
func resources() corev1.ResourceRequirements {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
	return corev1.ResourceRequirements{Requests: rl, Limits: rl}
}

const (
	digestImage = "registry.example/exporter@sha256:0f5e8a1c0c5a3b9b5f0d2c6c1e7a9b4d3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c"
	tagNote     = ` is a tag, not a digest (@sha256:...): a re-pushed tag makes pods of one revision run different images`
	noResources = ` has no resource requests or limits: the scheduler reserves nothing for it and nothing caps what it uses, unless the pod declares pod-level resources`
	// noProbe is said with the default minReadySeconds.
	noProbe = ` has no readiness probe: it is Ready as soon as it runs, so in a rollout only updateStrategy.minReadySeconds (10) holds a pod whose new image fails soon after it starts; add a probe that says the sidecar serves`
)

// catVersion is a readiness probe: no warning about the sidecar's
// readiness.
func catVersion() *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/version"}}}}
}

// TestSidecarSetWarningsOnApply creates and updates a SidecarSet as kubectl
// apply does: the set's own warnings come back with their field paths when
// it is created and when what it puts into pods changes, not when only its
// rollout changes.
func TestSidecarSetWarningsOnApply(t *testing.T) {
	ctx := t.Context()
	c, w := warningClient(t)
	set := sidecarSet("warned-exporter", map[string]string{"example.com/mysql": "warned"},
		corev1.Container{Name: "exporter", Image: "exporter:1"},
		corev1.Container{Name: "pinned", Image: digestImage, Resources: resources(), ReadinessProbe: catVersion()})
	set.Spec.InitContainers = []v1alpha1.SidecarContainer{{Container: corev1.Container{
		Name: "mesh-init", Image: "mesh:2", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: resources()}}}
	if err := c.Create(ctx, set); err != nil {
		t.Fatalf("create SidecarSet: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), set) })
	want := []string{
		`spec.containers[0].resources: container "exporter"` + noResources,
		`spec.containers[0].image: image "exporter:1" of container "exporter"` + tagNote,
		`spec.containers[0].readinessProbe: container "exporter"` + noProbe,
		`spec.initContainers[0].image: image "mesh:2" of container "mesh-init"` + tagNote,
		`spec.initContainers[0].readinessProbe: container "mesh-init"` + noProbe,
	}
	if diff := cmp.Diff(want, w.take(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("warnings on create (-want +got):\n%s", diff)
	}

	// Merge patches, as kubectl apply sends: the controller writes the
	// set's status meanwhile.
	base := set.DeepCopy()
	set.Spec.Containers[0].Image = "exporter:2"
	set.Spec.Containers[0].Resources = resources()
	if err := c.Patch(ctx, set, client.MergeFrom(base)); err != nil {
		t.Fatalf("update the exporter's image: %v", err)
	}
	want = []string{
		`spec.containers[0].image: image "exporter:2" of container "exporter"` + tagNote,
		`spec.containers[0].readinessProbe: container "exporter"` + noProbe,
		`spec.initContainers[0].image: image "mesh:2" of container "mesh-init"` + tagNote,
		`spec.initContainers[0].readinessProbe: container "mesh-init"` + noProbe,
	}
	if diff := cmp.Diff(want, w.take(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("warnings on an update of the containers (-want +got):\n%s", diff)
	}

	base = set.DeepCopy()
	set.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("50%"))
	if err := c.Patch(ctx, set, client.MergeFrom(base)); err != nil {
		t.Fatalf("update the partition: %v", err)
	}
	if got := w.take(); len(got) != 0 {
		t.Errorf("warnings on an update of the partition only: %q, want none", got)
	}

	// A refused set still says what else is wrong with it.
	bad := sidecarSet("warned-bad", map[string]string{},
		corev1.Container{Name: "exporter", Image: "exporter:1", Resources: resources(), ReadinessProbe: catVersion()})
	if err := c.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "spec.selector") {
		t.Errorf("create of a set with an empty selector = %v, want refused naming spec.selector", err)
	}
	if diff := cmp.Diff([]string{`spec.containers[0].image: image "exporter:1" of container "exporter"` + tagNote}, w.take()); diff != "" {
		t.Errorf("warnings on a refused create (-want +got):\n%s", diff)
	}
}

// TestPodSecurityWarningOnApply: a privileged sidecar is accepted with a
// warning, through the apiserver, that says what Pod Security baseline
// forbids and what happens to pods in namespaces that enforce it.
func TestPodSecurityWarningOnApply(t *testing.T) {
	c, w := warningClient(t)
	set := sidecarSet("warned-privileged", map[string]string{"example.com/mysql": "warned-privileged"},
		corev1.Container{Name: "netdebug", Image: digestImage, Resources: resources(), ReadinessProbe: catVersion(),
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}})
	if err := c.Create(t.Context(), set); err != nil {
		t.Fatalf("create SidecarSet: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), set) })
	want := []string{`spec.containers[0]: Pod Security "baseline:latest" forbids container "netdebug" (privileged (container "netdebug" must not set securityContext.privileged=true)): ` +
		`in namespaces that enforce baseline or restricted, where the apiserver would refuse such pods, the webhook leaves this SidecarSet out of them (skippedPods)`}
	if diff := cmp.Diff(want, w.take()); diff != "" {
		t.Errorf("warnings on create (-want +got):\n%s", diff)
	}
}

// TestPodCreateCarriesNoSetWarnings creates pods through the real
// apiserver: a set's own warnings never come with them, and a pod from a
// set that draws none, which changes nothing else about the pod, gets no
// warning at all.
func TestPodCreateCarriesNoSetWarnings(t *testing.T) {
	ns := namespace(t, nil)
	cases := []struct {
		name, set string
		sidecar   corev1.Container
	}{
		{"a set with warnings of its own", "set-warnings-tagged", corev1.Container{Name: "exporter", Image: "exporter:1"}},
		{"a clean set", "set-warnings-clean", corev1.Container{Name: "exporter", Image: digestImage, Resources: resources()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			labels := map[string]string{"example.com/mysql": tc.set}
			set := sidecarSet(tc.set, labels, tc.sidecar)
			createSet(t, set)
			// Requests only: Burstable with the sidecar or without it.
			app := corev1.Container{Name: "mysql", Image: "mysql:8.4", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}
			if tc.sidecar.Resources.Requests == nil {
				// A BestEffort sidecar leaves a BestEffort pod BestEffort.
				app.Resources = corev1.ResourceRequirements{}
			}
			pod, w := createPod(t, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: set.Name, Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{app}},
			})
			if pod.Annotations[v1alpha1.AnnotationInjected] != set.Name {
				t.Fatalf("pod not injected: annotations %v", pod.Annotations)
			}
			if got := w.all(); got != "" {
				t.Errorf("pod create warnings %q, want none", got)
			}
		})
	}
}

// notes records the messages of the events the pod mutator sends, as they
// leave it: the recorder that writes them to the apiserver folds a repeat
// within minutes into the earlier event's series, which this test cannot
// wait out.
type notes struct {
	mu   sync.Mutex
	sent []string
}

func (n *notes) Eventf(regarding, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	name := regarding.(client.Object).GetName()
	n.sent = append(n.sent, fmt.Sprintf("%s %s %s %s: ", eventtype, reason, action, name)+fmt.Sprintf(note, args...))
}

// TestPodWarningEventsCountPods admits pods of a Job-like template through
// the pod mutator, the set keeping its regular sidecar regular (jobPods
// Keep): each gets the warning, and the set gets one event per interval that
// counts the pods it stands for.
func TestPodWarningEventsCountPods(t *testing.T) {
	labels := map[string]string{"example.com/mysql": "counted-events"}
	set := sidecarSet("counted-events", labels, corev1.Container{Name: "exporter", Image: digestImage, Resources: resources()})
	set.Spec.JobPods = v1alpha1.JobPodsKeep
	createSet(t, set)
	ns := namespace(t, nil)
	mutator, _ := countingMutator(t)
	sent := &notes{}
	mutator.Recorder = sent
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	mutator.Clock = clock

	neverCompletes := `SidecarSet "counted-events" container "exporter" is a regular container in a pod with restartPolicy Never`
	admit := func(name string) {
		t.Helper()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "job", Image: "job:1", Resources: resources()}}},
		}
		resp := mutator.Handle(t.Context(), podRequest(t, ns, pod))
		if !resp.Allowed || len(resp.Patches) == 0 {
			t.Fatalf("admit %s: allowed %v, result %v; want the sidecar injected", name, resp.Allowed, resp.Result)
		}
		if len(resp.Warnings) != 1 || !strings.HasPrefix(resp.Warnings[0], neverCompletes) {
			t.Errorf("admit %s: warnings %q, want only the one about restartPolicy Never", name, resp.Warnings)
		}
	}
	admit("p0")
	for _, name := range []string{"p1", "p2", "p3"} {
		clock.SetTime(clock.Now().Add(time.Second))
		admit(name)
	}
	clock.SetTime(clock.Now().Add(webhook.EventInterval))
	admit("p4")

	const tail = `, which never completes while it runs: set the SidecarSet's jobPods to NativeSidecar, or declare the container under initContainers with restartPolicy: Always`
	want := []string{
		"Warning InjectionWarning Inject counted-events: pod " + ns + "/p0: " + neverCompletes + tail,
		"Warning InjectionWarning Inject counted-events: pod " + ns + "/p4: " + neverCompletes + tail + " (4 pods since the last event)",
	}
	if diff := cmp.Diff(want, sent.sent); diff != "" {
		t.Errorf("events on the set (-want +got):\n%s", diff)
	}
}

// TestEventRecorderFoldsRepeats shows why EventInterval is as long as it
// is: client-go's events.k8s.io recorder, which the manager uses, stores a
// second event about one set with the same reason and action, sent soon
// after the first, as a repeat of the first, keeping the first's message.
func TestEventRecorderFoldsRepeats(t *testing.T) {
	set := sidecarSet("folded-events", map[string]string{"example.com/mysql": "folded-events"},
		corev1.Container{Name: "exporter", Image: digestImage, Resources: resources()})
	createSet(t, set)
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: kubernetes.NewForConfigOrDie(env.Config).EventsV1()})
	stop := make(chan struct{})
	b.StartRecordingToSink(stop)
	t.Cleanup(func() { close(stop); b.Shutdown() })
	rec := b.NewRecorder(env.Scheme, "sidecarset-webhook-test")

	rec.Eventf(set, nil, corev1.EventTypeWarning, inject.ReasonInjectionWarning, "Inject", "pod shop/p0: first")
	ev := waitSetEvent(t, set.Name, inject.ReasonInjectionWarning)
	rec.Eventf(set, nil, corev1.EventTypeWarning, inject.ReasonInjectionWarning, "Inject", "pod shop/p1: second (2 pods since the last event)")
	var got []corev1.Event
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got = setEvents(t, set.Name, inject.ReasonInjectionWarning)
		return len(got) == 1 && got[0].Series != nil, nil
	})
	if err != nil {
		t.Fatalf("want the first event with a series of 2, got %+v", got)
	}
	if got[0].Name != ev.Name || got[0].Message != "pod shop/p0: first" || got[0].Series.Count != 2 {
		t.Errorf("event %s %q series %d, want %s %q series 2", got[0].Name, got[0].Message, got[0].Series.Count, ev.Name, "pod shop/p0: first")
	}
}
