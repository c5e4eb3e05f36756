package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/bench"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

// memoryScale is how many pods the memory benchmark creates.
type memoryScale struct {
	name string
	// unmanaged pods come first, then managed[0] managed pods, then
	// managed[1] in all.
	unmanaged int
	managed   [2]int
	// settleFor bounds the wait for the RSS to stop falling.
	settleFor time.Duration
}

var memoryScales = map[string]memoryScale{
	"full":  {name: "full", unmanaged: 40_000, managed: [2]int{1_000, 10_000}, settleFor: 2 * time.Minute},
	"small": {name: "small", unmanaged: 2_000, managed: [2]int{250, 2_000}, settleFor: 15 * time.Second},
}

func memoryScaleFromEnv() (memoryScale, error) { return fromEnv(memoryScales) }

// memoryNamespace holds the memory benchmark's pods.
const memoryNamespace = "bench-memory"

// unmanagedPopulation says which pods the benchmark's unmanaged ones are.
const unmanagedPopulation = "pods the SidecarSet selects that opted out (sidecarset.dev/inject: \"false\"), " +
	"counted in its status.unmanagedPods; the manager lists them as metadata and caches none of them, " +
	"so pods no set selects cost it no more than these"

// BenchmarkMemory measures the manager process's RSS and Go heap with no
// pod, with the unmanaged pods, and then with two counts of managed pods
// among them, and writes bench/results/memory.json, memory.md, memory.png
// and its keys of summary.json. The manager is started afresh at each
// step, once the pods are in place, and measured once its status counts
// them all: a full resync, as after a restart or an upgrade. It runs once
// whatever b.N.
func BenchmarkMemory(b *testing.B) {
	sc, err := memoryScaleFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	// The pods are created while no manager runs: the pod webhook must
	// let them through meanwhile.
	env := startControlPlane(b, admissionregistrationv1.Ignore)
	ctx := b.Context()
	m, err := newMemoryHarness(ctx, env, sc, b.Logf)
	if err != nil {
		b.Fatal(err)
	}
	defer removeManagerFiles(b, m.log)
	report, err := m.run(ctx)
	if err != nil {
		b.Fatalf("%v (the manager's log: %s)", err, m.log.Name())
	}
	if err := writeMemory(report); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(report.RSSPerManagedPod, "rss-B/managed-pod")
	b.ReportMetric(report.RSSPerUnmanagedPod, "rss-B/unmanaged-pod")
	b.ReportMetric(report.HeapPerManagedPod, "heap-B/managed-pod")
}

// memoryHarness runs the memory benchmark against one control plane.
type memoryHarness struct {
	env  *testenv.Env
	sc   memoryScale
	logf func(string, ...any)
	// creator writes the pods: protobuf, no client-side rate limit.
	creator kubernetes.Interface
	process *testenv.ManagerProcess
	pprof   string
	log     *os.File
	set     *v1alpha1.SidecarSet
	// managed and unmanaged count the pods created so far.
	managed, unmanaged int
}

func newMemoryHarness(ctx context.Context, env *testenv.Env, sc memoryScale, logf func(string, ...any)) (*memoryHarness, error) {
	m := &memoryHarness{env: env, sc: sc, logf: logf}
	var err error
	if m.creator, err = fastClient(env.Config); err != nil {
		return nil, err
	}
	if err := createNamespaces(ctx, m.creator, managerNamespace, memoryNamespace); err != nil {
		return nil, err
	}
	binary, err := testenv.ManagerBinary(ctx)
	if err != nil {
		return nil, err
	}
	port, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	m.pprof = "127.0.0.1:" + strconv.Itoa(port)
	if m.log, err = os.CreateTemp("", "sidecarset-bench-memory-*.log"); err != nil {
		return nil, err
	}
	// One manager runs at a time and stops at once between steps.
	args := []string{"--shutdown-drain=0s", "--leader-elect=false", "--pprof-bind-address=" + m.pprof}
	m.process, err = env.NewManagerProcess(testenv.ProcessOptions{Binary: binary, Namespace: managerNamespace, Args: args, Output: m.log})
	return m, err
}

