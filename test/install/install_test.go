//go:build e2e

// Package install installs charts/sidecarset on the real node as a user
// installs it: the manager's image imported into containerd, the chart
// through Helm's own install action with no value but the pull policy, two
// manager pods scheduled by kube-scheduler, reaching the apiserver through
// the `kubernetes` Service and called by it through the chart's webhook
// Service. Rollouts then run against that manager, one of its pods is
// killed during one, and `helm uninstall` must leave nothing behind but
// what Helm keeps by its own rules.
package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/manager"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

const (
	chartDir = "../../charts/sidecarset"
	// release and namespace are what the README's install command uses.
	release   = "sidecarset"
	namespace = "sidecarset-system"
	// deployment is the chart's manager Deployment.
	deployment = "sidecarset-manager"
)

// TestMain sends the control-plane client's logs to stderr (errors only,
// see testenv.SetLogger).
func TestMain(m *testing.M) {
	testenv.SetLogger()
	os.Exit(m.Run())
}

// TestChartOnRealNode installs the chart on the real node and checks, in
// order: every object it installs is there and the manager's certificate
// rotation filled the webhook configurations' CA bundle; new pods are
// injected through the webhook Service; an in-place rollout over four pods
// with partition 1 and maxUnavailable 1 completes with each of the three
// due pods' sidecar restarted once and no app container touched; the
// leading manager's container killed mid-rollout (SIGKILL through
// containerd), another manager process (the other replica, or the killed
// one restarted by the kubelet) takes the Lease over and finishes the
// rollout while pod creates keep being injected (at most 10 refused, all
// with "connection refused" or, in flight at the kill, "connection reset
// by peer", within 3 s); `helm uninstall` leaves
// nothing with the release's labels or names behind, except the CRD,
// which Helm never deletes, the APIService the apiserver registers for
// its group, and the namespace (Helm does not delete one it created) with
// the kube-root-ca.crt ConfigMap and the default ServiceAccount
// kube-controller-manager puts in every namespace.
func TestChartOnRealNode(t *testing.T) {
	began := time.Now()
	ctx := t.Context()
	c, err := fixture.StartRealWithoutManager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if path, err := c.SaveLogs(); err != nil {
				t.Error(err)
			} else {
				t.Logf("control plane and node logs: %s", path)
			}
		}
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		t.Logf("whole test: %v", time.Since(began).Round(time.Millisecond))
	})
	t.Logf("node and control plane up in %v", time.Since(began).Round(time.Millisecond))

	image, err := managerImage(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Node.ImportArchive(ctx, image); err != nil {
		t.Fatal(err)
	}
	cfg := helmConfig(t, c.Env.KubeConfig)
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = release, namespace, true
	install.Wait, install.Timeout = true, 3*time.Minute
	// The chart's default image is the release image, imported above: the
	// node pulls nothing.
	values := map[string]any{"image": map[string]any{"pullPolicy": "Never"}}
	start := time.Now()
	if _, err := install.RunWithContext(ctx, ch, values); err != nil {
		t.Fatalf("helm install: %v\n%s", err, describeManager(c))
	}
	t.Logf("helm install (CRDs, then every object, waited until ready): %v", time.Since(start).Round(time.Millisecond))
	checkInstalled(t, c)

	// Injection through the webhook Service, then a rollout with a
	// partition.
	const pods = 4
	f := fixture.New(t, c)
	set := f.SidecarSet("exporter:v1", 2)
	set.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromInt32(1))
	set.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	f.CreateSet(set)
	f.CreatePods(pods, nil, nil)
	f.WaitStatus("all matched and ready", fixture.Complete(pods))
	for _, p := range f.Pods() {
		if got := fixture.Image(&p, "exporter"); got != "exporter:v1" {
			t.Fatalf("pod %s: exporter image %q, want exporter:v1 injected by the webhook", p.Name, got)
		}
	}
	apps := fixture.AppIDs(f.Pods())

	w := f.WatchNotReady()
	start = time.Now()
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	f.WaitComplete(pods - 1)
	disrupted := w.Max()
	t.Logf("rollout to exporter:v2 with partition 1: complete after %v", time.Since(start).Round(time.Millisecond))
	checkRollout(t, f.Pods(), "exporter:v2", pods-1, map[string]int32{})
	if disrupted > 1 {
		t.Errorf("%d pods not Ready at once during the rollout, want at most maxUnavailable 1", disrupted)
	}
	f.AssertAppsUntouched(apps)

	// The leader killed mid-rollout, while pods are being created.
	probe := fixture.New(t, c)
	probeSet := probe.SidecarSet("exporter:v1", 0)
	probe.CreateSet(probeSet)
	creates := startCreates(t, probe)
	restarts := fixture.Restarts(f.Pods(), "exporter")
	w = f.WatchNotReady()
	start = time.Now()
	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "exporter:v3"
		s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromInt32(0))
	})
	f.WaitPods("the first pod written with exporter:v3", func(ps []corev1.Pod) bool {
		return fixture.CountImage(ps, "exporter:v3") >= 1
	})
	leader, _ := managerPods(t, c)
	killedHolder := leaseHolder(t, c)
	killed := time.Now()
	id := leader.Status.ContainerStatuses[0].ContainerID
	if err := c.Node.KillContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	// The pods as the kill left them: the rollout must still have been
	// going, or the new leader would have nothing to finish.
	if n := fixture.CountImage(f.Pods(), "exporter:v3"); n >= pods {
		t.Fatalf("all %d pods already written with exporter:v3 right after the kill: the leader was not killed mid-rollout", n)
	}
	holder, tookOver := waitNewLeader(t, c, killedHolder)
	t.Logf("killed the leader %s's container %v after the rollout began; %s holds the Lease %v after the kill",
		leader.Name, killed.Sub(start).Round(time.Millisecond), holder, tookOver.Round(time.Millisecond))
	f.WaitComplete(pods)
	disrupted = w.Max()
	t.Logf("rollout to exporter:v3 with partition 0: complete after %v", time.Since(start).Round(time.Millisecond))
	// Creates go on a little after the rollout, through both replicas
	// again once the killed one is back.
	waitManagerReady(t, c)
	time.Sleep(3 * time.Second)
	report := creates.stop()
	t.Logf("pod creates during the rollout and the failover: %s", report)
	if report.notInjected > 0 {
		t.Errorf("%d created pods carry no exporter: the webhook let them through uninjected", report.notInjected)
	}
	if report.ok == 0 || report.lastFailure.After(report.lastOK) {
		t.Errorf("pod creates did not come back after the failover: %s", report)
	}
	checkRefusals(t, report)
	checkRollout(t, f.Pods(), "exporter:v3", pods, restarts)
	if disrupted > 1 {
		t.Errorf("%d pods not Ready at once during the rollout with the failover, want at most maxUnavailable 1", disrupted)
	}
	f.AssertAppsUntouched(apps)

	// What the tests made goes first: the SidecarSets (their revisions in
	// the manager's namespace are theirs) and the test namespaces.
	for _, name := range []string{f.Set, probe.Set} {
		if err := c.Env.Client.Delete(ctx, &v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatalf("delete SidecarSet %s: %v", name, err)
		}
	}
	before := inventory(t, c.Env.Config)
	uninstall := action.NewUninstall(cfg)
	uninstall.Wait, uninstall.Timeout = true, 2*time.Minute
	start = time.Now()
	if _, err := uninstall.Run(release); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	t.Logf("helm uninstall: %v", time.Since(start).Round(time.Millisecond))
	checkUninstalled(t, c.Env.Config, before)
}

