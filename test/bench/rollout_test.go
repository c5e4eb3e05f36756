package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/bench"
	"github.com/sidecarset/sidecarset/internal/stack"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

// The rollout benchmark's namespaces and its SidecarSet: the controller
// rolls out the pods of one, the baseline writes those of the other, which
// no SidecarSet selects.
const (
	rolloutNamespace  = "bench-rollout"
	baselineNamespace = "bench-baseline"
	rolloutSet        = "bench-rollout"
	// sidecar names the SidecarSet's container, which both kinds of
	// phase update.
	sidecar = "exporter"
)

// strategies are the maxUnavailable values every size is rolled out with.
var strategies = []string{"100%", "10%"}

// phaseTimeout bounds one rollout phase and one wait for pods.
const phaseTimeout = 30 * time.Minute

// BenchmarkRollout rolls a new sidecar image out over every size's pods,
// by the controller and by the raw baseline (baselineRollout), with
// maxUnavailable 100% and 10%, rounds times, the two kinds interleaved and
// the first of them alternating between rounds, on simulated nodes that
// act at once. It writes rollout.json, rollout.md, a chart of the smaller
// size's first round per maxUnavailable, and its keys of summary.json. It
// runs once whatever b.N: its figures are ratios within the run.
func BenchmarkRollout(b *testing.B) {
	sc, err := rolloutScaleFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	testenv.SetLogger()
	opts := stack.TestOptions()
	// Nothing here needs workloads, garbage collection or budgets.
	opts.ControllerManager = false
	sys, err := stack.Start(b.Context(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := sys.Stop(); err != nil {
			b.Error(err)
		}
	}()
	h, err := newRolloutHarness(b.Context(), sys.Env, sc, b.Logf)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := h.stop(); err != nil {
			b.Error(err)
		}
	}()
	// Written after every size: a run stopped in the larger one keeps the
	// smaller one's results.
	report, err := h.run(b.Context(), writeRollout)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range report.Comparisons {
		b.ReportMetric(c.Ratio, fmt.Sprintf("ratio-%d-mu%s", c.Pods, strings.TrimSuffix(c.MaxUnavailable, "%")))
	}
}

// rolloutHarness runs the rollout benchmark against one control plane.
type rolloutHarness struct {
	env  *testenv.Env
	sc   rolloutScale
	logf func(string, ...any)
	// admin reads and watches; creator creates the pods, fast.
	admin   client.WithWatch
	creator kubernetes.Interface
	// metrics reads the apiserver's /metrics.
	metrics rest.Interface
	// base is the baseline's writer and cache, with the manager's client
	// settings.
	base *baseline
	// pods is how many pods each namespace holds; version the last image
	// tag written.
	pods, version int
	// template is the pod the webhook made of the controller's first pod:
	// the baseline's pods are copies of it.
	template *corev1.Pod
	// statusWrites is the controller's last count of status writes for a
	// size and maxUnavailable, which the baseline then makes.
	statusWrites map[string]int
}

func newRolloutHarness(ctx context.Context, env *testenv.Env, sc rolloutScale, logf func(string, ...any)) (*rolloutHarness, error) {
	h := &rolloutHarness{env: env, sc: sc, logf: logf, version: 1, statusWrites: map[string]int{}}
	var err error
	if h.admin, err = client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme}); err != nil {
		return nil, err
	}
	fast := rest.CopyConfig(env.Config)
	fast.QPS, fast.Burst = -1, 0
	fast.ContentType = "application/vnd.kubernetes.protobuf"
	fast.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	fast.WarningHandler = rest.NoWarnings{}
	cs, err := kubernetes.NewForConfig(fast)
	if err != nil {
		return nil, err
	}
	h.creator, h.metrics = cs, cs.CoreV1().RESTClient()
	for _, ns := range []string{rolloutNamespace, baselineNamespace} {
		if err := h.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	set := &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: rolloutSet},
		Spec: v1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": rolloutSet}},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: sidecar, Image: "exporter:v1"}}},
			// The baseline's raw patches wait for no pod: neither does
			// the controller, so that the two compare.
			UpdateStrategy: v1alpha1.UpdateStrategy{MinReadySeconds: ptr.To[int32](0)},
		},
	}
	if err := h.admin.Create(ctx, set); err != nil {
		return nil, fmt.Errorf("create SidecarSet: %w", err)
	}
	if err := testenv.WaitObserved(ctx, h.admin, rolloutSet); err != nil {
		return nil, err
	}
	if h.base, err = newBaseline(ctx, env, baselineNamespace, sidecar); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *rolloutHarness) stop() error { return h.base.stop() }

