package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/bench"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

// The namespaces of the benchmark. The webhook configuration skips the
// manager's own namespace, so the pods of variants A and B are created
// there without any admission webhook.
const (
	managerNamespace   = "sidecarset-system"
	webhookNamespace   = "bench-webhook"
	policyNamespace    = "bench-policy"
	unmatchedNamespace = "bench-unmatched"
)

// podWebhook is the pod webhook's name in the apiserver's metrics.
const podWebhook = "pods.sidecarset.dev"

// benchLabel marks every pod the benchmark creates, so that it deletes
// only those.
const benchLabel = "bench.sidecarset.dev/pod"

// resultsDir is bench/results, from this package's folder.
var resultsDir = filepath.Join("..", "..", "bench", "results")

// BenchmarkAdmission creates pods through a real kube-apiserver for each
// variant (bench.VariantPlain … bench.VariantPolicy), interleaved in every
// round, with 20 and with 200 SidecarSets of which 2 match the pods, and
// writes the results. It runs once whatever b.N: a run takes minutes and
// its figures are ratios within the run.
func BenchmarkAdmission(b *testing.B) {
	sc, err := scaleFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	env := startControlPlane(b, "")
	ctx := b.Context()
	h, err := newHarness(ctx, env, sc, b.Logf)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := h.stopManager(); err != nil {
			b.Error(err)
		}
		removeManagerFiles(b, h.managerLog)
	}()
	report, err := h.run(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := write(report, sc.sets); err != nil {
		b.Fatal(err)
	}
	for _, c := range report.Comparisons {
		if c.Sets != sc.sets {
			continue
		}
		b.ReportMetric(c.P50OverheadMS, c.Variant+"-p50-overhead-ms")
		b.ReportMetric(c.P99Ratio, c.Variant+"-p99-ratio")
		b.ReportMetric(c.BulkRatio, c.Variant+"-bulk-ratio")
		b.ReportMetric(c.ManagerCPUMicrosPerCreate, c.Variant+"-manager-µs/pod")
	}
}

// harness runs the benchmark against one control plane.
type harness struct {
	env   *testenv.Env
	sc    scale
	logf  func(string, ...any)
	admin kubernetes.Interface
	// creator creates the measured pods: protobuf, no client-side rate
	// limit, warnings not printed.
	creator kubernetes.Interface
	binary  string
	// policy says whether the manager offers --injection=policy.
	policy    bool
	apiserver int
	// managers holds a process per injection mode; one runs at a time.
	managers map[string]*testenv.ManagerProcess
	mode     string
	// managerLog receives the managers' output.
	managerLog *os.File
	// floor is the pod the webhook stores for template(), the pod that
	// variant B writes.
	floor *corev1.Pod
	sets  int
}

func newHarness(ctx context.Context, env *testenv.Env, sc scale, logf func(string, ...any)) (*harness, error) {
	h := &harness{env: env, sc: sc, logf: logf, managers: map[string]*testenv.ManagerProcess{}}
	var err error
	if h.admin, err = kubernetes.NewForConfig(env.Config); err != nil {
		return nil, err
	}
	if h.creator, err = fastClient(env.Config); err != nil {
		return nil, err
	}
	if h.apiserver, err = childProcess("kube-apiserver"); err != nil {
		return nil, err
	}
	if h.binary, err = testenv.ManagerBinary(ctx); err != nil {
		return nil, err
	}
	if h.policy, err = offersPolicy(ctx, h.binary); err != nil {
		return nil, err
	}
	if err := createNamespaces(ctx, h.admin, managerNamespace, webhookNamespace, policyNamespace, unmatchedNamespace); err != nil {
		return nil, err
	}
	if h.managerLog, err = os.CreateTemp("", "sidecarset-bench-manager-*.log"); err != nil {
		return nil, err
	}
	return h, nil
}

// offersPolicy reads the manager's --help for an --injection flag that
// takes "policy".
func offersPolicy(ctx context.Context, binary string) (bool, error) {
	// Only the text counts, not how -help exits.
	out, _ := exec.CommandContext(ctx, binary, "--help").CombinedOutput()
	if !strings.Contains(string(out), "Flags:") {
		return false, fmt.Errorf("%s --help printed no flags:\n%s", binary, out)
	}
	return helpOffersPolicy(string(out)), nil
}

