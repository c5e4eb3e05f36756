package integration

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/scope"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

const podWebhook = "pods.sidecarset.dev"

// podWebhookCalls reads from the apiserver's /metrics how many times it
// has called the pod webhook (apiserver_admission_webhook_request_total).
func podWebhookCalls(t *testing.T) float64 {
	t.Helper()
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(strings.TrimSuffix(env.Config.Host, "/") + "/metrics")
	if err != nil {
		t.Fatalf("read the apiserver's metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the apiserver's metrics: %v", err)
	}
	var n float64
	for _, m := range families["apiserver_admission_webhook_request_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "name" && l.GetValue() == podWebhook {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// podWebhookScope returns the pod webhook as the apiserver holds it.
func podWebhookScope(t *testing.T) admissionregistrationv1.MutatingWebhook {
	t.Helper()
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "sidecarset-mutating"}, cfg); err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.Webhooks {
		if w.Name == podWebhook {
			return w
		}
	}
	t.Fatalf("no webhook %s", podWebhook)
	return admissionregistrationv1.MutatingWebhook{}
}

// waitScope waits until the pod webhook's matchConditions satisfy cond.
func waitScope(t *testing.T, what string, cond func(expression string) bool) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, mc := range podWebhookScope(t).MatchConditions {
			if mc.Name == scope.ConditionMatched {
				last = mc.Expression
				return cond(last), nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("wait for the pod webhook's scope %s: %v\nlast: %s", what, err, last)
	}
}

// TestWebhookScope: the manager keeps the pod webhook to what the
// SidecarSets can match. Pods that no set can match are created without
// the apiserver calling the webhook at all (its own request counter does
// not move); a matching pod is injected; once the set is gone, its labels
// leave the scope. The scope of 200 sets is accepted by the apiserver.
func TestWebhookScope(t *testing.T) {
	f := newFixture(t)
	label := fmt.Sprintf("%q", f.NS)
	set := f.SidecarSet("exporter:v1", 0)
	f.CreateSet(set)
	// The set's status is written after the scope: it is in there already.
	mustHave := podWebhookScope(t)
	if !strings.Contains(fmt.Sprint(mustHave.MatchConditions), label) {
		t.Fatalf("the pod webhook's matchConditions do not name the set's labels (%s) once its status is written: %+v", label, mustHave.MatchConditions)
	}
	if mustHave.NamespaceSelector == nil || !strings.Contains(mustHave.NamespaceSelector.String(), "sidecarset-system") {
		t.Errorf("the pod webhook's namespaceSelector lost the exclusion of the manager's namespace: %v", mustHave.NamespaceSelector)
	}

	before := podWebhookCalls(t)
	const unmatched = 20
	for i := range unmatched {
		pod := f.NewPod(fmt.Sprintf("other-%02d", i))
		pod.Labels = map[string]string{"example.com/app": "other"}
		f.CreatePod(pod)
	}
	for _, p := range f.Pods() {
		if len(p.Spec.Containers) != 1 {
			t.Errorf("pod %s, which no set matches, has %d containers", p.Name, len(p.Spec.Containers))
		}
	}
	if got := podWebhookCalls(t) - before; got != 0 {
		t.Errorf("%d pods no set can match caused %v calls of the pod webhook, want 0", unmatched, got)
	}
	t.Logf("%d pods no set can match: %v webhook calls", unmatched, podWebhookCalls(t)-before)

	before = podWebhookCalls(t)
	f.CreatePod(f.NewPod("matched"))
	if got := f.Pod("matched"); len(got.Spec.Containers) != 2 {
		t.Errorf("the matching pod has %d containers, want its sidecar too", len(got.Spec.Containers))
	}
	if got := podWebhookCalls(t) - before; got < 1 {
		t.Errorf("a matching pod caused %v calls of the pod webhook, want at least 1", got)
	}

	if err := env.Client.Delete(t.Context(), set); err != nil {
		t.Fatal(err)
	}
	waitScope(t, "without the deleted set", func(expr string) bool { return !strings.Contains(expr, label) })

	// The apiserver's own validation (CEL compilation and cost) of the
	// scope of 200 sets, as a server-side dry run.
	sets := make([]*v1alpha1.SidecarSet, 200)
	for i := range sets {
		sets[i] = testutil.SidecarSet(fmt.Sprintf("s%03d", i)).
			Selector(map[string]string{"example.com/app": fmt.Sprintf("app-%03d", i), "example.com/tier": "db"}).
			NamespaceSelector(map[string]string{"example.com/team": fmt.Sprintf("team-%d", i%7)}).Obj()
	}
	sc := scope.Of(sets, []string{"kube-system", "sidecarset-system"})
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "sidecarset-mutating"}, cfg); err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Webhooks {
		if cfg.Webhooks[i].Name == podWebhook {
			cfg.Webhooks[i].NamespaceSelector, cfg.Webhooks[i].ObjectSelector, cfg.Webhooks[i].MatchConditions = sc.NamespaceSelector, sc.ObjectSelector, sc.MatchConditions
		}
	}
	if err := env.Client.Update(t.Context(), cfg, client.DryRunAll); err != nil {
		t.Errorf("the apiserver refuses the scope of 200 sets (%d bytes of CEL): %v", len(sc.MatchConditions[0].Expression), err)
	}
}