// run measures every size, smaller first, growing the pods in between, and
// hands the report so far to write after each.
func (h *rolloutHarness) run(ctx context.Context, write func(bench.RolloutReport) error) (bench.RolloutReport, error) {
	report := bench.RolloutReport{
		Scale:       h.sc.name,
		Date:        time.Now().UTC().Format(time.DateOnly),
		Machine:     fmt.Sprintf("%d CPUs, %s, %s", runtime.NumCPU(), runtime.Version(), filepath.Base(os.Getenv(testenv.AssetsEnv))),
		Rounds:      h.sc.rounds,
		Sizes:       h.sc.sizes,
		LoadAverage: loadAverage(),
		Concurrency: baselineWriters,
	}
	done := report
	for i, size := range h.sc.sizes {
		if err := h.grow(ctx, size); err != nil {
			return report, err
		}
		for round := 1; round <= h.sc.rounds[i]; round++ {
			for _, mu := range strategies {
				kinds := []string{bench.KindController, bench.KindBaseline}
				if round%2 == 0 {
					kinds = []string{bench.KindBaseline, bench.KindController}
				}
				for _, kind := range kinds {
					p, err := h.phase(ctx, kind, mu, round)
					if err != nil {
						return report, err
					}
					report.Phases = append(report.Phases, p)
				}
			}
		}
		done = report
		done.LoadAverage += " at the start, " + loadAverage() + " at the end"
		done.Comparisons = bench.CompareRollouts(done.Phases, done.Sizes)
		if err := write(done); err != nil {
			return done, err
		}
	}
	return done, nil
}

// phase runs one rollout of the next image to every pod of the kind's
// namespace and returns what it measured.
func (h *rolloutHarness) phase(ctx context.Context, kind, mu string, round int) (bench.RolloutPhase, error) {
	h.version++
	image := fmt.Sprintf("exporter:v%d", h.version)
	p := bench.RolloutPhase{Pods: h.pods, MaxUnavailable: mu, Round: round, Kind: kind}
	before, err := h.writes(ctx)
	if err != nil {
		return p, err
	}
	key := fmt.Sprintf("%d/%s", h.pods, mu)
	switch kind {
	case bench.KindController:
		err = h.controllerRollout(ctx, &p, image)
	default:
		var record string
		if record, err = h.record(ctx); err == nil {
			err = h.base.rollout(ctx, &p, image, intstr.FromString(mu), h.statusWrites[key], record)
		}
	}
	if err != nil {
		return p, fmt.Errorf("%s rollout of %d pods, maxUnavailable %s, round %d: %w", kind, h.pods, mu, round, err)
	}
	after, err := h.writes(ctx)
	if err != nil {
		return p, err
	}
	p.PodPatches = after.podPatches - before.podPatches
	p.StatusWrites = after.statusWrites - before.statusWrites
	p.Events = after.events - before.events
	if kind == bench.KindController {
		h.statusWrites[key] = int(p.StatusWrites)
	}
	h.logf("%d pods, maxUnavailable %s, round %d, %s: %.1f s, %.0f pod patches, %.0f status writes, %.0f events, %d conflicts",
		p.Pods, mu, round, kind, p.Seconds, p.PodPatches, p.StatusWrites, p.Events, p.Conflicts)
	return p, nil
}

// controllerRollout declares image and maxUnavailable mu in the SidecarSet
// and follows its status until it says Complete with every pod updated and
// ready.
func (h *rolloutHarness) controllerRollout(ctx context.Context, p *bench.RolloutPhase, image string) error {
	set := &v1alpha1.SidecarSet{}
	if err := h.admin.Get(ctx, client.ObjectKey{Name: rolloutSet}, set); err != nil {
		return err
	}
	set.Spec.Containers[0].Image = image
	set.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromString(p.MaxUnavailable))
	start := time.Now()
	// Nothing else writes the spec; the controller writes only the status,
	// which an update leaves alone.
	if err := h.admin.Update(ctx, set); err != nil {
		return fmt.Errorf("update SidecarSet: %w", err)
	}
	gen, pods := set.Generation, int32(h.pods)
	progress := &progressLog{start: start}
	var last v1alpha1.SidecarSetStatus
	err := h.watchSet(ctx, set.ResourceVersion, func(s *v1alpha1.SidecarSet) bool {
		if s.Status.ObservedGeneration < gen {
			return false
		}
		last = s.Status
		progress.add(int(s.Status.UpdatedPods), int(s.Status.UpdatedReadyPods))
		return meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionComplete) &&
			s.Status.MatchedPods == pods && s.Status.UpdatedPods == pods && s.Status.UpdatedReadyPods == pods
	})
	if err != nil {
		return fmt.Errorf("wait for Complete with %d pods (last status: %d matched, %d updated, %d updated and ready): %w",
			pods, last.MatchedPods, last.UpdatedPods, last.UpdatedReadyPods, err)
	}
	p.Seconds = time.Since(start).Seconds()
	p.Progress = progress.final(int(last.UpdatedPods), int(last.UpdatedReadyPods))
	return nil
}