// helmConfig is Helm's action configuration for the cluster kubeconfig
// reaches, with releases kept in Secrets (Helm's default driver).
func helmConfig(t *testing.T, kubeconfig []byte) *action.Configuration {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &path, ptr.To(namespace)
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, namespace, "secret", t.Logf); err != nil {
		t.Fatalf("helm configuration: %v", err)
	}
	return cfg
}

// checkInstalled checks what the install left: the CRD, the manager's two
// pods Ready behind the webhook Service, the PodDisruptionBudget counting
// them, a leader, and the webhook configurations carrying the CA of the
// certificate the manager wrote into its Secret.
func checkInstalled(t *testing.T, c *fixture.Cluster) {
	t.Helper()
	ctx := t.Context()
	dep := &appsv1.Deployment{}
	if err := c.Env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deployment}, dep); err != nil {
		t.Fatalf("get Deployment %s: %v", deployment, err)
	}
	if dep.Status.ReadyReplicas != 2 {
		t.Errorf("Deployment %s: %d ready replicas, want the chart's 2", deployment, dep.Status.ReadyReplicas)
	}
	waitManagerReady(t, c)
	secret := &corev1.Secret{}
	if err := c.Env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "sidecarset-webhook-cert"}, secret); err != nil {
		t.Fatalf("get the certificate Secret: %v", err)
	}
	ca := secret.Data["ca.crt"]
	for _, key := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if len(secret.Data[key]) == 0 {
			t.Errorf("Secret %s has no %s: certificate rotation did not write it", secret.Name, key)
		}
	}
	bundles, err := caBundles(ctx, c.Env.Client)
	if err != nil {
		t.Fatal(err)
	}
	for name, bundle := range bundles {
		if string(bundle) != string(ca) {
			t.Errorf("webhook %s: caBundle is not the CA in Secret %s (%d bytes, Secret's %d)", name, secret.Name, len(bundle), len(ca))
		}
	}
	pdb, err := podDisruptionBudget(ctx, c.Env.Client)
	if err != nil {
		t.Fatal(err)
	}
	if pdb.Status.CurrentHealthy != 2 || pdb.Status.DesiredHealthy != 1 {
		t.Errorf("PodDisruptionBudget %s: %d healthy of %d desired, want 2 of 1", pdb.Name, pdb.Status.CurrentHealthy, pdb.Status.DesiredHealthy)
	}
	leader, other := managerPods(t, c)
	t.Logf("installed: 2 manager pods Ready, %s leads; %d webhooks carry the rotated CA", leader.Name, len(bundles))
	for _, p := range []corev1.Pod{leader, other} {
		t.Logf("  %s after its creation: %s", p.Name, podTimeline(&p))
		// The chart's defaults, which the node must run as they are.
		pod, ctr := p.Spec.SecurityContext, p.Spec.Containers[0].SecurityContext
		if pod == nil || ptr.Deref(pod.RunAsUser, 0) != 65532 || pod.SeccompProfile == nil || pod.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
			ctr == nil || !ptr.Deref(ctr.ReadOnlyRootFilesystem, false) {
			t.Errorf("pod %s runs without the chart's security defaults (user 65532, seccomp RuntimeDefault, read-only root): %+v, %+v", p.Name, pod, ctr)
		}
	}
}

