package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/stack"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	testenv.SetLogger()
	// No simulated nodes: admission needs none. The controller manager makes
	// a Deployment's pods.
	sys, err := stack.Start(context.Background(), stack.Options{ControllerManager: true})
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

// warnings collects the admission warnings the apiserver relays.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warnings) all() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.msgs, "\n")
}

func namespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "wh-", Labels: labels}}
	if err := env.Client.Create(t.Context(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

func sidecarSet(name string, podLabels map[string]string, containers ...corev1.Container) *v1alpha1.SidecarSet {
	set := &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.SidecarSetSpec{Selector: &metav1.LabelSelector{MatchLabels: podLabels}},
	}
	for _, c := range containers {
		set.Spec.Containers = append(set.Spec.Containers, v1alpha1.SidecarContainer{Container: c})
	}
	return set
}

// createSet creates set and waits until the manager's cache has it, since the
// pod webhook answers from that cache: until a pod it matches is injected, or
// marked skipped.
func createSet(t *testing.T, set *v1alpha1.SidecarSet) {
	t.Helper()
	if err := env.Client.Create(t.Context(), set); err != nil {
		t.Fatalf("create SidecarSet %s: %v", set.Name, err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), set) })
	// A dry-run pod in a fresh namespace shows when injection sees the set.
	ns := namespace(t, nil)
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		probe := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe", Labels: set.Spec.Selector.MatchLabels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe:1"}}},
		}
		if err := env.Client.Create(ctx, probe, client.DryRunAll); err != nil {
			return false, err
		}
		return strings.Contains(probe.Annotations[v1alpha1.AnnotationInjected], set.Name) ||
			strings.Contains(probe.Annotations[v1alpha1.AnnotationSkipped], set.Name), nil
	})
	if err != nil {
		t.Fatalf("wait for the webhook to see SidecarSet %s: %v", set.Name, err)
	}
}

func containerNames(cs []corev1.Container) []string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return names
}

func TestPodInjectedThroughRealAPIServer(t *testing.T) {
	ctx := t.Context()
	labels := map[string]string{"example.com/mysql": "inject-bare"}
	createSet(t, sidecarSet("bare-exporter", labels,
		corev1.Container{Name: "exporter", Image: "prom/mysqld-exporter:v0.15.1"}))
	ns := namespace(t, nil)

	w := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = w
	cs := kubernetes.NewForConfigOrDie(cfg)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-0", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mysql", Image: "mysql:8.4"}}},
	}
	got, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	if names := containerNames(got.Spec.Containers); strings.Join(names, ",") != "exporter,mysql" {
		t.Errorf("containers = %v, want [exporter mysql] (BeforeAppContainer by default)", names)
	}
	if got.Annotations[v1alpha1.AnnotationInjected] != "bare-exporter" || got.Labels[v1alpha1.LabelManaged] != "true" {
		t.Errorf("records missing: annotations %v labels %v", got.Annotations, got.Labels)
	}
	state, err := revision.Decode(got.Annotations)
	if err != nil {
		t.Fatalf("decode state: %v", err)
	}
	if c, ok := state["bare-exporter"].Container("exporter"); !ok || c.Image != "prom/mysqld-exporter:v0.15.1" {
		t.Errorf("state records %+v, want exporter with its image", state)
	}
	// The set's image by tag and missing resources were warned about when it
	// was created; nothing about this pod is worth a warning.
	if w.all() != "" {
		t.Errorf("pod create warnings %q, want none", w.all())
	}
}

func TestPodsNotInjected(t *testing.T) {
	ctx := t.Context()
	labels := map[string]string{"example.com/mysql": "not-injected"}
	createSet(t, sidecarSet("skip-exporter", labels, corev1.Container{Name: "exporter", Image: "exporter:1"}))
	ns := namespace(t, nil)
	cases := []struct {
		name string
		pod  *corev1.Pod
	}{
		{"labels do not match", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other",
			Labels: map[string]string{"example.com/mysql": "no"}}}},
		{"opted out", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "opted-out", Labels: labels,
			Annotations: map[string]string{v1alpha1.AnnotationInject: "false"}}}},
		{"system namespace", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "sys", Labels: labels}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.pod.Spec.Containers = []corev1.Container{{Name: "main", Image: "main:1"}}
			if err := env.Client.Create(ctx, tc.pod); err != nil {
				t.Fatalf("create pod: %v", err)
			}
			if n := len(tc.pod.Spec.Containers); n != 1 || tc.pod.Labels[v1alpha1.LabelManaged] != "" {
				t.Errorf("pod was injected: containers %v, labels %v", containerNames(tc.pod.Spec.Containers), tc.pod.Labels)
			}
		})
	}
}

