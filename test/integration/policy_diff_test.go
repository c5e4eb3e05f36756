package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/policy"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

// diffCase is pods created once through the webhook and once through the
// compiled policies of sets.
type diffCase struct {
	name     string
	nsLabels map[string]string
	sets     []*v1alpha1.SidecarSet
	pods     []*corev1.Pod
}

const (
	diffApp   = "registry.example/app@sha256:aa"
	diffProxy = "registry.example/proxy:1"
)

var diffLabels = map[string]string{"policydiff.example/app": "db"}

func diffPod(name string) *testutil.PodBuilder {
	return testutil.Pod("", name).Labels(diffLabels).Containers(testutil.Container("app", diffApp).Obj())
}

func diffSet(name string) *testutil.SidecarSetBuilder {
	return testutil.SidecarSet(name).Selector(diffLabels)
}

// diffCorpus follows internal/inject's table cases where they fit a real
// apiserver (names are prefixed, pods must be valid).
func diffCorpus() []diffCase {
	native := testutil.Container("mesh-init", diffProxy).RestartAlways().Sidecar("")
	withPort := func(c v1alpha1.SidecarContainer, port int32) v1alpha1.SidecarContainer {
		c.Ports = []corev1.ContainerPort{{ContainerPort: port}}
		return c
	}
	cm := corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}, Items: []corev1.KeyToPath{{Key: "a", Path: "a.conf"}}}}}
	envd := testutil.Container("envd", diffProxy).Sidecar("")
	envd.Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	envd.Args = []string{"--x=1", "--quote=\"q\""}
	envd.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
	return []diffCase{
		{name: "one container before the app", sets: []*v1alpha1.SidecarSet{
			diffSet("pd-one").Container("proxy", diffProxy).Obj()},
			pods: []*corev1.Pod{diffPod("p").Obj(), diffPod("other").Labels(map[string]string{"policydiff.example/app": "web"}).Obj()}},
		{name: "placement across two sets (the package documentation's case)", sets: []*v1alpha1.SidecarSet{
			diffSet("pd-b").Containers(testutil.Container("exporter", diffProxy).Sidecar(v1alpha1.BeforeAppContainer)).
				InitContainers(testutil.Container("wait", diffProxy).Sidecar("")).Obj(),
			diffSet("pd-a").Containers(testutil.Container("proxy", diffProxy).Sidecar(""), testutil.Container("log", diffProxy).Sidecar(v1alpha1.AfterAppContainer)).
				InitContainers(native).Obj()},
			pods: []*corev1.Pod{diffPod("p").InitContainers(testutil.Container("setup", diffApp).Obj()).Obj(), diffPod("bare").Obj()}},
		{name: "three sets, after containers", sets: []*v1alpha1.SidecarSet{
			diffSet("pd-x1").Containers(testutil.Container("x1", diffProxy).Sidecar(v1alpha1.AfterAppContainer)).Obj(),
			diffSet("pd-x3").Containers(testutil.Container("x3", diffProxy).Sidecar(v1alpha1.AfterAppContainer), testutil.Container("x3b", diffProxy).Sidecar("")).Obj(),
			diffSet("pd-x2").Containers(testutil.Container("x2", diffProxy).Sidecar(v1alpha1.AfterAppContainer), testutil.Container("x2b", diffProxy).Sidecar("")).Obj()},
			pods: []*corev1.Pod{diffPod("p").Containers(testutil.Container("app2", diffApp).Obj()).Obj()}},
		{name: "volumes: the pod's own wins, a set's is added", sets: []*v1alpha1.SidecarSet{
			diffSet("pd-vol").Containers(testutil.Container("reader", diffProxy).VolumeMount("data", "/data").VolumeMount("conf", "/conf").Sidecar("")).
				Volumes(testutil.EmptyDirVolume("data"), cm).Obj()},
			pods: []*corev1.Pod{diffPod("p").Obj(), diffPod("own").Volumes(testutil.HostPathVolume("data", "/srv")).Obj()}},
		{name: "a mounted volume the pod lacks: skipped", sets: []*v1alpha1.SidecarSet{
			diffSet("pd-needs").Containers(testutil.Container("reader", diffProxy).VolumeMount("mysql", "/var/lib/mysql").Sidecar("")).Obj()},
			pods: []*corev1.Pod{diffPod("without").Obj(), diffPod("with").Volumes(testutil.EmptyDirVolume("mysql")).Obj()}},
		{name: "imagePullSecrets merge by name", sets: []*v1alpha1.SidecarSet{
			diffSet("pd-sec").Container("proxy", diffProxy).ImagePullSecrets("reg", "mirror").Obj()},
			pods: []*corev1.Pod{diffPod("p").Obj(), diffPod("has").ImagePullSecrets("mirror").Obj()}},
		{name: "a container name the pod uses: not injected", sets: []*v1alpha1.SidecarSet{
			diffSet("pd-clash").Container("app", diffProxy).Obj(), diffSet("pd-fine").Container("proxy", diffProxy).Obj()},
			pods: []*corev1.Pod{diffPod("p").Obj()}},
		{name: "opted out", sets: []*v1alpha1.SidecarSet{diffSet("pd-opt").Container("proxy", diffProxy).Obj()},
			pods: []*corev1.Pod{diffPod("p").Annotations(map[string]string{v1alpha1.AnnotationInject: "false"}).Obj(),
				diffPod("q").Annotations(map[string]string{v1alpha1.AnnotationInject: "true"}).Obj()}},
		{name: "namespaceSelector", nsLabels: map[string]string{"team": "data"}, sets: []*v1alpha1.SidecarSet{
			diffSet("pd-ns-yes").NamespaceSelector(map[string]string{"team": "data"}).Container("yes", diffProxy).Obj(),
			diffSet("pd-ns-no").NamespaceSelector(map[string]string{"team": "web"}).Container("no", diffProxy).Obj()},
			pods: []*corev1.Pod{diffPod("p").Obj()}},
		{name: "selector expressions", sets: []*v1alpha1.SidecarSet{
			diffSet("pd-expr").LabelSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "policydiff.example/app", Operator: metav1.LabelSelectorOpIn, Values: []string{"db", "cache"}},
				{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"front"}}}}).Container("proxy", diffProxy).Obj()},
			pods: []*corev1.Pod{diffPod("p").Obj(), diffPod("front").Labels(map[string]string{"tier": "front"}).Obj()}},
		{name: "already injected: records kept, not injected twice", sets: []*v1alpha1.SidecarSet{
			diffSet("pd-again").Container("proxy", diffProxy).Obj()},
			pods: []*corev1.Pod{diffPod("p").Containers(testutil.Container("proxy", diffProxy).Obj()).Labels(map[string]string{v1alpha1.LabelManaged: "true"}).
				Annotations(map[string]string{v1alpha1.AnnotationInjected: "pd-again",
					v1alpha1.AnnotationState: revision.Encode(revision.State{"pd-again": {Revision: "pd-again-1", Hash: "h", ImagelessHash: "i",
						Containers: []revision.ContainerState{{Name: "proxy", Image: diffProxy}}}})}).Obj()}},
		{name: "stale record copied from a running pod: injected afresh", sets: []*v1alpha1.SidecarSet{
			diffSet("pd-stale").Container("proxy", diffProxy).Obj()},
			pods: []*corev1.Pod{diffPod("p").Annotations(map[string]string{v1alpha1.AnnotationInjected: "pd-stale",
				v1alpha1.AnnotationState: revision.Encode(revision.State{"pd-stale": {Revision: "pd-stale-1", Hash: "h", ImagelessHash: "i",
					Containers: []revision.ContainerState{{Name: "proxy", Image: diffProxy}}}})}).Obj()}},
		{name: "port clash: skipped", sets: []*v1alpha1.SidecarSet{
			diffSet("pd-port").Containers(withPort(testutil.Container("proxy", diffProxy).Sidecar(""), 8080)).Obj()},
			pods: []*corev1.Pod{diffPod("free").Obj(),
				testutil.Pod("", "taken").Labels(diffLabels).Containers(corev1.Container{Name: "app", Image: diffApp, Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}).Obj()}},
		{name: "env, args and resources", sets: []*v1alpha1.SidecarSet{diffSet("pd-env").Containers(envd).Obj()},
			pods: []*corev1.Pod{diffPod("p").Obj()}},
		{name: "a Job's pod: regular containers as native sidecars after each set's own, or kept regular", sets: []*v1alpha1.SidecarSet{
			diffSet("pd-job-b").Containers(testutil.Container("exporter", diffProxy).Sidecar(v1alpha1.BeforeAppContainer)).
				InitContainers(testutil.Container("wait", diffProxy).Sidecar("")).Obj(),
			diffSet("pd-job-a").Containers(testutil.Container("proxy", diffProxy).Sidecar(""), testutil.Container("log", diffProxy).Sidecar(v1alpha1.AfterAppContainer)).
				InitContainers(native).Obj(),
			diffSet("pd-job-c").JobPods(v1alpha1.JobPodsKeep).Container("kept", diffProxy).Obj()},
			pods: []*corev1.Pod{
				diffPod("never").RestartPolicy(corev1.RestartPolicyNever).InitContainers(testutil.Container("setup", diffApp).Obj()).Obj(),
				diffPod("on-failure").RestartPolicy(corev1.RestartPolicyOnFailure).Obj(),
				diffPod("always").Obj()}},
		{name: "a Job's pod with a stale record: injected afresh", sets: []*v1alpha1.SidecarSet{
			diffSet("pd-job-stale").Container("proxy", diffProxy).Obj()},
			pods: []*corev1.Pod{diffPod("p").RestartPolicy(corev1.RestartPolicyNever).Annotations(map[string]string{v1alpha1.AnnotationInjected: "pd-job-stale",
				v1alpha1.AnnotationState: revision.Encode(revision.State{"pd-job-stale": {Revision: "pd-job-stale-1", Hash: "h", ImagelessHash: "i",
					Containers: []revision.ContainerState{{Name: "proxy", Init: true, Image: diffProxy}}}})}).Obj()}},
		{name: "restricted namespace, privileged sidecar", nsLabels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"},
			sets: []*v1alpha1.SidecarSet{diffSet("pd-priv").Containers(privileged()).Obj()},
			pods: []*corev1.Pod{diffPod("p").Obj()}},
	}
}