// podTimeline says when, after its creation, a pod was scheduled, its
// container started and it turned Ready.
func podTimeline(p *corev1.Pod) string {
	at := func(cond corev1.PodConditionType) string {
		if c := fixture.PodCondition(p, cond); c != nil {
			return c.LastTransitionTime.Sub(p.CreationTimestamp.Time).String()
		}
		return "never"
	}
	started := "never"
	if s := p.Status.ContainerStatuses; len(s) > 0 && s[0].State.Running != nil {
		started = s[0].State.Running.StartedAt.Sub(p.CreationTimestamp.Time).String()
	}
	return fmt.Sprintf("scheduled %s, container started %s, Ready %s", at(corev1.PodScheduled), started, at(corev1.PodReady))
}

// checkRollout checks that updated pods run image in their exporter, each
// restarted once more than restarts says (none: 0), and the others were
// not restarted.
func checkRollout(t *testing.T, pods []corev1.Pod, image string, updated int, restarts map[string]int32) {
	t.Helper()
	got := 0
	for _, p := range pods {
		st := fixture.ContainerStatus(&p, "exporter")
		was := restarts[p.Name]
		if fixture.Image(&p, "exporter") == image {
			got++
			if st.RestartCount != was+1 {
				t.Errorf("pod %s: exporter restarted %d times, want %d: once for the update", p.Name, st.RestartCount, was+1)
			}
			continue
		}
		if st.RestartCount != was {
			t.Errorf("pod %s, kept by the partition: exporter restarted %d times, want %d", p.Name, st.RestartCount, was)
		}
	}
	if got != updated {
		t.Errorf("%d pods on %s, want %d", got, image, updated)
	}
}