// watchSet watches the SidecarSet from resourceVersion rv until done says
// so, within phaseTimeout.
func (h *rolloutHarness) watchSet(ctx context.Context, rv string, done func(*v1alpha1.SidecarSet) bool) error {
	ctx, cancel := context.WithTimeout(ctx, phaseTimeout)
	defer cancel()
	lw := &toolscache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = "metadata.name=" + rolloutSet
			return h.admin.Watch(ctx, &v1alpha1.SidecarSetList{}, &client.ListOptions{Raw: &opts})
		},
	}
	_, err := watchtools.Until(ctx, rv, lw, func(ev watch.Event) (bool, error) {
		set, ok := ev.Object.(*v1alpha1.SidecarSet)
		if !ok || ev.Type == watch.Deleted {
			return false, fmt.Errorf("unexpected watch event %s", ev.Type)
		}
		return done(set), nil
	})
	return err
}

// writes is what the apiserver counted of the writes a phase is measured
// by (bench.RolloutPhase).
type writeCounts struct{ podPatches, statusWrites, events float64 }

func (h *rolloutHarness) writes(ctx context.Context) (writeCounts, error) {
	raw, err := h.metrics.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return writeCounts{}, fmt.Errorf("read the apiserver's metrics: %w", err)
	}
	exposition, err := bench.ParseExposition(bytes.NewReader(raw))
	if err != nil {
		return writeCounts{}, err
	}
	sum := func(labels map[string]string) float64 {
		if err != nil {
			return 0
		}
		var v float64
		v, err = exposition.CounterSum("apiserver_request_total", labels)
		return v
	}
	// The nodes write pod status through the status subresource, which
	// the count of all pod patches includes.
	c := writeCounts{
		podPatches: sum(map[string]string{"verb": "PATCH", "resource": "pods"}) -
			sum(map[string]string{"verb": "PATCH", "resource": "pods", "subresource": "status"}),
		statusWrites: sum(map[string]string{"verb": "PATCH", "resource": "sidecarsets", "subresource": "status"}) +
			sum(map[string]string{"verb": "PUT", "resource": "sidecarsets", "subresource": "status"}),
		events: sum(map[string]string{"verb": "POST", "group": "events.k8s.io", "resource": "events"}) +
			sum(map[string]string{"verb": "PATCH", "group": "events.k8s.io", "resource": "events"}),
	}
	return c, err
}

// grow creates pods in both namespaces up to n each, and waits until the
// SidecarSet counts the controller's all updated and ready and the
// baseline's cache sees its own Ready.
func (h *rolloutHarness) grow(ctx context.Context, n int) error {
	start := time.Now()
	if h.template == nil {
		if err := h.createPods(ctx, rolloutNamespace, 1, 1, h.rolloutPod); err != nil {
			return err
		}
		got, err := h.creator.CoreV1().Pods(rolloutNamespace).Get(ctx, podName(1), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Annotations[v1alpha1.AnnotationInjected] != rolloutSet {
			return fmt.Errorf("pod %s was not injected with %s (annotations %v)", got.Name, rolloutSet, got.Annotations)
		}
		h.template = got
		if err := h.createPods(ctx, baselineNamespace, 1, 1, h.baselinePod); err != nil {
			return err
		}
		h.pods = 1
	}
	if err := h.createPods(ctx, rolloutNamespace, h.pods+1, n, h.rolloutPod); err != nil {
		return err
	}
	if err := h.createPods(ctx, baselineNamespace, h.pods+1, n, h.baselinePod); err != nil {
		return err
	}
	h.pods = n
	err := wait.PollUntilContextTimeout(ctx, time.Second, phaseTimeout, true, func(ctx context.Context) (bool, error) {
		set := &v1alpha1.SidecarSet{}
		if err := h.admin.Get(ctx, client.ObjectKey{Name: rolloutSet}, set); err != nil {
			return false, err
		}
		s := set.Status
		return s.MatchedPods == int32(n) && s.UpdatedReadyPods == int32(n) && h.base.ready(h.base.image) == n, nil
	})
	if err != nil {
		return fmt.Errorf("wait for %d pods in each namespace to be Ready: %w", n, err)
	}
	h.logf("%d pods in each namespace, Ready in %.0f s", n, time.Since(start).Seconds())
	return nil
}

// rolloutPod is the pod the controller's namespace gets, before injection.
func (h *rolloutHarness) rolloutPod(i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: rolloutNamespace, Name: podName(i), Labels: map[string]string{"app": rolloutSet}},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "app", Image: "mysql:8.4"}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
}

