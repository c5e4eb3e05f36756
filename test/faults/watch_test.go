package faults

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// podLog follows every version of a namespace's pods, as the apiserver's
// watch delivers them, and judges each one as it comes: the rollout's
// bounds hold at every moment the watch shows, not only where a poll
// happened to look.
type podLog struct {
	mu sync.Mutex
	// set names the SidecarSet whose records are read; image is the
	// exporter image the rollout writes.
	set, image string
	// allowed is how many pods the partition in force lets carry image.
	allowed int
	// notReady and written hold the pods not Ready, and the pods whose
	// spec carries image, in their latest version.
	notReady, written map[string]bool
	// maxNotReady is the most pods seen not Ready at once; overPartition
	// the most pods seen carrying image beyond allowed.
	maxNotReady, overPartition int
	// images and revisions are, per pod, the exporter images its spec
	// declared and the set's revisions its records named, in the order
	// they came, each once per change.
	images, revisions map[string][]string
	// generations is each pod's latest metadata.generation.
	generations map[string]int64
	// events counts the versions seen; relists the times the watch
	// started again from a list (follow).
	events, relists int
	problem         error

	pods   typedcorev1.PodInterface
	cancel context.CancelFunc
	done   chan struct{}
}

// watchPods starts following the fixture's pods from their current
// versions on; the rollout writes image under set's records.
func watchPods(t *testing.T, f *fixture.F, image string) *podLog {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cluster.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &podLog{
		set: f.Set, image: image,
		notReady: map[string]bool{}, written: map[string]bool{},
		images: map[string][]string{}, revisions: map[string][]string{},
		generations: map[string]int64{},
		pods:        cs.CoreV1().Pods(f.NS),
		cancel:      cancel,
		done:        make(chan struct{}),
	}
	rv, err := l.list(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	go l.follow(ctx, rv)
	t.Cleanup(func() {
		cancel()
		<-l.done
	})
	return l
}

// list observes every pod as it is now, and returns the list's version.
func (l *podLog) list(ctx context.Context) (string, error) {
	list, err := l.pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list pods: %w", err)
	}
	for i := range list.Items {
		l.observe(&list.Items[i])
	}
	return list.ResourceVersion, nil
}

// follow watches the pods from version rv on until ctx is done. The
// watch retries: the apiserver may end a watch at any time, or refuse one
// from a version its watch cache has not reached. A restarted apiserver
// may refuse to resume from the last version seen at all (410 Gone: its
// watch cache starts where it started); then the pods are listed again
// and watched from there, each seen in its latest version, and relists
// counts it.
func (l *podLog) follow(ctx context.Context, rv string) {
	defer close(l.done)
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return l.pods.Watch(ctx, opts)
	}}
	for {
		w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, lw)
		if err != nil {
			l.fail(fmt.Errorf("pod watch: %w", err))
			return
		}
		gone := l.drain(w)
		w.Stop()
		if !gone || ctx.Err() != nil {
			return
		}
		for rv, err = l.list(ctx); err != nil; rv, err = l.list(ctx) {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		l.mu.Lock()
		l.relists++
		l.mu.Unlock()
	}
}

// drain observes the watch's pods until it ends, and says whether it
// ended because its version is gone; any other end but ctx's is a
// problem.
func (l *podLog) drain(w *watchtools.RetryWatcher) bool {
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok {
			l.observe(p)
			continue
		}
		if err := apierrors.FromObject(ev.Object); ev.Type == watch.Error && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) {
			return true
		}
		l.fail(fmt.Errorf("pod watch: event %s carries %T %+v", ev.Type, ev.Object, ev.Object))
		return false
	}
	return false
}

func (l *podLog) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.problem = err
}

func (l *podLog) observe(p *corev1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events++
	l.notReady[p.Name] = !fixture.PodReady(p)
	img := fixture.Image(p, "exporter")
	l.written[p.Name] = img == l.image
	l.generations[p.Name] = p.Generation
	if seen := l.images[p.Name]; len(seen) == 0 || seen[len(seen)-1] != img {
		l.images[p.Name] = append(seen, img)
	}
	state, err := revision.Decode(p.Annotations)
	if err != nil {
		l.problem = fmt.Errorf("pod %s: %w", p.Name, err)
		return
	}
	if rev := state[l.set].Revision; rev != "" {
		if seen := l.revisions[p.Name]; len(seen) == 0 || seen[len(seen)-1] != rev {
			l.revisions[p.Name] = append(seen, rev)
		}
	}
	l.maxNotReady = max(l.maxNotReady, count(l.notReady))
	l.overPartition = max(l.overPartition, count(l.written)-l.allowed)
}

func count(m map[string]bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

// allow raises how many pods may carry the image, before the partition is
// lowered to let them.
func (l *podLog) allow(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.allowed = n
}

// writtenPods is how many pods carry the image now.
func (l *podLog) writtenPods() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return count(l.written)
}

// stop ends the watch; a problem it met fails the test.
func (l *podLog) stop(t *testing.T) {
	t.Helper()
	l.cancel()
	<-l.done
	if l.problem != nil {
		t.Error(l.problem)
	}
}

// assertOnce fails for every pod that did not go from image from to the
// log's image in one write, under two revisions of the set: once each.
func (l *podLog) assertOnce(t *testing.T, from string, before map[string]int64) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, imgs := range l.images {
		if want := []string{from, l.image}; !slices.Equal(imgs, want) {
			t.Errorf("pod %s: exporter images %v, want %v", name, imgs, want)
		}
		if revs := l.revisions[name]; len(revs) != 2 || revs[0] == revs[1] {
			t.Errorf("pod %s: its records named revisions %v, want the old one then the new one", name, revs)
		}
		if g := l.generations[name]; g != before[name]+1 {
			t.Errorf("pod %s: generation %d → %d, want one spec change", name, before[name], g)
		}
	}
}

// writtenTwice counts the pods whose latest generation is more than one
// spec change past the one in before.
func (l *podLog) writtenTwice(before map[string]int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for name, g := range l.generations {
		if g > before[name]+1 {
			n++
		}
	}
	return n
}