// Pod creates refused during the failover: only while the apiserver still
// dials the killed pod's endpoint, which then refuses the connection.
const (
	maxRefused    = 10
	maxRefusedFor = 3 * time.Second
)

// checkRefusals checks that few pod creates were refused, all by the
// killed pod, within a short time.
func checkRefusals(t *testing.T, r createReport) {
	t.Helper()
	if r.failed > maxRefused {
		t.Errorf("%d pod creates refused, want at most %d: %s", r.failed, maxRefused, r)
	}
	// The apiserver dialling the killed pod is refused; a call it had
	// in flight to it when the process died is reset. Anything else (a
	// timeout, a TLS error, a refusal by a live replica) is a defect.
	for _, e := range r.errors {
		if !strings.Contains(e, "connection refused") && !strings.Contains(e, "connection reset by peer") {
			t.Errorf("a pod create refused with %q, want only \"connection refused\" or \"connection reset by peer\" (the killed pod)", e)
		}
	}
	if d := r.lastFailure.Sub(r.firstFailure); d >= maxRefusedFor {
		t.Errorf("pod creates refused over %v, want under %v: %s", d.Round(time.Millisecond), maxRefusedFor, r)
	}
}

// managerPods returns the manager pod holding the Lease and another one.
func managerPods(t *testing.T, c *fixture.Cluster) (leader, other corev1.Pod) {
	t.Helper()
	list := &corev1.PodList{}
	if err := c.Env.Client.List(t.Context(), list, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/instance": release}); err != nil {
		t.Fatalf("list the manager's pods: %v", err)
	}
	holder := leaseHolder(t, c)
	found := false
	for _, p := range list.Items {
		// controller-runtime names a candidate hostname_uuid; a pod's
		// hostname is its name.
		if strings.HasPrefix(holder, p.Name+"_") {
			leader, found = p, true
		} else if p.DeletionTimestamp == nil {
			other = p
		}
	}
	if !found || other.Name == "" {
		t.Fatalf("Lease held by %q: want it held by one of the manager's pods, beside another\n%s", holder, describeManager(c))
	}
	return leader, other
}

func leaseHolder(t *testing.T, c *fixture.Cluster) string {
	t.Helper()
	lease := &coordinationv1.Lease{}
	if err := c.Env.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: manager.LeaderElectionID}, lease); err != nil {
		t.Fatalf("get Lease %s: %v", manager.LeaderElectionID, err)
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// waitNewLeader waits until another manager process than old holds the
// Lease, and returns its identity and how long it took. The other replica
// may take it, or the killed pod's container, which the kubelet restarts
// at once: both wait out the Lease's duration and the first to try after
// it wins.
func waitNewLeader(t *testing.T, c *fixture.Cluster, old string) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	var holder string
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		holder = leaseHolder(t, c)
		return holder != "" && holder != old, nil
	})
	if err != nil {
		t.Fatalf("wait for a manager other than %s to hold the Lease: %v\n%s", old, err, describeManager(c))
	}
	return holder, time.Since(start)
}