func privileged() v1alpha1.SidecarContainer {
	c := testutil.Container("priv", diffProxy).Sidecar("")
	c.SecurityContext = &corev1.SecurityContext{Privileged: new(true)}
	return c
}

// TestPolicyInjectsAsWebhook creates each case's pods through the webhook
// (the manager, with the sets created) and through the sets' compiled
// policies (the sets not created), and compares what the apiserver stored.
func TestPolicyInjectsAsWebhook(t *testing.T) {
	admissionOnly(t)
	for _, tc := range diffCorpus() {
		t.Run(tc.name, func(t *testing.T) { runDiff(t, tc) })
	}
}

// TestPolicyInjectsAsWebhookGenerated does the same for generated sets and
// pods.
func TestPolicyInjectsAsWebhookGenerated(t *testing.T) {
	admissionOnly(t)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		runDiff(t, genCase(rt, n))
	})
}

func genCase(rt *rapid.T, n int) diffCase {
	tc := diffCase{name: fmt.Sprintf("generated %d", n)}
	containerNames := []string{"c1", "c2", "c3", "c4", "app"}
	vols := []string{"v1", "v2"}
	sets := rapid.IntRange(1, 3).Draw(rt, "sets")
	for i := range sets {
		b := diffSet(fmt.Sprintf("pd-g%d-%c", n, 'a'+rune(rapid.IntRange(0, 5).Draw(rt, "name"))+rune(i*6)))
		var cs, ics []v1alpha1.SidecarContainer
		for j := range rapid.IntRange(1, 2).Draw(rt, "containers") {
			name := rapid.SampledFrom(containerNames).Draw(rt, "cname") + fmt.Sprintf("-%d%d", i, j)
			c := testutil.Container(name, diffProxy)
			// A mount of a volume only another set declares depends on
			// the order the policies run in (a listed limit): sets mount
			// what they declare or what the pod may declare.
			if rapid.Bool().Draw(rt, "mount") {
				c = c.VolumeMount(rapid.SampledFrom([]string{"pv", "own"}).Draw(rt, "vol"), "/m")
			}
			cs = append(cs, c.Sidecar(rapid.SampledFrom([]v1alpha1.PodInjectPolicy{"", v1alpha1.AfterAppContainer}).Draw(rt, "policy")))
		}
		for j := range rapid.IntRange(0, 2).Draw(rt, "initContainers") {
			c := testutil.Container(fmt.Sprintf("i-%d%d", i, j), diffProxy)
			if rapid.Bool().Draw(rt, "native") {
				c = c.RestartAlways()
			}
			ics = append(ics, c.Sidecar(rapid.SampledFrom([]v1alpha1.PodInjectPolicy{"", v1alpha1.BeforeAppContainer}).Draw(rt, "ipolicy")))
		}
		b = b.Containers(cs...).InitContainers(ics...)
		if rapid.Bool().Draw(rt, "keep") {
			b = b.JobPods(v1alpha1.JobPodsKeep)
		}
		b = b.Volumes(testutil.EmptyDirVolume("own"))
		if rapid.Bool().Draw(rt, "declares") {
			b = b.Volumes(testutil.EmptyDirVolume(rapid.SampledFrom(vols).Draw(rt, "svol")))
		}
		if rapid.Bool().Draw(rt, "secret") {
			b = b.ImagePullSecrets(rapid.SampledFrom([]string{"s1", "s2"}).Draw(rt, "sname"))
		}
		tc.sets = append(tc.sets, b.Obj())
	}
	p := diffPod("p")
	if rapid.Bool().Draw(rt, "podInit") {
		p = p.InitContainers(testutil.Container("setup", diffApp).Obj())
	}
	if rapid.Bool().Draw(rt, "podVolume") {
		p = p.Volumes(testutil.HostPathVolume(rapid.SampledFrom(append([]string{"pv"}, vols...)).Draw(rt, "pvol"), "/srv"))
	}
	if rapid.Bool().Draw(rt, "job") {
		p = p.RestartPolicy(rapid.SampledFrom([]corev1.RestartPolicy{corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure}).Draw(rt, "restartPolicy"))
	}
	if rapid.Bool().Draw(rt, "podSecret") {
		p = p.ImagePullSecrets("s2")
	}
	tc.pods = []*corev1.Pod{p.Obj()}
	return tc
}