// baselinePod is a copy of the injected template, with the sidecar on the
// image the controller's pods run now, in the baseline's namespace and with
// labels no SidecarSet selects: the manager neither caches nor counts it.
func (h *rolloutHarness) baselinePod(i int) *corev1.Pod {
	image := h.base.image
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: baselineNamespace, Name: podName(i), Labels: map[string]string{"app": "bench-baseline"},
			Annotations: map[string]string{v1alpha1.AnnotationState: h.template.Annotations[v1alpha1.AnnotationState]}},
		Spec: *h.template.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = ""
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == sidecar {
			pod.Spec.Containers[i].Image = image
		}
	}
	return pod
}

// record is the state annotation of the controller's first pod, which the
// baseline writes into its own: a record of the same size.
func (h *rolloutHarness) record(ctx context.Context) (string, error) {
	pod, err := h.creator.CoreV1().Pods(rolloutNamespace).Get(ctx, podName(1), metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read the controller's record: %w", err)
	}
	return pod.Annotations[v1alpha1.AnnotationState], nil
}

func podName(i int) string { return fmt.Sprintf("p%05d", i) }

// createWriters is how many pods are created at once.
const createWriters = 32

// createPods creates the pods from to to (both included) that build makes.
func (h *rolloutHarness) createPods(ctx context.Context, ns string, from, to int, build func(int) *corev1.Pod) error {
	if from > to {
		return nil
	}
	next := make(chan int)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range createWriters {
		wg.Go(func() {
			for i := range next {
				_, err := h.creator.CoreV1().Pods(ns).Create(ctx, build(i), metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					mu.Lock()
					errs = append(errs, fmt.Errorf("create pod %s/%s: %w", ns, podName(i), err))
					mu.Unlock()
				}
			}
		})
	}
	for i := from; i <= to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d pods not created, the first: %w", len(errs), to-from+1, errs[0])
	}
	return nil
}

// progressLog keeps a phase's progress, at most one sample per
// progressStep and every change of the last one.
type progressLog struct {
	start   time.Time
	samples []bench.Progress
}

const progressStep = 100 * time.Millisecond

func (l *progressLog) add(updated, ready int) {
	s := bench.Progress{Seconds: time.Since(l.start).Seconds(), Updated: updated, UpdatedReady: ready}
	if n := len(l.samples); n > 0 {
		last := l.samples[n-1]
		if last.Updated == updated && last.UpdatedReady == ready {
			return
		}
		if s.Seconds-last.Seconds < progressStep.Seconds() {
			return
		}
	}
	l.samples = append(l.samples, s)
}

// final returns the samples with the phase's end.
func (l *progressLog) final(updated, ready int) []bench.Progress {
	return append(l.samples, bench.Progress{Seconds: time.Since(l.start).Seconds(), Updated: updated, UpdatedReady: ready})
}

// writeRollout writes rollout.json, rollout.md and the charts under
// bench/results and merges the report's keys into summary.json.
func writeRollout(r bench.RolloutReport) error {
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		return err
	}
	charts := map[string][]byte{}
	for _, chart := range r.Charts() {
		var png bytes.Buffer
		if err := chart.WritePNG(&png); err != nil {
			return err
		}
		charts[chart.File] = png.Bytes()
		fmt.Fprintf(&md, "\n![%s](%s)\n", chart.Title, chart.File)
	}
	return writeResults(results{name: "rollout", report: r, markdown: md.Bytes(), files: charts, summary: r.Summary(), scale: r.Scale})
}
