package faults

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
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
	// events counts the versions seen.
	events  int
	problem error

	w    *watchtools.RetryWatcher
	done chan struct{}
}

// watchPods starts following the fixture's pods from their current
// versions on; the rollout writes image under set's records.
func watchPods(t *testing.T, f *fixture.F, image string) *podLog {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cluster.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoreV1().Pods(f.NS).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := &podLog{
		set: f.Set, image: image,
		notReady: map[string]bool{}, written: map[string]bool{},
		images: map[string][]string{}, revisions: map[string][]string{},
		generations: map[string]int64{},
		done:        make(chan struct{}),
	}
	for i := range list.Items {
		l.observe(&list.Items[i])
	}
	// A retrying watch: the apiserver may end a watch at any time, or
	// refuse one from a version its watch cache has not reached.
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return cs.CoreV1().Pods(f.NS).Watch(ctx, opts)
	}}
	l.w, err = watchtools.NewRetryWatcherWithContext(context.Background(), list.ResourceVersion, lw)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(l.done)
		for ev := range l.w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				l.mu.Lock()
				l.problem = fmt.Errorf("pod watch: event %s carries %T %+v", ev.Type, ev.Object, ev.Object)
				l.mu.Unlock()
				return
			}
			l.observe(p)
		}
	}()
	t.Cleanup(func() { l.w.Stop() })
	return l
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
	l.w.Stop()
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
