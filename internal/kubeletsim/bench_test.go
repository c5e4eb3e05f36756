package kubeletsim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// benchBatch is how many pods each iteration creates.
const benchBatch = 500

// BenchmarkPodsToReady measures how fast the simulated nodes take a batch of
// new pods (an app container and a native sidecar each, zero delays) from
// creation through binding to Ready, reported as pods/s.
func BenchmarkPodsToReady(b *testing.B) {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := testContext(b)
	var elapsed time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		ns := newNamespace(b)
		allReady := watchReady(ctx, b, client, ns)
		b.StartTimer()

		start := time.Now()
		createBatch(ctx, b, client, ns, i)
		select {
		case <-allReady:
		case <-time.After(5 * time.Minute):
			b.Fatalf("the pods of %s are not all Ready after 5 minutes", ns)
		}
		elapsed += time.Since(start)

		b.StopTimer()
		deleteBatch(ctx, b, client, ns)
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N*benchBatch)/elapsed.Seconds(), "pods/s")
}

// watchReady returns a channel closed once benchBatch pods of ns are Ready.
// An informer, not a bare watch: the apiserver closes a watch that falls
// behind a burst like this one, and the informer's reflector resumes it.
func watchReady(ctx context.Context, b *testing.B, client kubernetes.Interface, ns string) <-chan struct{} {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	informerCtx, stop := context.WithCancel(ctx)
	b.Cleanup(func() {
		stop()
		factory.Shutdown()
	})
	var mu sync.Mutex
	ready := map[string]bool{}
	allReady := make(chan struct{})
	seen := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || !isReady(p) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !ready[p.Name] {
			ready[p.Name] = true
			if len(ready) == benchBatch {
				close(allReady)
			}
		}
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	factory.Start(informerCtx.Done())
	factory.WaitForCacheSync(informerCtx.Done())
	return allReady
}

func createBatch(ctx context.Context, b *testing.B, client kubernetes.Interface, ns string, iteration int) {
	const writers = 16
	names := make(chan string)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for name := range names {
				p := pod(ns, name, ctr("app", "app:v1"))
				p.Spec.InitContainers = []corev1.Container{sidecarSpec("proxy", "proxy:v1")}
				if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create pod %s: %w", name, err)
					return
				}
			}
		})
	}
	for j := range benchBatch {
		names <- fmt.Sprintf("bench-%d-%d", iteration, j)
	}
	close(names)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// deleteBatch deletes the pods and waits until the simulator has removed
// them, so the next iteration starts from empty nodes.
func deleteBatch(ctx context.Context, b *testing.B, client kubernetes.Interface, ns string) {
	if err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		b.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, err
	})
	if err != nil {
		b.Fatalf("pods of %s not gone: %v", ns, err)
	}
}