// helpOffersPolicy says whether a Go flag package's usage text has an
// -injection flag whose description names "policy". The package prints a
// flag as "  -name type" and its description on the lines after, each
// starting with a tab.
func helpOffersPolicy(help string) bool {
	lines := strings.Split(help, "\n")
	for i, line := range lines {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.TrimLeft(fields[0], "-") != "injection" {
			continue
		}
		block := line
		for _, next := range lines[i+1:] {
			if !strings.HasPrefix(strings.TrimLeft(next, " "), "\t") {
				break
			}
			block += next
		}
		return strings.Contains(block, "policy")
	}
	return false
}

// childProcess finds the process named name that this process started.
func childProcess(name string) (int, error) {
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			// Gone meanwhile.
			continue
		}
		st, err := bench.ParseStat(string(data))
		if err != nil {
			return 0, err
		}
		if st.Command == name && st.Parent == os.Getpid() {
			var pid int
			if _, err := fmt.Sscanf(p, "/proc/%d/stat", &pid); err != nil {
				return 0, err
			}
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no %s process started by process %d", name, os.Getpid())
}

// run measures every variant with sc.sets and then sc.manySets
// SidecarSets, and the webhook calls for unmatched pods with each.
func (h *harness) run(ctx context.Context) (bench.AdmissionReport, error) {
	report := bench.AdmissionReport{
		Scale:       h.sc.name,
		Date:        time.Now().UTC().Format(time.DateOnly),
		Machine:     fmt.Sprintf("%d CPUs, %s, %s", runtime.NumCPU(), runtime.Version(), filepath.Base(os.Getenv(testenv.AssetsEnv))),
		Rounds:      h.sc.rounds,
		PolicyPath:  bench.NotAvailable,
		LoadAverage: loadAverage(),
	}
	if h.policy {
		report.PolicyPath = "available"
	}
	if err := h.switchTo(ctx, "webhook"); err != nil {
		return report, err
	}
	for _, cfg := range []struct {
		sets     int
		rates    []int
		variants []string
	}{
		{h.sc.sets, h.sc.rates, []string{bench.VariantPlain, bench.VariantFloor, bench.VariantWebhook, bench.VariantPolicy}},
		{h.sc.manySets, h.sc.manyRates, []string{bench.VariantFloor, bench.VariantWebhook, bench.VariantPolicy}},
	} {
		if err := h.growSets(ctx, cfg.sets); err != nil {
			return report, err
		}
		if err := h.makeFloor(ctx); err != nil {
			return report, err
		}
		for round := 1; round <= h.sc.rounds; round++ {
			// Every other round runs the variants backwards, so that
			// none always comes first after a switch of manager.
			order := cfg.variants
			if round%2 == 0 {
				order = reversed(order)
			}
			for _, variant := range order {
				if variant == bench.VariantPolicy && !h.policy {
					continue
				}
				phases, err := h.variant(ctx, cfg.sets, round, variant, cfg.rates)
				if err != nil {
					return report, err
				}
				report.Phases = append(report.Phases, phases...)
			}
		}
		unmatched, err := h.unmatched(ctx, cfg.sets)
		if err != nil {
			return report, err
		}
		report.Unmatched = append(report.Unmatched, unmatched...)
	}
	report.LoadAverage += " at the start, " + loadAverage() + " at the end"
	report.Pooled = bench.Pool(report.Phases)
	for _, sets := range []int{h.sc.sets, h.sc.manySets} {
		floor, ok := bench.FiguresOf(report.Pooled, sets, bench.VariantFloor)
		if !ok {
			return report, fmt.Errorf("no floor measured with %d SidecarSets", sets)
		}
		for _, variant := range []string{bench.VariantWebhook, bench.VariantPolicy} {
			if f, ok := bench.FiguresOf(report.Pooled, sets, variant); ok {
				report.Comparisons = append(report.Comparisons, bench.Compare(sets, variant, floor, f))
			}
		}
	}
	return report, nil
}

// loadAverage is the machine's load average over the last minute, from
// /proc/loadavg: how much else ran beside the benchmark.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.Fields(string(data))[0]
}

