package inject_test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/bench"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

// benchCluster returns a namespace, a 5-container pod and 20 SidecarSets of
// which the first matching select the pod (benchClusterOf).
func benchCluster(matching int) (*corev1.Namespace, *corev1.Pod, []*v1alpha1.SidecarSet) {
	return benchClusterOf(20, matching)
}

// benchClusterOf returns a namespace, a 5-container pod and n SidecarSets
// of which the first matching select the pod. Each set declares a regular
// sidecar with resources, a native sidecar, a volume and a pull secret; every
// other set has a namespaceSelector, so both kinds of matching are measured.
func benchClusterOf(n, matching int) (*corev1.Namespace, *corev1.Pod, []*v1alpha1.SidecarSet) {
	ns := testutil.Namespace("shop", map[string]string{"team": "data"})
	pb := testutil.Pod("shop", "db-0").Labels(map[string]string{"app": "db", "tier": "backend"})
	for i := range 5 {
		pb.Containers(testutil.Container(fmt.Sprintf("app-%d", i), "registry.example/app@sha256:0123").
			Requests("100m", "128Mi").Limits("100m", "128Mi").VolumeMount("data", "/data").Obj())
	}
	pod := pb.Volumes(testutil.EmptyDirVolume("data")).Obj()

	sets := make([]*v1alpha1.SidecarSet, n)
	for i := range sets {
		name := fmt.Sprintf("set-%03d", i)
		app := "db"
		if i >= matching {
			app = fmt.Sprintf("other-%d", i)
		}
		b := testutil.SidecarSet(name).
			Selector(map[string]string{"app": app, "tier": "backend"}).
			Containers(testutil.Container(name+"-agent", "registry.example/agent@sha256:4567").
				Requests("10m", "16Mi").Limits("10m", "16Mi").VolumeMount(name+"-run", "/run/agent").
				Sidecar(v1alpha1.AfterAppContainer)).
			InitContainers(testutil.Container(name+"-proxy", "registry.example/proxy@sha256:89ab").
				Requests("10m", "16Mi").Limits("10m", "16Mi").RestartAlways().Sidecar("")).
			Volumes(testutil.EmptyDirVolume(name + "-run")).
			ImagePullSecrets("registry-example")
		if i%2 == 1 {
			b.NamespaceSelector(map[string]string{"team": "data"})
		}
		sets[i] = b.Obj()
		// As read from the apiserver, so Cache can keep them.
		sets[i].UID = types.UID(fmt.Sprintf("uid-%03d", i))
		sets[i].ResourceVersion = "1"
	}
	return ns, pod, sets
}

// injectSets are the numbers of SidecarSets in the webhook's cache that
// BenchmarkInjectPod measures; at most injectMatching of them select the
// pod, as a few sets do in a cluster with many.
var injectSets = []int{1, 20, 200}

const injectMatching = 3

// BenchmarkInjectPod injects a 5-container pod against 1, 20 and 200
// SidecarSets with a Cache, as the webhook does for every pod created. The
// goal is 30µs/op with 20 sets (bench.InjectGoal).
func BenchmarkInjectPod(b *testing.B) {
	for _, n := range injectSets {
		b.Run(fmt.Sprintf("sets=%d", n), injectLoop(n))
	}
}

// injectLoop is BenchmarkInjectPod's body for n SidecarSets.
func injectLoop(n int) func(*testing.B) {
	return func(b *testing.B) {
		matching := min(n, injectMatching)
		ns, pod, sets := benchClusterOf(n, matching)
		opts := inject.Options{ManagerNamespace: "sidecarset-system", Cache: &inject.Cache{}}
		b.ReportAllocs()
		for b.Loop() {
			res := inject.Inject(pod, ns, sets, opts)
			if len(res.Injected) != matching {
				b.Fatalf("injected %d sets, want %d", len(res.Injected), matching)
			}
		}
	}
}

// injectRepetitions is how many times BenchmarkInjectPodMedian runs each
// size, for injectRepetitionTime each; its figures are the medians.
const (
	injectRepetitions    = 5
	injectRepetitionTime = 500 * time.Millisecond
)

// BenchmarkInjectPodMedian runs BenchmarkInjectPod's sizes
// injectRepetitions times each, one after the other, and writes the
// medians to bench/results/inject.json and inject.md and the keys
// inject_ns_per_op_N_sets of summary.json. It runs once whatever b.N.
// (testing.Benchmark cannot run inside a benchmark, so it times its
// repetitions itself.)
func BenchmarkInjectPodMedian(b *testing.B) {
	report := bench.InjectReport{Date: time.Now().UTC().Format(time.DateOnly), Repetitions: injectRepetitions,
		Machine: fmt.Sprintf("%d CPUs, %s", runtime.NumCPU(), runtime.Version()), Matching: injectMatching}
	for _, n := range injectSets {
		matching := min(n, injectMatching)
		ns, pod, sets := benchClusterOf(n, matching)
		opts := inject.Options{ManagerNamespace: "sidecarset-system", Cache: &inject.Cache{}}
		once := func() {
			if res := inject.Inject(pod, ns, sets, opts); len(res.Injected) != matching {
				b.Fatalf("injected %d sets, want %d", len(res.Injected), matching)
			}
		}
		// Warm the cache, then size a repetition to injectRepetitionTime.
		start := time.Now()
		calibration := 0
		for time.Since(start) < injectRepetitionTime/10 {
			once()
			calibration++
		}
		ops := max(1, int(float64(calibration)*float64(injectRepetitionTime)/float64(time.Since(start))))
		var runs []bench.InjectRun
		for range injectRepetitions {
			runs = append(runs, timeOps(ops, once))
		}
		size := bench.NewInjectSize(n, runs)
		report.Sizes = append(report.Sizes, size)
		b.ReportMetric(size.MedianNsPerOp, fmt.Sprintf("median-ns/op-%d-sets", n))
	}
	if err := report.Write(filepath.Join("..", "..", "bench", "results")); err != nil {
		b.Fatal(err)
	}
}

// timeOps runs op ops times and returns its time and allocations per op,
// as testing.B counts them.
func timeOps(ops int, op func()) bench.InjectRun {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for range ops {
		op()
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	return bench.InjectRun{
		NsPerOp:     float64(elapsed.Nanoseconds()) / float64(ops),
		AllocsPerOp: int64(after.Mallocs-before.Mallocs) / int64(ops),
		BytesPerOp:  int64(after.TotalAlloc-before.TotalAlloc) / int64(ops),
	}
}
