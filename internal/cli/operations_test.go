package cli_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/cli"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/manager"
)

// The tests in this file produce the situations docs/operations.md
// describes, and check the lines it quotes.

// stopManager stops the suite's manager, as when every replica is down,
// and returns the function that starts it again; the test's end starts it
// if the test did not.
func stopManager(t *testing.T) (start func()) {
	t.Helper()
	if err := sys.StopManager(); err != nil {
		t.Fatal(err)
	}
	started := false
	start = func() {
		t.Helper()
		if started {
			return
		}
		started = true
		if err := sys.StartManager(); err != nil {
			t.Fatalf("start the manager again: %v", err)
		}
	}
	t.Cleanup(start)
	return start
}

// TestManagerDown: with every manager replica down and the default
// failurePolicy Fail, a matching pod's creation is refused, while pods no
// set matches (other labels, or the set's labels in a namespace the set
// does not select) are created; so is any
// change to a SidecarSet (kubectl sidecarset exits 1, naming the webhook);
// status still reads the last status; once the manager is back, the same
// pod is created with its sidecar.
func TestManagerDown(t *testing.T) {
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 0)
	set.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: f.NS}}
	f.CreateSet(set)
	f.CreatePods(1, nil, nil)
	f.complete(1)
	start := stopManager(t)

	pod := f.NewPod("while-down")
	cluster.FitPod(&pod.Spec)
	err := env.Client.Create(t.Context(), pod.DeepCopy())
	if err == nil {
		t.Fatal("a pod was created while no manager served the webhook, with failurePolicy Fail")
	}
	t.Logf("create a pod: %v", err)
	mustContain(t, err.Error(), `Internal error occurred: failed calling webhook "pods.sidecarset.dev": failed to call webhook: Post "https://`, "/mutate-v1-pod?timeout=5s", "connect: connection refused")

	// The pod webhook is narrowed to what the SidecarSets can match: a pod
	// no set matches, in the same namespace or another, never waits on it.
	other := f.NewPod("unmatched")
	other.Labels = map[string]string{"example.com/app": "other"}
	cluster.FitPod(&other.Spec)
	if err := env.Client.Create(t.Context(), other); err != nil {
		t.Errorf("a pod no set matches was refused while the manager is down: %v", err)
	}
	away := fixture.New(t, cluster).NewPod("elsewhere")
	away.Labels = f.Labels
	cluster.FitPod(&away.Spec)
	if err := env.Client.Create(t.Context(), away); err != nil {
		t.Errorf("a pod with the set's labels in a namespace the set does not select was refused while the manager is down: %v", err)
	}

	r := kubectl(t, false, "rollout", "pause", f.Set)
	if r.err == nil || cli.ExitCode(r.err) != 1 {
		t.Fatalf("rollout pause while the manager is down: %v (exit %d), want exit 1", r.err, cli.ExitCode(r.err))
	}
	mustContain(t, r.err.Error(), "patch spec.updateStrategy of SidecarSet "+f.Set, `failed calling webhook "sidecarsets.sidecarset.dev"`, "connect: connection refused")

	r = ok(t, "status", f.Set)
	if got := row(t, r.out, f.Set); got[2] != "1" {
		t.Errorf("status while the manager is down: MATCHED %s, want the last status's 1", got[2])
	}

	start()
	f.CreatePod(pod)
	if got := f.Pod("while-down"); len(got.Spec.Containers) != 2 {
		t.Errorf("the pod created once the manager is back has %d containers, want 2 (its sidecar injected)", len(got.Spec.Containers))
	}
}

// setPodFailurePolicy sets the pod webhook's failurePolicy, as the chart's
// webhook.failurePolicy does, until the test ends.
func setPodFailurePolicy(t *testing.T, policy admissionregistrationv1.FailurePolicyType) {
	t.Helper()
	set := func(p admissionregistrationv1.FailurePolicyType) error {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "sidecarset-mutating"}, m); err != nil {
			return err
		}
		for i := range m.Webhooks {
			if m.Webhooks[i].Name == "pods.sidecarset.dev" {
				m.Webhooks[i].FailurePolicy = ptr.To(p)
			}
		}
		return env.Client.Update(context.Background(), m)
	}
	if err := set(policy); err != nil {
		t.Fatalf("set the pod webhook's failurePolicy to %s: %v", policy, err)
	}
	t.Cleanup(func() {
		if err := set(admissionregistrationv1.Fail); err != nil {
			t.Errorf("set the pod webhook's failurePolicy back to Fail: %v", err)
		}
	})
}