func reversed(s []string) []string {
	r := make([]string, len(s))
	for i, v := range s {
		r[len(s)-1-i] = v
	}
	return r
}

// variant measures one variant at each rate and then in bulk.
func (h *harness) variant(ctx context.Context, sets, round int, variant string, rates []int) ([]bench.Phase, error) {
	ns, build := h.podsOf(variant)
	switch variant {
	case bench.VariantWebhook:
		if err := h.switchTo(ctx, "webhook"); err != nil {
			return nil, err
		}
	case bench.VariantPolicy:
		if err := h.switchTo(ctx, "policy"); err != nil {
			return nil, err
		}
	}
	var phases []bench.Phase
	for _, rate := range rates {
		p := bench.Phase{Sets: sets, Round: round, Variant: variant, Load: bench.RateLoad(rate)}
		n := int(float64(rate) * h.sc.rateFor.Seconds())
		err := h.measure(ctx, &p, ns, func(create func(context.Context, int) error) result {
			return offered(ctx, rate, n, create)
		}, build)
		if err != nil {
			return nil, err
		}
		phases = append(phases, p)
	}
	p := bench.Phase{Sets: sets, Round: round, Variant: variant, Load: bench.LoadBulk, Clients: h.sc.bulkClients}
	err := h.measure(ctx, &p, ns, func(create func(context.Context, int) error) result {
		return inBulk(ctx, h.sc.bulkClients, h.sc.bulkPods, create)
	}, build)
	if err != nil {
		return nil, err
	}
	return append(phases, p), nil
}

// podsOf returns where a variant creates its pods and how it builds them.
func (h *harness) podsOf(variant string) (string, func(ns, name string) *corev1.Pod) {
	switch variant {
	case bench.VariantPlain:
		return managerNamespace, template
	case bench.VariantFloor:
		return managerNamespace, func(ns, name string) *corev1.Pod {
			p := h.floor.DeepCopy()
			p.Namespace, p.Name = ns, name
			return p
		}
	case bench.VariantWebhook:
		return webhookNamespace, template
	default:
		return policyNamespace, template
	}
}

// measure runs load, creating the pods build makes in ns, and fills p
// with what it measured: latencies, errors, the rate, the CPU the
// apiserver and the manager used meanwhile and the webhook calls the
// apiserver made. It then deletes the pods.
func (h *harness) measure(ctx context.Context, p *bench.Phase, ns string, load func(func(context.Context, int) error) result,
	build func(ns, name string) *corev1.Pod) error {
	prefix := fmt.Sprintf("%s-%d-r%d-%s", strings.ToLower(p.Variant), p.Sets, p.Round, strings.ReplaceAll(p.Load, "/", "p"))
	before, err := h.sample(ctx)
	if err != nil {
		return err
	}
	res := load(func(ctx context.Context, i int) error {
		pod := build(ns, fmt.Sprintf("%s-%05d", prefix, i))
		_, err := h.creator.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	after, err := h.sample(ctx)
	if err != nil {
		return err
	}
	p.Pods, p.Errors, p.FirstError = len(res.latencies), res.errors, res.firstError
	p.Seconds = res.elapsed.Seconds()
	p.Samples = res.ok
	p.Latencies = bench.Summarize(res.ok)
	if p.Seconds > 0 {
		p.AchievedPerSecond = float64(p.Created()) / p.Seconds
	}
	p.APIServerCPUSeconds = (after.apiserver - before.apiserver).Seconds()
	p.ManagerCPUSeconds = (after.manager - before.manager).Seconds()
	p.WebhookCalls = after.webhookCalls - before.webhookCalls
	h.logf("%d sets, round %d, %s %s: %d pods, %d errors, %.0f/s, p50 %.2f ms, p99 %.2f ms, manager %.0f µs/pod, %.0f webhook calls",
		p.Sets, p.Round, p.Variant, p.Load, p.Pods, p.Errors, p.AchievedPerSecond, p.P50, p.P99, p.ManagerCPUMicrosPerCreate(), p.WebhookCalls)
	if p.FirstError != "" {
		h.logf("first error: %s", p.FirstError)
	}
	return h.deletePods(ctx, ns)
}

// sampled is what measure reads before and after a phase.
type sampled struct {
	apiserver, manager time.Duration
	webhookCalls       float64
}

func (h *harness) sample(ctx context.Context) (sampled, error) {
	var s sampled
	var err error
	if s.apiserver, err = bench.ProcessCPU(h.apiserver); err != nil {
		return s, err
	}
	p := h.managers[h.mode]
	select {
	case <-p.Endpoint("").Exited:
		return s, fmt.Errorf("the manager (%s injection) exited; its log: %s", h.mode, h.managerLog.Name())
	default:
	}
	if s.manager, err = bench.ProcessCPU(p.Pid()); err != nil {
		return s, err
	}
	s.webhookCalls, err = h.webhookCalls(ctx)
	return s, err
}

// webhookCalls reads the apiserver's count of calls to the pod webhook.
func (h *harness) webhookCalls(ctx context.Context) (float64, error) {
	raw, err := h.admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the apiserver's metrics: %w", err)
	}
	return bench.CounterSum(bytes.NewReader(raw), "apiserver_admission_webhook_request_total", map[string]string{"name": podWebhook})
}

// deletePods deletes the benchmark's pods in ns and waits until they are
// gone, and then a little longer: the manager hears of the deletes
// before the next phase measures it.
func (h *harness) deletePods(ctx context.Context, ns string) error {
	pods := h.admin.CoreV1().Pods(ns)
	sel := metav1.ListOptions{LabelSelector: benchLabel}
	zero := int64(0)
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, sel); err != nil {
		return fmt.Errorf("delete the pods in %s: %w", ns, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: benchLabel, Limit: 1})
		if err != nil {
			return false, err
		}
		return len(list.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the pods in %s to be gone: %w", ns, err)
	}
	time.Sleep(time.Second)
	return nil
}

