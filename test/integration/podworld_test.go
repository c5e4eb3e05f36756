package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/rollout"
)

// podWorld follows every version of a namespace's pods and keeps what the
// nodes and the apiserver show, never what a manager says of itself.
type podWorld struct {
	mu sync.Mutex
	// last is each pod's latest version.
	last map[string]*corev1.Pod
	// maxNotReady is the most pods seen not Ready at once; worst names
	// them.
	maxNotReady int
	worst       string
	// images are, per pod, the exporter images its spec declared, in
	// order: each one after the first is a write.
	images map[string][]string
	// records are, per pod, every value its state annotation took.
	records map[string][]string
	// firstWrite is when a pod's records or exporter image were first
	// seen changed; zero until then.
	firstWrite time.Time
	problem    error

	w    *watchtools.RetryWatcher
	done chan struct{}
}

// watchPodWorld starts following the fixture's pods from their current
// versions on.
func watchPodWorld(t testing.TB, f *testFixture) *podWorld {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoreV1().Pods(f.NS).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v := &podWorld{last: map[string]*corev1.Pod{}, images: map[string][]string{}, records: map[string][]string{}, done: make(chan struct{})}
	for i := range list.Items {
		v.observe(&list.Items[i])
	}
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return cs.CoreV1().Pods(f.NS).Watch(ctx, opts)
	}}
	v.w, err = watchtools.NewRetryWatcherWithContext(context.Background(), list.ResourceVersion, lw)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(v.done)
		for ev := range v.w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				v.mu.Lock()
				v.problem = fmt.Errorf("pod watch: event %s carries %T %+v", ev.Type, ev.Object, ev.Object)
				v.mu.Unlock()
				return
			}
			v.observe(p)
		}
	}()
	t.Cleanup(func() { v.w.Stop() })
	return v
}

func (v *podWorld) observe(p *corev1.Pod) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.last[p.Name] = p
	var down []string
	for name, q := range v.last {
		if !fixture.PodReady(q) {
			down = append(down, name)
		}
	}
	if len(down) > v.maxNotReady {
		slices.Sort(down)
		v.maxNotReady, v.worst = len(down), strings.Join(down, ", ")
	}
	changed := false
	img := fixture.Image(p, "exporter")
	if imgs := v.images[p.Name]; len(imgs) == 0 || imgs[len(imgs)-1] != img {
		v.images[p.Name] = append(imgs, img)
		changed = len(imgs) > 0
	}
	rec := p.Annotations[v1alpha1.AnnotationState]
	if recs := v.records[p.Name]; len(recs) == 0 || recs[len(recs)-1] != rec {
		v.records[p.Name] = append(recs, rec)
		changed = changed || len(recs) > 0
	}
	if changed && v.firstWrite.IsZero() {
		v.firstWrite = time.Now()
	}
}

// stop ends the watch; a problem it met fails the test.
func (v *podWorld) stop(t testing.TB) *podWorld {
	t.Helper()
	v.w.Stop()
	<-v.done
	if v.problem != nil {
		t.Error(v.problem)
	}
	return v
}

// assertRolled fails unless every pod of f runs image for the exporter,
// Ready, the kubelet having restarted the exporter restarts times since the
// pod's creation (once per rollout) and the app never, and unless the
// exporter's spec was written once, to image, since the watch began, in
// the pods whose spec did not declare it then (the others not at all).
func (v *podWorld) assertRolled(t testing.TB, f *testFixture, image string, restarts int32) {
	t.Helper()
	for _, p := range f.Pods() {
		st := fixture.ContainerStatus(&p, "exporter")
		if fixture.Image(&p, "exporter") != image || st.State.Running == nil || !rollout.SameImage(image, st.Image) || !fixture.PodReady(&p) {
			t.Errorf("pod %s: exporter %s, running %s, Ready %v; want %s running, Ready", p.Name,
				fixture.Image(&p, "exporter"), st.Image, fixture.PodReady(&p), image)
		}
		if st.RestartCount != restarts {
			t.Errorf("pod %s: the kubelet restarted the exporter %d times, want %d (once per rollout)", p.Name, st.RestartCount, restarts)
		}
		if app := fixture.ContainerStatus(&p, fixture.AppContainer); app.RestartCount != 0 {
			t.Errorf("pod %s: the app restarted %d times", p.Name, app.RestartCount)
		}
		imgs := v.images[p.Name]
		want := []string{image}
		if len(imgs) > 0 && imgs[0] != image {
			want = []string{imgs[0], image}
		}
		if !slices.Equal(imgs, want) {
			t.Errorf("pod %s: the exporter's spec declared %v in turn, want %v: one write", p.Name, imgs, want)
		}
	}
}
