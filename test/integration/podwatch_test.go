package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// podWatch follows every version of a fixture's pods: the watchers that
// judge what the pods show embed it.
type podWatch struct {
	mu      sync.Mutex
	problem error
	w       *watchtools.RetryWatcher
	done    chan struct{}
}

// follow hands each of f's pods to initial, then every version of them
// from there on to seen, until end. The watch retries: the apiserver may
// refuse one from a version its watch cache has not reached yet, or end
// one at any time.
func (pw *podWatch) follow(t testing.TB, f *testFixture, initial, seen func(*corev1.Pod)) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoreV1().Pods(f.NS).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		initial(&list.Items[i])
	}
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return cs.CoreV1().Pods(f.NS).Watch(ctx, opts)
	}}
	pw.w, err = watchtools.NewRetryWatcherWithContext(context.Background(), list.ResourceVersion, lw)
	if err != nil {
		t.Fatal(err)
	}
	pw.done = make(chan struct{})
	go func() {
		defer close(pw.done)
		for ev := range pw.w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				pw.mu.Lock()
				pw.problem = fmt.Errorf("pod watch: event %s carries %T %+v", ev.Type, ev.Object, ev.Object)
				pw.mu.Unlock()
				return
			}
			seen(p)
		}
	}()
	t.Cleanup(pw.w.Stop)
}

// end stops the watch; a problem it met fails the test.
func (pw *podWatch) end(t testing.TB) {
	t.Helper()
	pw.w.Stop()
	<-pw.done
	if pw.problem != nil {
		t.Error(pw.problem)
	}
}