// unmatched creates pods no SidecarSet matches with each admission path in
// place and counts the pod webhook's calls for them.
func (h *harness) unmatched(ctx context.Context, sets int) ([]bench.Unmatched, error) {
	paths := []struct{ variant, mode string }{{bench.VariantWebhook, "webhook"}}
	if h.policy {
		paths = append(paths, struct{ variant, mode string }{bench.VariantPolicy, "policy"})
	}
	var out []bench.Unmatched
	for _, path := range paths {
		if err := h.switchTo(ctx, path.mode); err != nil {
			return nil, err
		}
		p := bench.Phase{Sets: sets, Variant: path.variant, Load: "unmatched", Clients: h.sc.bulkClients}
		err := h.measure(ctx, &p, unmatchedNamespace, func(create func(context.Context, int) error) result {
			return inBulk(ctx, h.sc.bulkClients, h.sc.unmatchedPods, create)
		}, func(ns, name string) *corev1.Pod {
			pod := template(ns, name)
			pod.Labels["app"] = "no-set-selects-this"
			return pod
		})
		if err != nil {
			return nil, err
		}
		if p.Errors > 0 {
			return nil, fmt.Errorf("%d of %d unmatched pods failed to be created: %s", p.Errors, p.Pods, p.FirstError)
		}
		out = append(out, bench.Unmatched{Sets: sets, Variant: path.variant, Pods: p.Pods, WebhookCalls: p.WebhookCalls,
			Goal: bench.UnmatchedGoal(p.WebhookCalls)})
	}
	return out, nil
}

// template is the pod every variant but B creates: one container, with
// the labels the two matching SidecarSets select.
func template(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "bench", benchLabel: "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "app",
			Image: image("app"),
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
		}}},
	}
}

// image is a reference by digest: no warning for a tag.
func image(name string) string {
	return fmt.Sprintf("registry.example/%s@sha256:%x", name, sha256.Sum256([]byte(name)))
}

// matching are the two SidecarSets that select the benchmark's pods.
var matching = []string{"bench-match-0", "bench-match-1"}

