package manager_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/manager"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

// replica is one manager, as one pod of the chart's Deployment runs it:
// webhooks on a port of its own, /readyz on another.
type replica struct {
	name   string
	addr   string
	readyz string
	cancel context.CancelFunc
	// exited is closed once the manager's Start has returned err.
	exited chan struct{}
	err    error
}

// stop stops the manager as SIGTERM does and returns how it ended; it may
// be called more than once.
func (r *replica) stop() error {
	r.cancel()
	<-r.exited
	return r.err
}

// startReplica starts a manager with opts (its ports replaced) serving the
// webhooks with envtest's certificate on webhookPort, or on a free port if
// 0; it stops with the test unless stopped before.
func startReplica(t *testing.T, env *testenv.Env, name string, webhookPort int, opts manager.Options) *replica {
	t.Helper()
	var err error
	if webhookPort == 0 {
		if webhookPort, err = freePort(); err != nil {
			t.Fatal(err)
		}
	}
	probePort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	opts.WebhookHost, opts.WebhookPort, opts.CertDir = "127.0.0.1", webhookPort, env.Webhooks.LocalServingCertDir
	opts.ProbeAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(probePort))
	opts.MetricsAddr = "0"
	opts.SeveralPerProcess = true
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.Namespace}}
	if err := env.Client.Create(t.Context(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	mgr, err := manager.New(env.Config, opts)
	if err != nil {
		t.Fatalf("replica %s: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{
		name:   name,
		addr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(webhookPort)),
		readyz: "http://" + opts.ProbeAddr + "/readyz",
		cancel: cancel,
		exited: make(chan struct{}),
	}
	go func() {
		r.err = mgr.Start(ctx)
		close(r.exited)
	}()
	t.Cleanup(func() { _ = r.stop() })
	return r
}

// ready reports whether the replica's /readyz answers 200.
func (r *replica) ready() bool { return r.readyzStatus() == http.StatusOK }

// readyzStatus returns the status /readyz answers, 0 when it does not.
func (r *replica) readyzStatus() int {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(r.readyz)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// endpoint is the replica as the stand-in Service sees it.
func (r *replica) endpoint() testenv.Endpoint {
	return testenv.Endpoint{Name: r.name, Addr: r.addr, Readyz: r.readyz, Exited: r.exited}
}

// startService starts the stand-in for the chart's webhook Service where
// envtest's webhook configurations send the apiserver; it stops with the
// test.
func startService(t *testing.T, env *testenv.Env) *testenv.Service {
	t.Helper()
	svc, err := testenv.StartService(net.JoinHostPort(env.Webhooks.LocalServingHost, strconv.Itoa(env.Webhooks.LocalServingPort)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Stop)
	return svc
}

// load creates pods without pause, one after another, and counts what
// became of them.
type load struct {
	stop chan struct{}
	done chan struct{}

	created, notInjected atomic.Int64
	mu                   sync.Mutex
	failures             []error
}

// startLoad creates a pod of the labels every interval in namespace; each
// must come back with the sidecar container exporter injected.
func startLoad(c client.Client, namespace string, labels map[string]string, interval time.Duration) *load {
	l := &load{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("p-%04d", i), Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := c.Create(ctx, pod)
			cancel()
			if err != nil {
				l.mu.Lock()
				l.failures = append(l.failures, fmt.Errorf("%s at %s: %w", pod.Name, time.Now().Format(time.StampMilli), err))
				l.mu.Unlock()
				continue
			}
			l.created.Add(1)
			if len(pod.Spec.Containers) != 2 {
				l.notInjected.Add(1)
			}
		}
	}()
	return l
}

func (l *load) finish() {
	close(l.stop)
	<-l.done
}

// webhookSet creates the SidecarSet whose injection shows that our webhook
// answered each pod, and waits until the webhooks inject it.
func webhookSet(t *testing.T, env *testenv.Env, namespace string, labels map[string]string) {
	t.Helper()
	ctx := t.Context()
	pol := admissionregistrationv1.Fail
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "sidecarset-mutating"}, mutating); err != nil {
		t.Fatal(err)
	}
	for _, w := range mutating.Webhooks {
		if w.Name == "pods.sidecarset.dev" && ptr.Deref(w.FailurePolicy, "") != pol {
			t.Fatalf("the pod webhook's failurePolicy is %v; this test means %s", w.FailurePolicy, pol)
		}
	}
	create(t, env, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
	create(t, env, &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "drain"},
		Spec: v1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: labels},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: "exporter", Image: "exporter:v1"}}},
		},
	})
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		probe := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "probe", Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
		}
		if err := env.Client.Create(ctx, probe, client.DryRunAll); err != nil {
			return false, nil //nolint:nilerr // not yet: the poll tries again
		}
		return len(probe.Spec.Containers) == 2, nil
	})
	if err != nil {
		t.Fatalf("wait for injection: %v", err)
	}
}