// TestWebhookDownIgnore: with failurePolicy Ignore and every manager
// replica down, a Deployment's pods are created without their sidecars;
// once the manager is back, status counts them as unmanaged, and
// restart-unmanaged rolls the Deployment so that its new pods carry them.
func TestWebhookDownIgnore(t *testing.T) {
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	setPodFailurePolicy(t, admissionregistrationv1.Ignore)
	start := stopManager(t)
	// The apiserver reads webhook configurations from its own watch: wait
	// until the new policy lets a pod through.
	probe := f.NewPod("probe")
	cluster.FitPod(&probe.Spec)
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return env.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll) == nil, nil
	})
	if err != nil {
		t.Fatalf("failurePolicy Ignore never took effect: %v", err)
	}

	f.Create(f.deployment("web", 2, nil))
	f.WaitReady(2)
	for _, p := range f.Pods() {
		if len(p.Spec.Containers) != 1 || p.Annotations[v1alpha1.AnnotationInjected] != "" {
			t.Errorf("pod %s created while the webhook was down: %d containers, injected %q; want the app alone",
				p.Name, len(p.Spec.Containers), p.Annotations[v1alpha1.AnnotationInjected])
		}
	}

	start()
	// Within one recount of the manager back: its first reconcile of the
	// set counts them.
	f.WaitStatusFor(controller.UnmanagedRecount, "2 unmanaged pods within one recount", func(st v1alpha1.SidecarSetStatus) bool { return st.UnmanagedPods == 2 })
	r := ok(t, "status", f.Set)
	if got := row(t, r.out, f.Set); got[2] != "0" || got[8] != "2" {
		t.Errorf("status: MATCHED %s UNMANAGED %s, want 0 and 2", got[2], got[8])
	}
	// Complete speaks of the pods the set manages only.
	mustContain(t, conditionRow(t, r.out, f.Set, "Complete"), "True", "0 of 0 pods updated and ready")
	r = ok(t, "restart-unmanaged", f.Set, "--timeout", "60s")
	mustContain(t, r.out,
		f.Set+": 2 unmanaged pods:",
		"Deployment "+f.NS+"/web (web-",
		"Deployment "+f.NS+"/web: rolled out: 2 of 2 replicas updated and available",
		"Deployment "+f.NS+"/web: all 2 pods carry SidecarSet "+f.Set,
		f.Set+": restarted 1 workload")
	f.WaitStatus("the restarted pods managed", func(st v1alpha1.SidecarSetStatus) bool {
		return st.UnmanagedPods == 0 && st.MatchedPods == 2 && st.UpdatedReadyPods == 2
	})
	r = ok(t, "status", f.Set)
	if got := row(t, r.out, f.Set); got[2] != "2" || got[8] != "0" {
		t.Errorf("status after restart-unmanaged: MATCHED %s UNMANAGED %s, want 2 and 0", got[2], got[8])
	}
}

// delaying holds every request for delay before sending it on, as a slow
// apiserver holds its answers, and counts them.
type delaying struct {
	next  http.RoundTripper
	delay time.Duration
	count *atomic.Int64
}