// TestWebhookScopeWindow: a set created together with its pods, without
// waiting for the manager: pods are created one after another from just
// before the set is created until a while after. Each pod created before
// the webhook's scope took the set in is created without it; none is lost:
// every pod is either injected or counted in unmanagedPods, within one
// recount.
func TestWebhookScopeWindow(t *testing.T) {
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 0)
	cluster.FitSet(set)
	stop := make(chan struct{})
	created := make(chan error, 1)
	// when each pod's creation returned, by name; written before created.
	at := map[string]time.Time{}
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				created <- nil
				return
			case <-time.After(20 * time.Millisecond):
			}
			pod := f.NewPod(fmt.Sprintf("p%03d", i))
			cluster.FitPod(&pod.Spec)
			if err := f.Client.Create(context.Background(), pod); err != nil {
				created <- fmt.Errorf("create pod %s: %w", pod.Name, err)
				return
			}
			at[pod.Name] = time.Now()
		}
	}()
	if err := f.Client.Create(t.Context(), set); err != nil {
		t.Fatal(err)
	}
	setCreated := time.Now()
	t.Cleanup(func() { _ = f.Client.Delete(context.Background(), set) })
	time.Sleep(time.Second)
	close(stop)
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	f.Gen = set.Generation
	injected, window, pods := int32(0), 0, f.Pods()
	n := int32(len(pods))
	for _, p := range pods {
		switch {
		case strings.Contains(p.Annotations[v1alpha1.AnnotationInjected], f.Set):
			injected++
		case at[p.Name].After(setCreated):
			window++
		}
	}
	t.Logf("%d pods: %d injected, %d created without the set after it was created (the window), %d before or while it was",
		n, injected, window, int(n-injected)-window)
	if injected == 0 || window == 0 {
		t.Logf("no pod on one side of the window: the test shows less than it can")
	}
	f.WaitStatusFor(controller.UnmanagedRecount+30*time.Second, fmt.Sprintf("%d matched and %d unmanaged", injected, n-injected), func(st v1alpha1.SidecarSetStatus) bool {
		return st.MatchedPods == injected && st.UnmanagedPods == n-injected
	})
	// From now on, a new pod goes through the webhook.
	f.CreatePod(f.NewPod("after"))
	if got := f.Pod("after"); !strings.Contains(got.Annotations[v1alpha1.AnnotationInjected], f.Set) {
		t.Errorf("a pod created once the set's status is written was not injected: annotations %v", got.Annotations)
	}
}

// TestWebhookScopeOptOut: a pod opted out with sidecarset.dev/inject:
// "false" never reaches the webhook, and is counted unmanaged.
func TestWebhookScopeOptOut(t *testing.T) {
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	before := podWebhookCalls(t)
	pod := f.NewPod("opted-out")
	pod.Annotations = map[string]string{v1alpha1.AnnotationInject: "false"}
	f.CreatePod(pod)
	if got := podWebhookCalls(t) - before; got != 0 {
		t.Errorf("an opted-out pod caused %v calls of the pod webhook, want 0", got)
	}
	labels := maps.Clone(f.Labels)
	if got := f.Pod("opted-out"); len(got.Spec.Containers) != 1 || !maps.Equal(got.Labels, labels) {
		t.Errorf("the opted-out pod was changed: %d containers, labels %v", len(got.Spec.Containers), got.Labels)
	}
}