// TestRollingRestartLosesNoPodCreate: pods are created without pause,
// through the real apiserver and the pod webhook with failurePolicy Fail,
// while both replicas of the chart's Deployment are replaced one after the
// other as a rolling update does (maxSurge 1, maxUnavailable 0: a new
// replica ready, then an old one stopped), twice. Every create succeeds with
// the sidecar injected: a stopping replica reports not ready at once and
// keeps serving until the Service has stopped sending it connections.
//
// The apiserver holds one HTTP/2 connection to the webhooks and dials again
// only when the replica at its other end stops; whether that new connection
// lands on the stopping replica is chance, as in a cluster. Without the
// drain this test therefore fails only in some runs; TestShutdownDrain
// checks the drain itself on every run.
func TestRollingRestartLosesNoPodCreate(t *testing.T) {
	env := startEnv(t)
	svc := startService(t, env)
	opts := manager.DefaultOptions()
	if drain := opts.ShutdownDrain; drain < svc.ProbePeriod+svc.Propagation {
		t.Errorf("the default drain %s is shorter than this test's endpoint removal (probe %s, propagation %s)", drain, svc.ProbePeriod, svc.Propagation)
	}
	replicas := []*replica{startReplica(t, env, "a", 0, opts), startReplica(t, env, "b", 0, opts)}
	endpoints := map[*replica]*testenv.Endpoint{}
	for _, r := range replicas {
		endpoints[r] = svc.Add(r.endpoint())
		if err := svc.WaitReady(t.Context(), endpoints[r]); err != nil {
			t.Fatal(err)
		}
	}
	labels := map[string]string{"app": "drain"}
	webhookSet(t, env, "drain", labels)

	started := time.Now()
	l := startLoad(env.Client, "drain", labels, 150*time.Millisecond)
	time.Sleep(time.Second)
	for i := range 4 {
		r := replicas[i]
		fresh := startReplica(t, env, fmt.Sprintf("%s%d", r.name[:1], i/2+2), 0, opts)
		replicas = append(replicas, fresh)
		endpoints[fresh] = svc.Add(fresh.endpoint())
		if err := svc.WaitReady(t.Context(), endpoints[fresh]); err != nil {
			t.Fatal(err)
		}
		// The pod's deletion: SIGTERM, and the endpoint's removal on its
		// way.
		stopped := time.Now()
		svc.Remove(endpoints[r])
		if err := r.stop(); err != nil {
			t.Errorf("replica %s stopped with %v", r.name, err)
		}
		t.Logf("replica %s stopped in %s", r.name, time.Since(stopped).Round(time.Millisecond))
	}
	time.Sleep(time.Second)
	l.finish()
	// The last two together: each takes its drain.
	var stopping sync.WaitGroup
	for _, r := range replicas[len(replicas)-2:] {
		stopping.Go(func() { _ = r.stop() })
	}
	stopping.Wait()

	elapsed := time.Since(started)
	t.Logf("%d pods created in %s, %d failed", l.created.Load(), elapsed.Round(time.Millisecond), len(l.failures))
	for _, err := range l.failures {
		t.Errorf("create failed: %v", err)
	}
	if n := l.notInjected.Load(); n > 0 {
		t.Errorf("%d pods created without the sidecar: a webhook answered from an empty cache", n)
	}
	// At least half the pace asked for, so that the creates did run
	// throughout.
	if want := int64(elapsed / 300 / time.Millisecond); l.created.Load() < want {
		t.Errorf("%d pods created in %s, want at least %d", l.created.Load(), elapsed, want)
	}
}

// TestShutdownDrain: told to stop, the manager reports not ready at once,
// answers the apiserver's webhook calls for the drain, then stops within
// its graceful-shutdown timeout and gives up its Lease, so that another
// replica leads at once rather than when the Lease expires.
func TestShutdownDrain(t *testing.T) {
	env := startEnv(t)
	ctx := t.Context()
	opts := manager.DefaultOptions()
	opts.ShutdownDrain = 3 * time.Second
	// The apiserver calls this replica's port itself: an endpoint that is
	// never removed, the longest a Service may take.
	r := startReplica(t, env, "a", env.Webhooks.LocalServingPort, opts)
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return r.ready(), nil
	})
	if err != nil {
		t.Fatalf("the manager never became ready: %v", err)
	}
	labels := map[string]string{"app": "drain"}
	webhookSet(t, env, "drain", labels)
	lease := &coordinationv1.Lease{}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: opts.Namespace, Name: manager.LeaderElectionID}, lease)
		return err == nil && ptr.Deref(lease.Spec.HolderIdentity, "") != "", client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("the manager never led: %v", err)
	}

	stopped := time.Now()
	r.cancel()
	// Not ready, and saying so: the probe server runs on.
	status := 0
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 500*time.Millisecond, true, func(context.Context) (bool, error) {
		status = r.readyzStatus()
		return status == http.StatusInternalServerError, nil
	})
	if err != nil {
		t.Errorf("/readyz answers %d %s after the stop, want %d", status, time.Since(stopped).Round(time.Millisecond), http.StatusInternalServerError)
	}
	// Webhook calls through the apiserver until shortly before the drain
	// ends.
	calls := 0
	for time.Since(stopped) < opts.ShutdownDrain-500*time.Millisecond {
		probe := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "drain", Name: "probe", Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
		}
		if err := env.Client.Create(ctx, probe, client.DryRunAll); err != nil {
			t.Fatalf("pod create %s after the stop, within the drain of %s: %v", time.Since(stopped).Round(time.Millisecond), opts.ShutdownDrain, err)
		}
		if len(probe.Spec.Containers) != 2 {
			t.Fatalf("pod created %s after the stop without the sidecar", time.Since(stopped).Round(time.Millisecond))
		}
		calls++
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case <-r.exited:
		if r.err != nil {
			t.Errorf("the manager stopped with %v", r.err)
		}
	case <-time.After(opts.ShutdownDrain + opts.GracefulShutdown):
		t.Fatalf("the manager still runs %s after the stop, past its drain %s and graceful shutdown %s", time.Since(stopped), opts.ShutdownDrain, opts.GracefulShutdown)
	}
	took := time.Since(stopped)
	t.Logf("%d webhook calls answered during the drain; stopped in %s", calls, took.Round(time.Millisecond))
	if took < opts.ShutdownDrain {
		t.Errorf("the manager stopped %s after the stop, before its drain of %s", took, opts.ShutdownDrain)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != "" {
		t.Errorf("Lease %s still held by %s after the manager stopped", lease.Name, h)
	}
}