func TestDeploymentPodsInjected(t *testing.T) {
	ctx := t.Context()
	labels := map[string]string{"example.com/mysql": "inject-deployment"}
	createSet(t, sidecarSet("deploy-exporter", labels, corev1.Container{Name: "exporter", Image: "exporter:1"}))
	ns := namespace(t, nil)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mysql", Image: "mysql:8.4"}}},
			},
		},
	}
	if err := env.Client.Create(ctx, dep); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	var pods corev1.PodList
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(labels))
		return err == nil && len(pods.Items) == 2, err
	})
	if err != nil {
		t.Fatalf("wait for the deployment's pods: %v", err)
	}
	for _, p := range pods.Items {
		if names := containerNames(p.Spec.Containers); strings.Join(names, ",") != "exporter,mysql" {
			t.Errorf("pod %s containers = %v, want the exporter injected", p.Name, names)
		}
	}
}

func TestInvalidSidecarSetRefused(t *testing.T) {
	// A subdomain but not a DNS label, and an empty selector: both pass the
	// CRD schema, so only the validating webhook can refuse them.
	set := sidecarSet("not.a.label", map[string]string{}, corev1.Container{Name: "exporter", Image: "exporter:1"})
	err := env.Client.Create(t.Context(), set)
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		t.Fatalf("create = %v, want an Invalid error", err)
	}
	fields := map[string]bool{}
	for _, c := range status.Status().Details.Causes {
		fields[c.Field] = true
	}
	for _, want := range []string{"metadata.name", "spec.selector"} {
		if !fields[want] {
			t.Errorf("causes %v lack field %s", status.Status().Details.Causes, want)
		}
	}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(set), &v1alpha1.SidecarSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("refused SidecarSet exists anyway: %v", err)
	}
}

// TestSidecarSetWithoutSelector: a SidecarSet without spec.selector, from
// kubectl or from a Go client, is refused with one error that names the
// field. The defaulting webhook used to write "selector": null back, which
// the schema refused as a null object, with a second error naming no field.
func TestSidecarSetWithoutSelector(t *testing.T) {
	const want = `spec.selector: Required value: a SidecarSet must say which pods it injects: give matchLabels or matchExpressions`
	out, err := kubectlOn(t)(`apiVersion: sidecarset.dev/v1alpha1
kind: SidecarSet
metadata: {name: no-selector}
spec:
  containers: [{name: exporter, image: exporter:1}]
`, "apply", "-f", "-")
	if err == nil || strings.TrimSpace(out) != `The SidecarSet "no-selector" is invalid: `+want {
		t.Errorf("kubectl apply: %v\n%s\nwant one error: %s", err, out, want)
	}

	set := sidecarSet("no-selector", nil, corev1.Container{Name: "exporter", Image: "exporter:1"})
	set.Spec.Selector = nil
	err = env.Client.Create(t.Context(), set)
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || len(status.Status().Details.Causes) != 1 || !strings.Contains(err.Error(), want) {
		t.Errorf("create = %v, want Invalid with one cause: %s", err, want)
	}
}

func TestConflictingSidecarSetRefused(t *testing.T) {
	labels := map[string]string{"example.com/mysql": "conflict"}
	createSet(t, sidecarSet("conflict-a", labels, corev1.Container{Name: "exporter", Image: "exporter:1"}))
	err := env.Client.Create(t.Context(), sidecarSet("conflict-b", labels, corev1.Container{Name: "exporter", Image: "exporter:2"}))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.containers[0].name") || !strings.Contains(err.Error(), "conflict-a") {
		t.Errorf("create = %v, want Invalid on spec.containers[0].name naming conflict-a", err)
	}
}