// waitManagerReady waits until both manager pods are Ready.
func waitManagerReady(t *testing.T, c *fixture.Cluster) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		list := &corev1.PodList{}
		if err := c.Env.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/instance": release}); err != nil {
			return false, err
		}
		ready := 0
		for _, p := range list.Items {
			if fixture.PodReady(&p) {
				ready++
			}
		}
		return ready == 2, nil
	})
	if err != nil {
		t.Fatalf("wait for both manager pods to be Ready: %v\n%s", err, describeManager(c))
	}
}

// describeManager says what the manager's pods look like, with the end of
// each one's log (and of its previous container's, after a restart), for
// failures.
func describeManager(c *fixture.Cluster) string {
	list := &corev1.PodList{}
	if err := c.Env.Client.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
		return fmt.Sprintf("list pods in %s: %v", namespace, err)
	}
	clientset, err := kubernetes.NewForConfig(c.Env.Config)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range list.Items {
		fmt.Fprintf(&b, "  %s phase=%s ready=%v node=%q", p.Name, p.Status.Phase, fixture.PodReady(&p), p.Spec.NodeName)
		for _, s := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, " %s(restarts %d, %+v)", s.Name, s.RestartCount, s.State)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Status != corev1.ConditionTrue {
				fmt.Fprintf(&b, " %s=%s(%s)", cond.Type, cond.Status, cond.Message)
			}
		}
		b.WriteString("\n")
		for _, previous := range []bool{false, true} {
			logs, err := clientset.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{Previous: previous, TailLines: ptr.To[int64](20)}).DoRaw(context.Background())
			if err == nil && len(logs) > 0 {
				fmt.Fprintf(&b, "  log (previous %v):\n%s\n", previous, logs)
			}
		}
	}
	return b.String()
}

// creates creates pods (server-side dry run: through admission, the pod
// webhook included, but never stored, so the node runs none) one after
// another until stopped, and counts what came of them.
type creates struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	report createReport
}

// createReport counts pod creates: those the apiserver answered, those it
// refused, and of the answered ones those without the injected sidecar.
type createReport struct {
	ok, failed, notInjected   int
	firstFailure, lastFailure time.Time
	lastOK                    time.Time
	errors                    []string
}

func (r createReport) String() string {
	s := fmt.Sprintf("%d created, %d refused, %d not injected", r.ok, r.failed, r.notInjected)
	if r.failed > 0 {
		s += fmt.Sprintf("; refusals over %v, e.g. %v", r.lastFailure.Sub(r.firstFailure).Round(time.Millisecond), r.errors[:min(len(r.errors), 3)])
	}
	return s
}

func startCreates(t *testing.T, f *fixture.F) *creates {
	ctx, cancel := context.WithCancel(context.Background())
	cr := &creates{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(cr.done)
		for i := 0; ctx.Err() == nil; i++ {
			pod := f.NewPod(fmt.Sprintf("c%04d", i))
			f.C.FitPod(&pod.Spec)
			err := f.Client.Create(ctx, pod, client.DryRunAll)
			now := time.Now()
			cr.mu.Lock()
			switch {
			case ctx.Err() != nil:
			case err != nil:
				cr.report.failed++
				if cr.report.firstFailure.IsZero() {
					cr.report.firstFailure = now
				}
				cr.report.lastFailure = now
				if !slices.Contains(cr.report.errors, err.Error()) {
					cr.report.errors = append(cr.report.errors, err.Error())
				}
			default:
				cr.report.ok++
				cr.report.lastOK = now
				if fixture.Image(pod, "exporter") == "" {
					cr.report.notInjected++
				}
			}
			cr.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cr.stop() })
	return cr
}

func (cr *creates) stop() createReport {
	cr.cancel()
	<-cr.done
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return cr.report
}
