package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/cli"
	"github.com/sidecarset/sidecarset/internal/stack"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

// The suite runs every verb against one real kube-apiserver, etcd and
// kube-controller-manager, with simulated nodes and the sidecarset manager
// serving its webhooks, as test/integration does.
var (
	env        *testenv.Env
	sys        *stack.Stack
	kubeconfig string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	testenv.SetLogger()
	var err error
	sys, err = stack.Start(context.Background(), stack.TestOptions())
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
	dir, err := os.MkdirTemp("", "kubectl-sidecarset-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// result is what one run of the command printed and returned.
type result struct {
	out, errOut string
	err         error
}

// kubectl runs `kubectl sidecarset ARGS` against the test cluster through
// the real root command and flags, with a fast poll. terminal says whether
// stdout counts as a terminal.
func kubectl(t *testing.T, terminal bool, args ...string) result {
	t.Helper()
	return execute(t, terminal, "", args...)
}

// execute runs the command with stdin.
func execute(t *testing.T, terminal bool, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	o := cli.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	o.IsTerminal = func(io.Writer) bool { return terminal }
	o.PollInterval = 100 * time.Millisecond
	cmd := cli.NewCmdRoot(o)
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	err := cmd.ExecuteContext(t.Context())
	r := result{out: out.String(), errOut: errOut.String(), err: err}
	t.Logf("kubectl sidecarset %s\n--- stdout:\n%s--- stderr:\n%s--- error: %v", strings.Join(args, " "), r.out, r.errOut, err)
	return r
}

// ok runs the command and fails the test if it returns an error.
func ok(t *testing.T, args ...string) result {
	t.Helper()
	r := kubectl(t, false, args...)
	if r.err != nil {
		t.Fatalf("kubectl sidecarset %s: %v", strings.Join(args, " "), r.err)
	}
	return r
}

// fixture is one test's namespace, pod labels and SidecarSet name.
type fixture struct {
	t      *testing.T
	ns     string
	labels map[string]string
	set    string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	name := strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, strings.ToLower(t.Name()))
	name = strings.Trim(name[:min(len(name), 40)], "-")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"}}
	if err := env.Client.Create(t.Context(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return &fixture{t: t, ns: ns.Name, labels: map[string]string{"example.com/app": ns.Name}, set: ns.Name}
}

// sidecarSet returns a SidecarSet selecting the fixture's pods with one
// "exporter" sidecar.
func (f *fixture) sidecarSet(image string) *v1alpha1.SidecarSet {
	return &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: f.set},
		Spec: v1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: f.labels},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: "exporter", Image: image}}},
		},
	}
}

// readyAfter gives the set's first sidecar a readiness probe that passes
// after seconds, so a rollout takes a while and its progress shows.
func readyAfter(set *v1alpha1.SidecarSet, seconds int32) *v1alpha1.SidecarSet {
	set.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9104)}},
		InitialDelaySeconds: seconds,
	}
	return set
}

func (f *fixture) createSet(set *v1alpha1.SidecarSet) {
	f.t.Helper()
	if err := env.Client.Create(f.t.Context(), set); err != nil {
		f.t.Fatalf("create SidecarSet: %v", err)
	}
	f.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), set) })
	// Pods created before the manager's cache holds the set would be
	// created without it.
	if err := testenv.WaitObserved(f.t.Context(), env.Client, set.Name); err != nil {
		f.t.Fatal(err)
	}
}

// updateSet changes the SidecarSet, retrying on conflicts.
func (f *fixture) updateSet(change func(*v1alpha1.SidecarSet)) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(f.t.Context(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		set := f.getSet()
		change(set)
		err := env.Client.Update(ctx, set)
		if apierrors.IsConflict(err) {
			return false, nil
		}
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

// createPods creates n pods p01..pNN with an app container and waits until
// all are Ready.
func (f *fixture) createPods(n int) {
	f.t.Helper()
	for i := 1; i <= n; i++ {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("p%02d", i), Labels: f.labels},
			Spec: corev1.PodSpec{
				Containers:                    []corev1.Container{{Name: "app", Image: "mysql:8.4"}},
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
	err := wait.PollUntilContextTimeout(f.t.Context(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return cond(f.pods()), nil
	})
	if err != nil {
		f.t.Fatalf("wait for %s: %v", what, err)
	}
}

// waitStatus waits for a status about the current spec that satisfies cond.
func (f *fixture) waitStatus(what string, cond func(v1alpha1.SidecarSetStatus) bool) *v1alpha1.SidecarSet {
	f.t.Helper()
	var set *v1alpha1.SidecarSet
	err := wait.PollUntilContextTimeout(f.t.Context(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		set = f.getSet()
		return set.Status.ObservedGeneration >= set.Generation && cond(set.Status), nil
	})
	if err != nil {
		f.t.Fatalf("wait for %s: %v\nstatus: %+v", what, err, set.Status)
	}
	return set
}

// complete waits until the rollout is Complete with want pods updated and
// ready.
func (f *fixture) complete(want int32) *v1alpha1.SidecarSet {
	f.t.Helper()
	return f.waitStatus(fmt.Sprintf("Complete with %d updated and ready", want), func(st v1alpha1.SidecarSetStatus) bool {
		return condition(st, v1alpha1.ConditionComplete) == metav1.ConditionTrue && st.UpdatedReadyPods == want
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func condition(st v1alpha1.SidecarSetStatus, t string) metav1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return metav1.ConditionUnknown
}

// image returns the image of the named container in the pod spec.
func image(p *corev1.Pod, name string) string {
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

func partition(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}

// lines splits output into trimmed, non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// row finds the table line that starts with first and splits it into
// cells.
func row(t *testing.T, out, first string) []string {
	t.Helper()
	for _, l := range lines(out) {
		if f := strings.Fields(l); len(f) > 0 && f[0] == first {
			return f
		}
	}
	t.Fatalf("no line starting with %q in:\n%s", first, out)
	return nil
}

func mustContain(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("output lacks %q:\n%s", sub, s)
		}
	}
}