// run measures the four steps and judges them.
func (m *memoryHarness) run(ctx context.Context) (bench.MemoryReport, error) {
	report := bench.MemoryReport{
		Scale:       m.sc.name,
		Date:        time.Now().UTC().Format(time.DateOnly),
		Machine:     fmt.Sprintf("%d CPUs, %s, %s", runtime.NumCPU(), runtime.Version(), filepath.Base(os.Getenv(testenv.AssetsEnv))),
		LoadAverage: loadAverage(),
		Unmanaged:   unmanagedPopulation,
	}
	steps := []struct {
		name               string
		unmanaged, managed int
	}{
		{"no pods", 0, 0},
		{"unmanaged pods", m.sc.unmanaged, 0},
		{fmt.Sprintf("%d managed pods", m.sc.managed[0]), m.sc.unmanaged, m.sc.managed[0]},
		{fmt.Sprintf("%d managed pods", m.sc.managed[1]), m.sc.unmanaged, m.sc.managed[1]},
	}
	for _, s := range steps {
		if err := m.grow(ctx, s.unmanaged, s.managed); err != nil {
			return report, err
		}
		step, err := m.measure(ctx, s.name)
		if err != nil {
			return report, err
		}
		m.logf("%s: %d managed, %d unmanaged: RSS %.1f MiB (peak %.1f), heap in use %.1f MiB, resync %.1fs",
			step.Name, step.ManagedPods, step.UnmanagedPods, float64(step.Memory.RSS)/(1<<20), float64(step.Memory.Peak)/(1<<20),
			float64(step.HeapInuse)/(1<<20), step.ResyncSeconds)
		report.Steps = append(report.Steps, step)
	}
	report.LoadAverage += " at the start, " + loadAverage() + " at the end"
	return report, report.Judge()
}

// grow creates pods, with no manager running, up to unmanaged and managed.
func (m *memoryHarness) grow(ctx context.Context, unmanaged, managed int) error {
	if m.set == nil {
		return nil
	}
	start := time.Now()
	if n := unmanaged - m.unmanaged; n > 0 {
		if err := m.create(ctx, "unmanaged", m.unmanaged, n, m.unmanagedPod, nil); err != nil {
			return err
		}
		m.unmanaged = unmanaged
	}
	if n := managed - m.managed; n > 0 {
		if err := m.create(ctx, "managed", m.managed, n, m.managedPod, runningStatus); err != nil {
			return err
		}
		m.managed = managed
	}
	m.logf("%d unmanaged and %d managed pods in place after %s", m.unmanaged, m.managed, time.Since(start).Round(time.Second))
	return nil
}