func (d delaying) RoundTrip(req *http.Request) (*http.Response, error) {
	d.count.Add(1)
	select {
	case <-time.After(d.delay):
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	return d.next.RoundTrip(req)
}

// TestSlowAPIServer: when every request of the manager takes a second more
// than it should, the webhook still injects new pods at once (it answers
// from its cache and makes no API call), the rollout goes on, only more
// slowly, and status -o wide shows the status behind the spec
// (OBSERVED) until the manager has written about the latest generation;
// status -w, slowed down as much, follows the rollout to its end.
func TestSlowAPIServer(t *testing.T) {
	const delay = time.Second
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.CreatePods(2, nil, nil)
	f.complete(2)

	var managerRequests atomic.Int64
	slow := rest.CopyConfig(env.Config)
	slow.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return delaying{next: rt, delay: delay, count: &managerRequests}
	})
	if err := sys.StopManager(); err != nil {
		t.Fatal(err)
	}
	mgrCtx, stopMgr := context.WithCancel(context.Background())
	opts := manager.DefaultOptions()
	opts.ShutdownDrain = time.Second
	_, done, err := env.StartManager(mgrCtx, slow, opts)
	if err != nil {
		stopMgr()
		t.Fatalf("start a manager behind a slow apiserver: %v", err)
	}
	t.Cleanup(func() {
		stopMgr()
		if err := <-done; err != nil {
			t.Errorf("manager behind a slow apiserver: %v", err)
		}
		if err := sys.StartManager(); err != nil {
			t.Errorf("start the suite's manager again: %v", err)
		}
	})

	// The first admission request may wait for the cache's informers to
	// start (a ready replica has them: /readyz waits for them); a dry run
	// warms them up before the pod that is timed.
	warm := f.NewPod("warm")
	cluster.FitPod(&warm.Spec)
	if err := env.Client.Create(t.Context(), warm, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	before := managerRequests.Load()
	began := time.Now()
	f.CreatePod(f.NewPod("p03"))
	took := time.Since(began)
	t.Logf("a pod created and injected in %v while each of the manager's requests takes %v more", took.Round(time.Millisecond), delay)
	if got := f.Pod("p03"); len(got.Spec.Containers) != 2 {
		t.Fatalf("pod p03 has %d containers, want its sidecar injected", len(got.Spec.Containers))
	}
	if took >= delay {
		t.Errorf("creating an injected pod took %v: the webhook waited on the slow apiserver", took)
	}
	f.WaitComplete(3)
	t.Logf("%d requests of the manager's were delayed until the new pod counted", managerRequests.Load()-before)

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	set := f.GetSet()
	wide := ok(t, "status", f.Set, "-o", "wide")
	mustContain(t, wide.out, "OBSERVED", fmt.Sprintf(" %d/%d ", set.Generation-1, set.Generation))

	began = time.Now()
	var cliRequests atomic.Int64
	r := executeWith(t, false, "", func(o *cli.Options) {
		o.ConfigFlags.WrapConfigFn = func(c *rest.Config) *rest.Config {
			c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
				return delaying{next: rt, delay: delay, count: &cliRequests}
			})
			return c
		}
	}, "status", f.Set, "-w", "--timeout", "3m")
	if r.err != nil {
		t.Fatalf("status -w behind a slow apiserver: %v", r.err)
	}
	mustContain(t, r.out,
		fmt.Sprintf("%s: waiting for the controller to report on generation %d", f.Set, set.Generation),
		f.Set+": 3/3 updated and ready; 3 updated, 0 not ready",
		f.Set+": rollout complete: 3 of 3 pods updated and ready")
	rolled := time.Since(began)
	t.Logf("3 pods rolled out in %v behind the slow apiserver; status -w made %d requests", rolled.Round(100*time.Millisecond), cliRequests.Load())
	// One pod at a time (maxUnavailable 1), each written by at least one
	// held patch: docs/operations.md quotes this bound.
	if rolled < 3*delay {
		t.Errorf("3 pods rolled out in %v, less than one held request per pod (%v each): the manager's requests were not slowed", rolled, delay)
	}
	if n := fixture.CountImage(f.Pods(), "exporter:v2"); n != 3 {
		t.Errorf("%d pods run exporter:v2, want 3", n)
	}
}