func runDiff(t *testing.T, tc diffCase) {
	t.Helper()
	ctx := t.Context()
	c := env.Client
	probe := testutil.SidecarSet("pd-probe").Selector(map[string]string{"policydiff.example/probe": "true"}).Container("probe-sidecar", diffProxy).Obj()

	// Through the webhook.
	hookNS := diffNamespace(t, tc.nsLabels)
	// stored are the sets as the apiserver stored them (defaulted), which
	// the controller compiles.
	var stored []*v1alpha1.SidecarSet
	for _, s := range append(slices.Clone(tc.sets), probe) {
		s = s.DeepCopy()
		if err := c.Create(ctx, s); err != nil {
			t.Fatalf("create SidecarSet %s: %v", s.Name, err)
		}
		stored = append(stored, s)
	}
	// The cache sees the sets in the order they were created.
	waitProbe(t, hookNS, true)
	hooked := createAll(t, hookNS, tc.pods)
	for _, s := range append(slices.Clone(tc.sets), probe) {
		if err := c.Delete(ctx, s.DeepCopy()); err != nil {
			t.Fatalf("delete SidecarSet %s: %v", s.Name, err)
		}
	}
	waitProbe(t, hookNS, false)

	// Through the policies.
	polNS := diffNamespace(t, tc.nsLabels)
	var compiled []policy.Compiled
	for _, s := range stored {
		cp, err := policy.Compile(s, policy.Options{ManagerNamespace: "sidecarset-system"})
		if err != nil {
			t.Fatalf("compile %s: %v", s.Name, err)
		}
		// The sets are gone: their garbage collection must not take the
		// policies.
		cp.Policy.OwnerReferences, cp.Binding.OwnerReferences = nil, nil
		// Nor the manager's policy controller, which removes the policies
		// of sets that do not exist: unlabelled, under other names.
		cp.Policy.Labels, cp.Binding.Labels = nil, nil
		cp.Policy.Name = "policydiff-" + s.Name
		cp.Binding.Name, cp.Binding.Spec.PolicyName = cp.Policy.Name, cp.Policy.Name
		compiled = append(compiled, cp)
	}
	for _, cp := range compiled {
		if err := c.Create(ctx, cp.Policy); err != nil {
			t.Fatalf("create policy %s: %v", cp.Policy.Name, err)
		}
	}
	for _, cp := range compiled {
		if err := c.Create(ctx, cp.Binding); err != nil {
			t.Fatalf("create binding %s: %v", cp.Binding.Name, err)
		}
	}
	defer func() {
		for _, cp := range compiled {
			_ = c.Delete(context.Background(), cp.Binding)
			_ = c.Delete(context.Background(), cp.Policy)
		}
		// The next case creates objects of the same names.
		for _, cp := range compiled {
			_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, client.ObjectKeyFromObject(cp.Policy), cp.Policy.DeepCopy())
				return apierrors.IsNotFound(err), nil
			})
		}
		waitProbeCtx(context.Background(), t, polNS, false)
	}()
	waitProbe(t, polNS, true)
	policied := createAll(t, polNS, tc.pods)

	for i := range tc.pods {
		if d := podDiff(hooked[i], policied[i]); d != "" {
			t.Errorf("pod %s: webhook (-) and policy (+) differ:\n%s\nsets: %s", tc.pods[i].Name, d, setsJSON(tc.sets))
		}
	}
}

