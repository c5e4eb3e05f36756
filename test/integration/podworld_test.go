package integration

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/imageref"
)

// podWorld follows every version of a namespace's pods and keeps what the
// nodes and the apiserver show, never what a manager says of itself.
type podWorld struct {
	podWatch
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
}

// watchPodWorld starts following the fixture's pods from their current
// versions on.
func watchPodWorld(t testing.TB, f *testFixture) *podWorld {
	t.Helper()
	v := &podWorld{last: map[string]*corev1.Pod{}, images: map[string][]string{}, records: map[string][]string{}}
	v.follow(t, f, v.observe, v.observe)
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
	v.end(t)
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
		if fixture.Image(&p, "exporter") != image || st.State.Running == nil || !imageref.Same(image, st.Image) || !fixture.PodReady(&p) {
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
