// Package scale measures the manager at cluster sizes the functional tests
// never reach. Its benchmarks run under `make bench`.
package scale

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/manager"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

const (
	managedPods   = 10_000
	unmanagedPods = 40_000
)

// BenchmarkManagerHeap reports the manager's heap per managed pod in a
// cluster with 10,000 managed and 40,000 unmanaged pods that all match one
// SidecarSet. The unmanaged pods must cost nothing: the cache holds only
// pods with the managed label, and they are counted by a metadata-only list.
func BenchmarkManagerHeap(b *testing.B) {
	testenv.SetLogger()
	// The pods are created before the manager runs: the pod webhook must
	// not refuse them meanwhile.
	hooks, err := testenv.WebhookOptions(admissionregistrationv1.Ignore)
	if err != nil {
		b.Fatal(err)
	}
	env, err := testenv.Start(testenv.Options{Webhooks: hooks})
	if err != nil {
		b.Fatalf("start the control plane: %v", err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			b.Error(err)
		}
	}()
	ctx := b.Context()

	set := &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "heap"},
		Spec: v1alpha1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{
				Name: "exporter", Image: "exporter:v1"}}},
		},
	}
	// The records a webhook would have written, so the pods are managed
	// from the start and the benchmark does not depend on injection.
	state := revision.State{set.Name: {
		Revision:      revision.Name(set.Name, &set.Spec),
		Hash:          revision.Hash(&set.Spec),
		ImagelessHash: revision.ImagelessHash(&set.Spec),
		Containers:    []revision.ContainerState{{Name: "exporter", Image: "exporter:v1"}},
	}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "heap"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		b.Fatal(err)
	}
	fast := rest.CopyConfig(env.Config)
	fast.QPS, fast.Burst = 2000, 4000
	c, err := client.New(fast, client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := createPods(ctx, c, managedPods, func(i int) *corev1.Pod {
		p := pod(fmt.Sprintf("managed-%05d", i))
		p.Labels[v1alpha1.LabelManaged] = "true"
		p.Annotations = map[string]string{
			v1alpha1.AnnotationInjected: set.Name,
			v1alpha1.AnnotationState:    revision.Encode(state),
		}
		p.Spec.Containers = append([]corev1.Container{{Name: "exporter", Image: "exporter:v1"}}, p.Spec.Containers...)
		return p
	}); err != nil {
		b.Fatal(err)
	}
	if err := createPods(ctx, c, unmanagedPods, func(i int) *corev1.Pod {
		p := pod(fmt.Sprintf("unmanaged-%05d", i))
		// Opted out: they match the selector, and the webhook leaves them be.
		p.Annotations = map[string]string{v1alpha1.AnnotationInject: "false"}
		return p
	}); err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d pods in %s", managedPods+unmanagedPods, time.Since(start).Round(time.Second))

	before := heapInuse()
	mgrCtx, stop := context.WithCancel(ctx)
	defer stop()
	if _, _, err := env.StartManager(mgrCtx, nil, manager.DefaultOptions()); err != nil {
		b.Fatal(err)
	}
	// Through the validating webhook, now that the manager serves it.
	if err := env.Client.Create(ctx, set); err != nil {
		b.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.SidecarSet{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(set), got); err != nil {
			return false, err
		}
		return got.Status.MatchedPods == managedPods && got.Status.UnmanagedPods == unmanagedPods, nil
	})
	if err != nil {
		b.Fatalf("wait for the manager to count %d managed and %d unmanaged pods: %v", managedPods, unmanagedPods, err)
	}
	// Let the reconcile that wrote this status finish: the figure is the
	// manager at rest, its cache and bookkeeping.
	time.Sleep(2 * time.Second)
	after := heapInuse()
	if path := os.Getenv("SIDECARSET_HEAP_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.WriteHeapProfile(f); err != nil {
			b.Fatal(err)
		}
	}
	perPod := float64(after-before) / managedPods
	b.ReportMetric(perPod, "heap-B/managed-pod")
	b.ReportMetric(float64(after-before)/(1<<20), "heap-MiB")
	fmt.Fprintf(os.Stderr, "manager heap: %.1f MiB for %d managed + %d unmanaged pods, %.0f B per managed pod\n",
		float64(after-before)/(1<<20), managedPods, unmanagedPods, perPod)
}

func pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "heap", Name: name, Labels: map[string]string{"app": "db"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mysql", Image: "mysql:8.4"}}},
	}
}

// createPods creates n pods with a few concurrent workers.
func createPods(ctx context.Context, c client.Client, n int, build func(int) *corev1.Pod) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := c.Create(ctx, build(i)); err != nil {
					errs <- fmt.Errorf("create pod %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// heapInuse returns the heap in use after a full collection.
func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