func setsJSON(sets []*v1alpha1.SidecarSet) string {
	var names []string
	for _, s := range sets {
		names = append(names, fmt.Sprintf("%s %+v %+v", s.Name, s.Spec.Containers, s.Spec.InitContainers))
	}
	return strings.Join(names, "; ")
}

func diffNamespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "policydiff-", Labels: labels}}
	if err := env.Client.Create(t.Context(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// waitProbe waits until a dry-run probe pod in ns gets the probe set's
// sidecar (want) or no longer gets it.
func waitProbe(t *testing.T, ns string, want bool) {
	t.Helper()
	waitProbeCtx(t.Context(), t, ns, want)
}

func waitProbeCtx(ctx context.Context, t *testing.T, ns string, want bool) {
	t.Helper()
	last := &corev1.Pod{}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p := testutil.Pod(ns, "probe").Labels(map[string]string{"policydiff.example/probe": "true"}).Containers(testutil.Container("app", diffApp).Obj()).Obj()
		p.Spec.AutomountServiceAccountToken = new(false)
		if err := env.Client.Create(ctx, p, client.DryRunAll); err != nil {
			if apierrors.IsForbidden(err) { // the namespace's service account is not there yet
				return false, nil
			}
			return false, err
		}
		last = p
		got := slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == "probe-sidecar" })
		return got == want, nil
	})
	if err != nil {
		t.Fatalf("wait for the probe pod in %s to be injected=%v: %v; the last probe: containers %d, annotations %v", ns, want, err, len(last.Spec.Containers), last.Annotations)
	}
}

