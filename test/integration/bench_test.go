package integration

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// BenchmarkRollout1000 measures a whole in-place rollout over 1,000 pods on
// the suite's zero-delay simulated nodes, with maxUnavailable 100%: from the
// image change to updatedReadyPods 1000, as pods/s. heap-MB is the growth
// of the test process's heap in use over the rollouts; the process holds
// the manager, the simulated nodes and the test's client, so it bounds the
// manager's share from above.
func BenchmarkRollout1000(b *testing.B) {
	const pods = 1000
	f := newFixture(b)
	set := f.SidecarSet("exporter:v1", 0)
	set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromString("100%"))
	f.CreateSet(set)
	f.createPodsConcurrently(pods, 8)
	f.WaitStatusFor(10*time.Minute, "1000 matched and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == pods && s.UpdatedReadyPods == pods
	})

	heapBefore := heapInUse()
	var elapsed time.Duration
	b.ResetTimer()
	for i := range b.N {
		img := fmt.Sprintf("exporter:v%d", i+2)
		start := time.Now()
		f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = img })
		f.WaitStatusFor(10*time.Minute, "all updated and ready", func(s v1alpha1.SidecarSetStatus) bool {
			return s.UpdatedPods == pods && s.UpdatedReadyPods == pods
		})
		elapsed += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*pods)/elapsed.Seconds(), "pods/s")
	b.ReportMetric(float64(int64(heapInUse())-int64(heapBefore))/(1<<20), "heap-MB")
}

// createPodsConcurrently creates n pods p0001..pNNNN with a few writers and
// waits, for as long as a loaded machine needs, until all are Ready.
func (f *testFixture) createPodsConcurrently(n, writers int) {
	f.T.Helper()
	names := make(chan string)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range writers {
		wg.Go(func() {
			// Keep draining after an error, so the sender never blocks.
			for name := range names {
				if err := env.Client.Create(f.T.Context(), f.NewPod(name)); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, fmt.Errorf("create pod %s: %w", name, err))
					mu.Unlock()
				}
			}
		})
	}
	for i := 1; i <= n; i++ {
		names <- fmt.Sprintf("p%04d", i)
	}
	close(names)
	wg.Wait()
	if firstErr != nil {
		f.T.Fatal(firstErr)
	}
	err := wait.PollUntilContextTimeout(f.T.Context(), time.Second, 10*time.Minute, true, func(context.Context) (bool, error) {
		ready := 0
		for _, p := range f.Pods() {
			if fixture.PodReady(&p) {
				ready++
			}
		}
		return ready == n, nil
	})
	if err != nil {
		f.T.Fatalf("wait for %d pods Ready: %v", n, err)
	}
}

// heapInUse returns the heap in use after a collection, so that garbage
// does not count.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
