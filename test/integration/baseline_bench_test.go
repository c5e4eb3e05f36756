package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// BenchmarkRawPatches1000 is BenchmarkRollout1000's baseline: the same 1,000
// in-place image changes written straight to the pods, as a script would,
// with no SidecarSet and no controller: one patch per pod (image and a state
// annotation of the same size), and one SidecarSet-sized status write per
// ten pods, on the same apiserver and the same simulated nodes. It measures
// from the first write to every pod Ready on the new image. The ratio of the
// two pods/s figures is what the controller's planning, bookkeeping and
// events cost.
func BenchmarkRawPatches1000(b *testing.B) {
	const pods, writers = 1000, 8
	f := newFixture(b)
	// Pods that carry an exporter of their own: no SidecarSet selects them.
	for i := 1; i <= pods; i++ {
		p := f.NewPod(fmt.Sprintf("p%04d", i))
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "exporter", Image: "exporter:v1"})
		f.CreatePod(p)
	}
	f.WaitReady(pods)
	// A stand-in whose status the baseline rewrites, as the controller
	// rewrites its SidecarSet's.
	stand := f.SidecarSet("exporter:v1", 0)
	stand.Spec.Selector.MatchLabels = map[string]string{"example.com/none": f.NS}
	f.CreateSet(stand)

	fast := rest.CopyConfig(env.Config)
	fast.QPS = -1
	c, err := client.New(fast, client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	var elapsed time.Duration
	b.ResetTimer()
	for i := range b.N {
		img := fmt.Sprintf("exporter:v%d", i+2)
		start := time.Now()
		names := make(chan int)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		for range writers {
			wg.Go(func() {
				for n := range names {
					if err := rawUpdate(b.Context(), c, f.NS, n, img, stand.Name); err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
					}
				}
			})
		}
		for n := 1; n <= pods; n++ {
			names <- n
		}
		close(names)
		wg.Wait()
		if firstErr != nil {
			b.Fatal(firstErr)
		}
		err := wait.PollUntilContextTimeout(b.Context(), 100*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
			var list corev1.PodList
			if err := c.List(ctx, &list, client.InNamespace(f.NS)); err != nil {
				return false, err
			}
			done := 0
			for _, p := range list.Items {
				if fixture.PodReady(&p) && fixture.ContainerStatus(&p, "exporter").Image == "docker.io/library/"+img {
					done++
				}
			}
			return done == pods, nil
		})
		if err != nil {
			b.Fatalf("wait for %d pods on %s: %v", pods, img, err)
		}
		elapsed += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*pods)/elapsed.Seconds(), "pods/s")
}

// rawUpdate writes pod n's exporter image and a state annotation in one
// strategic merge patch, and every tenth pod a status write of the stand-in
// SidecarSet.
func rawUpdate(ctx context.Context, c client.Client, ns string, n int, img, set string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"containers":[{"name":"exporter","image":%q}]}}`,
		v1alpha1.AnnotationState, fmt.Sprintf(`{"raw":{"revision":"raw-%s","hash":"h","imagelessHash":"i","containers":[{"name":"exporter","image":%q}]}}`, img, img), img)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p%04d", n)}}
	if err := c.Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("patch %s: %w", pod.Name, err)
	}
	if n%10 != 0 {
		return nil
	}
	status := fmt.Sprintf(`{"status":{"observedGeneration":1,"matchedPods":%d,"updatedPods":%d,"readyPods":0,"updatedReadyPods":0,"notUpgradablePods":0,"driftedPods":0,"unmanagedPods":0}}`, n, n)
	obj := &v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: set}}
	if err := c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(status))); err != nil {
		return fmt.Errorf("status of %s: %w", set, err)
	}
	return nil
}