func createAll(t *testing.T, ns string, pods []*corev1.Pod) []*corev1.Pod {
	t.Helper()
	var out []*corev1.Pod
	for _, p := range pods {
		p = p.DeepCopy()
		p.Namespace = ns
		p.Spec.AutomountServiceAccountToken = new(false)
		if err := env.Client.Create(t.Context(), p); err != nil {
			t.Fatalf("create pod %s: %v", p.Name, err)
		}
		out = append(out, p)
	}
	return out
}

// podDiff compares what injection decides in two stored pods: the spec,
// labels, annotations and the records, decoded from either form.
func podDiff(hooked, policied *corev1.Pod) string {
	type view struct {
		Spec        corev1.PodSpec
		Labels      map[string]string
		Annotations map[string]string
		Records     revision.State
		RecordsErr  string
	}
	of := func(p *corev1.Pod) view {
		v := view{Spec: *p.Spec.DeepCopy(), Labels: p.Labels, Annotations: map[string]string{}}
		// Across sets, the policy path appends these in the order the
		// apiserver ran the policies (a listed limit): compared by name.
		slices.SortFunc(v.Spec.Volumes, func(a, b corev1.Volume) int { return strings.Compare(a.Name, b.Name) })
		slices.SortFunc(v.Spec.ImagePullSecrets, func(a, b corev1.LocalObjectReference) int { return strings.Compare(a.Name, b.Name) })
		state, err := revision.Decode(p.Annotations)
		v.Records = state
		if err != nil {
			v.RecordsErr = err.Error()
		}
		for k, val := range p.Annotations {
			if k != v1alpha1.AnnotationState && !strings.HasPrefix(k, revision.PerSetPrefix) &&
				k != v1alpha1.AnnotationSkipped && k != v1alpha1.AnnotationSkippedReasons {
				v.Annotations[k] = val
			}
		}
		return v
	}
	return cmp.Diff(of(hooked), of(policied), cmpopts.EquateEmpty())
}