// create creates n pods named prefix-<from>… and, when status is given,
// writes each one's status as a node would.
func (m *memoryHarness) create(ctx context.Context, prefix string, from, n int, build func(name string) *corev1.Pod,
	status func(*corev1.Pod) corev1.PodStatus) error {
	pods := m.creator.CoreV1().Pods(memoryNamespace)
	res := inBulk(ctx, 16, n, func(ctx context.Context, i int) error {
		created, err := pods.Create(ctx, build(fmt.Sprintf("%s-%05d", prefix, from+i)), metav1.CreateOptions{})
		if err != nil || status == nil {
			return err
		}
		created.Status = status(created)
		_, err = pods.UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
	if res.errors > 0 {
		return fmt.Errorf("%d of %d %s pods failed to be created: %s", res.errors, n, prefix, res.firstError)
	}
	return nil
}

// measure starts the manager, waits until the set's status counts every
// pod, collects its heap, waits for its RSS to settle, reads it and
// stops the manager.
func (m *memoryHarness) measure(ctx context.Context, name string) (step bench.MemoryStep, err error) {
	step = bench.MemoryStep{Name: name, ManagedPods: m.managed, UnmanagedPods: m.unmanaged}
	start := time.Now()
	if err := m.process.Start(ctx); err != nil {
		return step, fmt.Errorf("start the manager: %w", err)
	}
	defer func() { err = errors.Join(err, m.process.Stop()) }()
	if m.set == nil {
		if m.set, err = m.createSet(ctx); err != nil {
			return step, err
		}
	}
	if err := m.waitCounted(ctx); err != nil {
		return step, err
	}
	step.ResyncSeconds = time.Since(start).Seconds()
	if err := m.collect(ctx); err != nil {
		return step, err
	}
	if step.Memory, err = m.settle(ctx); err != nil {
		return step, err
	}
	heap, err := m.heapInuse(ctx)
	step.HeapInuse = uint64(heap)
	if err != nil {
		return step, err
	}
	return step, m.saveProfile(ctx, name)
}

// ProfileEnv names the environment variable that, when set to a folder,
// makes the memory benchmark save the manager's heap profile at each step
// there, for `go tool pprof`.
const ProfileEnv = "BENCH_HEAP_PROFILES"

func (m *memoryHarness) saveProfile(ctx context.Context, step string) error {
	dir := os.Getenv(ProfileEnv)
	if dir == "" {
		return nil
	}
	profile, err := get(ctx, "http://"+m.pprof+"/debug/pprof/heap")
	if err != nil {
		return err
	}
	name := strings.ReplaceAll(step, " ", "-") + ".pb.gz"
	return os.WriteFile(filepath.Join(dir, name), profile, 0o644)
}

// createSet creates the SidecarSet that selects every pod of the
// benchmark, through the manager's webhooks.
func (m *memoryHarness) createSet(ctx context.Context) (*v1alpha1.SidecarSet, error) {
	set := &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "memory"},
		Spec: v1alpha1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "memory"}},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{
				Name:  "exporter",
				Image: image("exporter"),
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
			}}},
		},
	}
	if err := m.env.Client.Create(ctx, set); err != nil {
		return nil, fmt.Errorf("create SidecarSet %s: %w", set.Name, err)
	}
	return set, nil
}

// waitCounted waits until the set's status, for its current generation,
// counts every pod created: the manager has listed them all.
func (m *memoryHarness) waitCounted(ctx context.Context) error {
	var got v1alpha1.SidecarSet
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := m.env.Client.Get(ctx, client.ObjectKeyFromObject(m.set), &got); err != nil {
			return false, err
		}
		s := got.Status
		return s.ObservedGeneration == got.Generation && s.MatchedPods == int32(m.managed) &&
			s.ReadyPods == int32(m.managed) && s.UnmanagedPods == int32(m.unmanaged), nil
	})
	if err != nil {
		s := got.Status
		return fmt.Errorf("wait for the status to count %d managed (ready) and %d unmanaged pods; it counts %d matched, %d ready, %d unmanaged: %w",
			m.managed, m.unmanaged, s.MatchedPods, s.ReadyPods, s.UnmanagedPods, err)
	}
	return nil
}

// collect makes the manager collect its heap: a heap profile asked with
// gc=1 runs a full collection first.
func (m *memoryHarness) collect(ctx context.Context) error {
	_, err := get(ctx, "http://"+m.pprof+"/debug/pprof/heap?gc=1")
	return err
}