func TestServerSideDryRun(t *testing.T) {
	ctx := t.Context()
	labels := map[string]string{"example.com/mysql": "dry-run"}
	createSet(t, sidecarSet("dry-exporter", labels, corev1.Container{Name: "exporter", Image: "exporter:1"}))
	ns := namespace(t, nil)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dry", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "main:1"}}},
	}
	if err := env.Client.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Fatalf("dry-run create pod: %v", err)
	}
	if len(pod.Spec.Containers) != 2 {
		t.Errorf("dry-run pod containers = %v, want the sidecar injected", containerNames(pod.Spec.Containers))
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("dry-run pod was persisted: %v", err)
	}

	probe := sidecarSet("dry-probe", map[string]string{"example.com/mysql": "dry-probe"},
		corev1.Container{Name: "probe", Image: "probe:1"})
	if err := env.Client.Create(ctx, probe, client.DryRunAll); err != nil {
		t.Fatalf("dry-run create SidecarSet: %v", err)
	}
	// The defaulting webhook ran on the dry run.
	if probe.Spec.UpdateStrategy.MaxUnavailable == nil {
		t.Errorf("dry-run SidecarSet not defaulted: %+v", probe.Spec.UpdateStrategy)
	}
	bad := sidecarSet("dry-bad", nil, corev1.Container{Name: "probe", Image: "probe:1"})
	if err := env.Client.Create(ctx, bad, client.DryRunAll); !apierrors.IsInvalid(err) {
		t.Errorf("dry-run of an invalid SidecarSet = %v, want Invalid", err)
	}
}

// seedManifest is the example from the project's source article, with the
// apiVersion changed from apps.kruise.io/v1alpha1.
const seedManifest = `
apiVersion: sidecarset.dev/v1alpha1
kind: SidecarSet
metadata:
  name: mysql-exporter
spec:
  namespaceSelector:
    matchLabels:
      example.com/managed: "true"
  selector:
    matchLabels:
      example.com/mysql: "true"
  containers:
  - name: exporter
    image: prom/mysqld-exporter@sha256:0f5e8a1c0c5a3b9b5f0d2c6c1e7a9b4d3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c
    volumeMounts:
    - name: mysql
      mountPath: /var/lib/mysql
  updateStrategy:
    type: RollingUpdate
    partition: 100%
    maxUnavailable: 1
`

func TestSeedManifestAccepted(t *testing.T) {
	set := &v1alpha1.SidecarSet{}
	if err := yaml.UnmarshalStrict([]byte(seedManifest), set); err != nil {
		t.Fatalf("decode manifest: %v", err)
	}
	if err := env.Client.Create(t.Context(), set); err != nil {
		t.Fatalf("create the seed's SidecarSet: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), set) })
	if set.Spec.UpdateStrategy.Partition.String() != "100%" {
		t.Errorf("partition = %s, want 100%%", set.Spec.UpdateStrategy.Partition.String())
	}
}

// kubectlOn returns a function that runs the real kubectl against the test
// apiserver with stdin, and returns what it printed.
func kubectlOn(t *testing.T) func(stdin string, args ...string) (string, error) {
	t.Helper()
	assets, err := testenv.Assets()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(t.Context(), filepath.Join(assets, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// TestKubectlServerSideDryRun runs the real kubectl against both webhooks,
// as users check a change before applying it.
func TestKubectlServerSideDryRun(t *testing.T) {
	kubectl := kubectlOn(t)
	labels := map[string]string{"example.com/mysql": "kubectl-dry-run"}
	createSet(t, sidecarSet("kubectl-exporter", labels, corev1.Container{Name: "exporter", Image: "exporter:1"}))
	ns := namespace(t, nil)

	pod := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"dry","namespace":%q,"labels":{"example.com/mysql":"kubectl-dry-run"}},
"spec":{"containers":[{"name":"main","image":"main:1"}]}}`, ns)
	out, err := kubectl(pod, "apply", "--dry-run=server", "-o", "jsonpath={.spec.containers[*].name}", "-f", "-")
	if err != nil || !strings.Contains(out, "exporter main") {
		t.Errorf("kubectl apply --dry-run=server pod: %v\n%s\nwant the exporter injected", err, out)
	}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "dry"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("dry-run pod was persisted: %v", err)
	}

	out, err = kubectl(seedManifest, "apply", "--dry-run=server", "-f", "-")
	if err != nil || !strings.Contains(out, "mysql-exporter") || !strings.Contains(out, "server dry run") {
		t.Errorf("kubectl apply --dry-run=server of the seed's SidecarSet: %v\n%s", err, out)
	}
	bad := strings.Replace(seedManifest, `partition: 100%`, `partition: 150%`, 1)
	out, err = kubectl(bad, "apply", "--dry-run=server", "-f", "-")
	if err == nil || !strings.Contains(out, "spec.updateStrategy.partition") {
		t.Errorf("kubectl apply --dry-run=server of a 150%% partition: %v\n%s\nwant refused naming spec.updateStrategy.partition", err, out)
	}
}