// growSets creates SidecarSets up to n: the two matching ones first, the
// others selecting pods that do not exist. It waits until the manager has
// reconciled every one, so that its cache holds them.
func (h *harness) growSets(ctx context.Context, n int) error {
	for i := h.sets; i < n; i++ {
		name, app := fmt.Sprintf("bench-other-%03d", i), fmt.Sprintf("other-%03d", i)
		if i < len(matching) {
			name, app = matching[i], "bench"
		}
		set := &v1alpha1.SidecarSet{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.SidecarSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
				Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{
					Name:  "sidecar-" + name,
					Image: image(name),
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
						Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
					},
				}}},
			},
		}
		if err := h.env.Client.Create(ctx, set); err != nil {
			return fmt.Errorf("create SidecarSet %s: %w", name, err)
		}
	}
	h.sets = n
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &v1alpha1.SidecarSetList{}
		if err := h.env.Client.List(ctx, list); err != nil {
			return false, err
		}
		if len(list.Items) != n {
			return false, nil
		}
		for _, s := range list.Items {
			if s.Status.ObservedGeneration != s.Generation {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the manager to reconcile %d SidecarSets: %w", n, err)
	}
	return nil
}

// makeFloor takes the pod the webhook stores for template() from a
// server-side dry run, as variant B's pod.
func (h *harness) makeFloor(ctx context.Context) error {
	if err := h.switchTo(ctx, "webhook"); err != nil {
		return err
	}
	got, err := h.injected(ctx, webhookNamespace)
	if err != nil {
		return err
	}
	floor := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Labels: got.Labels, Annotations: got.Annotations},
		Spec:       got.Spec,
	}
	h.floor = floor
	return nil
}

// injected dry-runs the creation of template() in ns and returns the pod
// as the apiserver would store it, once both matching SidecarSets are
// injected into it.
func (h *harness) injected(ctx context.Context, ns string) (*corev1.Pod, error) {
	want := strings.Join(matching, ",")
	var got *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pod, err := h.creator.CoreV1().Pods(ns).Create(ctx, template(ns, "probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, fmt.Errorf("dry-run a pod in %s: %w", ns, err)
		}
		got = pod
		return pod.Annotations[v1alpha1.AnnotationInjected] == want, nil
	})
	if err != nil {
		injected := ""
		if got != nil {
			injected = got.Annotations[v1alpha1.AnnotationInjected]
		}
		return nil, fmt.Errorf("wait for pods in %s to get %s injected (last: %q): %w", ns, want, injected, err)
	}
	return got, nil
}

// switchTo runs the manager with --injection=mode (only "webhook" and no
// flag when the manager has no policy path) and waits until it leads and
// pods get their sidecars the way mode says.
func (h *harness) switchTo(ctx context.Context, mode string) error {
	if h.mode == mode {
		return nil
	}
	if err := h.stopManager(); err != nil {
		return err
	}
	p, ok := h.managers[mode]
	if !ok {
		// Stopped at once: the benchmark switches managers between
		// phases, with nothing in flight. One manager runs at a time, so
		// it needs no Lease, which a loaded machine could make it lose.
		args := []string{"--shutdown-drain=0s", "--leader-elect=false"}
		if h.policy {
			args = append(args, "--injection="+mode)
		}
		var err error
		p, err = h.env.NewManagerProcess(testenv.ProcessOptions{Binary: h.binary, Namespace: managerNamespace, Args: args, Output: h.managerLog})
		if err != nil {
			return err
		}
		h.managers[mode] = p
	}
	if err := p.Start(ctx); err != nil {
		return fmt.Errorf("start the manager with %s injection (its log: %s): %w", mode, h.managerLog.Name(), err)
	}
	h.mode = mode
	ns := webhookNamespace
	if mode == "policy" {
		ns = policyNamespace
	}
	if h.sets >= len(matching) {
		if _, err := h.injected(ctx, ns); err != nil {
			return err
		}
	}
	return nil
}

func (h *harness) stopManager() error {
	if h.mode == "" {
		return nil
	}
	err := h.managers[h.mode].Stop()
	h.mode = ""
	return err
}

// write writes admission.json and admission.md under bench/results and
// merges the report's keys for sets SidecarSets into summary.json.
func write(r bench.AdmissionReport, sets int) error {
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		return err
	}
	return writeResults(results{name: "admission", report: r, markdown: md.Bytes(), summary: r.Summary(sets), scale: r.Scale})
}