// settle reads the manager's memory every second until its RSS has moved
// by less than 1% over the last five readings, or for sc.settleFor at
// most: the Go runtime gives freed pages back to the kernel gradually.
func (m *memoryHarness) settle(ctx context.Context) (bench.Memory, error) {
	const window = 5
	var readings []bench.Memory
	deadline := time.Now().Add(m.sc.settleFor)
	for {
		mem, err := bench.ProcessMemory(m.process.Pid())
		if err != nil {
			return mem, err
		}
		readings = append(readings, mem)
		if n := len(readings); n >= window {
			lo, hi := mem.RSS, mem.RSS
			for _, r := range readings[n-window:] {
				lo, hi = min(lo, r.RSS), max(hi, r.RSS)
			}
			if float64(hi-lo) <= 0.01*float64(mem.RSS) {
				return mem, nil
			}
		}
		if time.Now().After(deadline) {
			m.logf("RSS still moving after %s: %.1f MiB taken", m.sc.settleFor, float64(mem.RSS)/(1<<20))
			return mem, nil
		}
		select {
		case <-ctx.Done():
			return mem, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (m *memoryHarness) heapInuse(ctx context.Context) (float64, error) {
	body, err := get(ctx, m.process.MetricsURL())
	if err != nil {
		return 0, err
	}
	return bench.Gauge(bytes.NewReader(body), "go_memstats_heap_inuse_bytes")
}

func get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	if _, err := body.ReadFrom(resp.Body); err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get %s: %s", url, resp.Status)
	}
	return body.Bytes(), nil
}

// memoryPod is an application pod as a Deployment would make it, bound
// to a node; the SidecarSet selects it.
func memoryPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: memoryNamespace, Name: name,
			Labels: map[string]string{"app": "memory", "pod-template-hash": "7d9f8c6b5"},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-" + name[len(name)-1:],
			Containers: []corev1.Container{{
				Name:  "app",
				Image: image("app"),
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Env:   []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "PORT", Value: "8080"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
			}},
		},
	}
}

func (m *memoryHarness) unmanagedPod(name string) *corev1.Pod {
	p := memoryPod(name)
	p.Annotations = map[string]string{v1alpha1.AnnotationInject: "false"}
	return p
}

// managedPod carries the sidecar and the records the webhook would have
// written, so that the benchmark does not depend on injection.
func (m *memoryHarness) managedPod(name string) *corev1.Pod {
	spec := &m.set.Spec
	sidecar := spec.Containers[0].Container
	state := revision.State{m.set.Name: {
		Revision:      revision.Name(m.set.Name, spec),
		Hash:          revision.Hash(spec),
		ImagelessHash: revision.ImagelessHash(spec),
		Containers:    []revision.ContainerState{{Name: sidecar.Name, Image: sidecar.Image}},
	}}
	p := memoryPod(name)
	p.Labels[v1alpha1.LabelManaged] = "true"
	p.Annotations = map[string]string{
		v1alpha1.AnnotationInjected: m.set.Name,
		v1alpha1.AnnotationState:    revision.Encode(state),
	}
	p.Spec.Containers = append([]corev1.Container{sidecar}, p.Spec.Containers...)
	return p
}

// runningStatus is the status a kubelet reports for a pod whose
// containers all run and are ready.
func runningStatus(p *corev1.Pod) corev1.PodStatus {
	now := metav1.Now()
	s := corev1.PodStatus{
		Phase:     corev1.PodRunning,
		HostIP:    "10.0.0.1",
		HostIPs:   []corev1.HostIP{{IP: "10.0.0.1"}},
		PodIP:     "10.244.1.2",
		PodIPs:    []corev1.PodIP{{IP: "10.244.1.2"}},
		StartTime: &now,
		QOSClass:  corev1.PodQOSBurstable,
	}
	for _, c := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady,
		corev1.ContainersReady, corev1.PodScheduled} {
		s.Conditions = append(s.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	for i, c := range p.Spec.Containers {
		s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{
			Name:        c.Name,
			Image:       c.Image,
			ImageID:     c.Image,
			ContainerID: fmt.Sprintf("containerd://%s%064d", p.UID, i),
			Ready:       true,
			Started:     new(true),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return s
}

// writeMemory writes memory.json, memory.md and memory.png under
// bench/results and merges the report's keys into summary.json.
func writeMemory(r bench.MemoryReport) error {
	var md, png bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		return err
	}
	if err := r.WritePNG(&png); err != nil {
		return err
	}
	return writeResults(results{name: "memory", report: r, markdown: md.Bytes(),
		files: map[string][]byte{"memory.png": png.Bytes()}, summary: r.Summary(), scale: r.Scale})
}