// TestStalledRolloutUndone: a new image that never pulls stalls the
// rollout after progressDeadlineSeconds; status shows Stalled=True
// (ProgressDeadlineExceeded) and the rollout paused by the controller, pods
// shows the pod stuck on the new image, an event RolloutStalled says why;
// rollout undo and rollout resume bring every pod back on the old image.
func TestStalledRolloutUndone(t *testing.T) {
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 0)
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = ptr.To[int32](2)
	f.CreateSet(set)
	f.CreatePods(2, nil, nil)
	f.complete(2)

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter-pull-fails:v2" })
	f.WaitSet("stalled and paused", func(s *v1alpha1.SidecarSet) bool {
		return s.Status.ObservedGeneration == s.Generation && s.Spec.UpdateStrategy.Paused &&
			fixture.Condition(s.Status, v1alpha1.ConditionStalled) == metav1.ConditionTrue
	})
	r := ok(t, "status", f.Set)
	// PAUSED is the column before INJECTION, the last.
	if got := row(t, r.out, f.Set); got[len(got)-2] != "true" {
		t.Errorf("status: PAUSED %s, want true", got[len(got)-2])
	}
	mustContain(t, conditionRow(t, r.out, f.Set, "Stalled"), "True", "ProgressDeadlineExceeded", "no progress within progressDeadlineSeconds (2s): 0 of 2 pods updated and ready; 1 updating")
	mustContain(t, conditionRow(t, r.out, f.Set, "Progressing"), "False", "Paused", "updateStrategy.paused is true")
	if strings.Contains(r.out, v1alpha1.ConditionReconciling) {
		t.Errorf("status shows Reconciling, which repeats Progressing for kstatus:\n%s", r.out)
	}

	// DECLARED, READY, STATE and REASON. The kubelet says ErrImagePull
	// first, then ImagePullBackOff between its pulls; the real node's
	// kubelet never pulls (imagePullPolicy Never) and says
	// ErrImageNeverPull, and may say it after the deadline has passed.
	pullFailures := []string{"exporter:ErrImagePull", "exporter:ImagePullBackOff", "exporter:ErrImageNeverPull"}
	var stuck []string
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		r = ok(t, "pods", f.Set)
		stuck = row(t, r.out, f.NS+"/p01")
		return stuck[8] != "<none>", nil
	})
	if err != nil {
		t.Errorf("pods: p01 never showed a reason: %v", err)
	}
	if got := strings.Join(stuck[3:4], " ") + " " + strings.Join(stuck[6:8], " "); got != "exporter-pull-fails:v2 false updating" || !slices.Contains(pullFailures, stuck[8]) {
		t.Errorf("pods: the first pod updated shows DECLARED, READY, STATE, REASON %q, want \"exporter-pull-fails:v2 false updating\" and one of %v", strings.Join(append([]string{got}, stuck[8]), " "), pullFailures)
	}
	if got := row(t, r.out, f.NS+"/p02")[8]; got != "<none>" {
		t.Errorf("pods: p02, on the old image, shows REASON %s, want <none>", got)
	}

	// A cluster-scoped object's events are kept in the namespace default:
	// kubectl get events -n default --field-selector involvedObject.name=NAME.
	events := &corev1.EventList{}
	if err := env.Client.List(t.Context(), events, client.InNamespace(metav1.NamespaceDefault), client.MatchingFields{"involvedObject.name": f.Set}); err != nil {
		t.Fatal(err)
	}
	var reasons []string
	found := false
	for _, e := range events.Items {
		reasons = append(reasons, e.Reason)
		if e.Reason == controller.ReasonRolloutStalled && e.Type == corev1.EventTypeWarning &&
			strings.Contains(e.Message, "rollout paused itself: no progress within progressDeadlineSeconds (2s)") {
			found = true
			t.Logf("event %s %s: %s", e.Type, e.Reason, e.Message)
		}
	}
	if !found {
		t.Errorf("no %s event on the set; its events: %v", controller.ReasonRolloutStalled, reasons)
	}

	r = ok(t, "rollout", "undo", f.Set)
	mustContain(t, r.out,
		"again: exporter=exporter:v1 (was exporter=exporter-pull-fails:v2)",
		"1 pod(s) go back, whatever the partition (0), at most 1 at a time: "+f.NS+"/p01",
		"updateStrategy.paused is true: nothing moves until `kubectl sidecarset rollout resume "+f.Set+"`")
	r = ok(t, "rollout", "resume", f.Set)
	mustContain(t, r.out, f.Set+": rollout resumed")
	r = ok(t, "status", f.Set, "-w", "--timeout", "60s")
	mustContain(t, r.out, f.Set+": rollout complete: 2 of 2 pods updated and ready")
	if n := fixture.CountImage(f.Pods(), "exporter:v1"); n != 2 {
		t.Errorf("%d pods run exporter:v1 after the undo, want 2:\n%s", n, f.Describe())
	}
}

// conditionRow returns the line of status's condition table for the set's
// condition cond.
func conditionRow(t *testing.T, out, set, cond string) string {
	t.Helper()
	for _, l := range lines(out) {
		if f := strings.Fields(l); len(f) > 1 && f[0] == set && f[1] == cond {
			return l
		}
	}
	t.Fatalf("no condition %s of %s in:\n%s", cond, set, out)
	return ""
}
