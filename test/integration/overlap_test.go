package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// quiet is how long the overlap tests watch pods that should see no more
// writes. On main before the fix, two sets wrote three pods about 1,400
// times in six seconds.
const quiet = 4 * time.Second

// TestOverlapNotUpgradable: two SidecarSets on the same pods, both changed
// in more than images. Each pod gets one SidecarSetUpgradable=False that
// names both sets, and then nothing more is written or told.
func TestOverlapNotUpgradable(t *testing.T) {
	const pods = 3
	f := newFixture(t)
	a, b := f.overlappingSets()
	f.CreatePods(pods, nil, nil)
	f.WaitStatus("all matched and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == pods && s.UpdatedReadyPods == pods
	})

	for _, name := range []string{a, b} {
		f.UpdateNamedSet(name, func(s *v1alpha1.SidecarSet) {
			s.Spec.Containers[0].Env = append(s.Spec.Containers[0].Env, corev1.EnvVar{Name: "DEBUG", Value: "1"})
		})
	}
	f.WaitPods("SidecarSetUpgradable=False on every pod", func(ps []corev1.Pod) bool {
		for _, p := range ps {
			c := fixture.PodCondition(&p, v1alpha1.PodConditionUpgradable)
			if c == nil || c.Status != corev1.ConditionFalse || c.Reason != v1alpha1.ReasonUpdateImmutableField {
				return false
			}
		}
		return true
	})
	for _, name := range []string{a, b} {
		f.WaitNamedSetEvent(name, controller.ReasonNotUpgradable)
	}

	if n := f.countPodWrites(quiet); n != 0 {
		t.Errorf("%d pod writes in %v after both sets judged the pods, want none", n, quiet)
	}
	for _, p := range f.Pods() {
		if got := listedSets(fixture.PodCondition(&p, v1alpha1.PodConditionUpgradable)); !slices.Equal(got, []string{a, b}) {
			t.Errorf("pod %s: SidecarSetUpgradable names %v, want [%s %s]", p.Name, got, a, b)
		}
	}
	for _, name := range []string{a, b} {
		f.assertToldOnce(name, controller.ReasonNotUpgradable, "p01", "p02", "p03")
	}

	// One set taking its change back removes only its own verdict.
	f.UpdateNamedSet(a, func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Env = nil })
	f.WaitPods("SidecarSetUpgradable=False naming only "+b, func(ps []corev1.Pod) bool {
		for _, p := range ps {
			c := fixture.PodCondition(&p, v1alpha1.PodConditionUpgradable)
			if c == nil || c.Status != corev1.ConditionFalse || !slices.Equal(listedSets(c), []string{b}) {
				return false
			}
		}
		return true
	})
	if n := f.countPodWrites(quiet); n != 0 {
		t.Errorf("%d pod writes in %v after %s cleared its verdict, want none", n, quiet, a)
	}
}

// TestOverlapDrifted: both sidecars of two SidecarSets edited by hand on
// one pod, under driftPolicy Report. The pod gets one SidecarSetDrifted=True
// naming both sets, each set tells it once, and nothing more is written.
func TestOverlapDrifted(t *testing.T) {
	const pods = 3
	f := newFixture(t)
	a, b := f.overlappingSets()
	f.CreatePods(pods, nil, nil)
	f.WaitStatus("all matched and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == pods && s.UpdatedReadyPods == pods
	})

	patch := []byte(`{"spec":{"containers":[{"name":"exporter","image":"exporter:by-hand"},{"name":"proxy","image":"proxy:by-hand"}]}}`)
	if err := env.Client.Patch(t.Context(), f.Pod("p02"), fixture.RawStrategic(patch)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{a, b} {
		f.WaitNamedSetEvent(name, controller.ReasonDrifted)
	}

	if n := f.countPodWrites(quiet); n != 0 {
		t.Errorf("%d pod writes in %v after both sets judged the pods, want none", n, quiet)
	}
	for _, p := range f.Pods() {
		c := fixture.PodCondition(&p, controller.PodConditionDrifted)
		var got []string
		if c != nil && c.Status == corev1.ConditionTrue {
			got = listedSets(c)
		}
		if want := []string{a, b}; p.Name == "p02" && !slices.Equal(got, want) || p.Name != "p02" && got != nil {
			t.Errorf("pod %s: SidecarSetDrifted=True names %v, want %v on p02 only", p.Name, got, want)
		}
	}
	if got := f.PodEvents(controller.ReasonDrifted); len(got) != 1 || got["p02"] != 2 {
		t.Errorf("%s events per pod: %v, want p02 twice (once per set)", controller.ReasonDrifted, got)
	}
	for _, name := range []string{a, b} {
		f.assertToldOnce(name, controller.ReasonDrifted, "p02")
	}
}

// listedSets returns the SidecarSets a pod condition names: the message ends
// in ": " and the names, "; "-separated, each perhaps followed by its
// containers in parentheses.
func listedSets(c *corev1.PodCondition) []string {
	if c == nil {
		return nil
	}
	i := strings.LastIndex(c.Message, ": ")
	if i < 0 {
		return nil
	}
	var names []string
	for _, entry := range strings.Split(c.Message[i+2:], "; ") {
		name, _, _ := strings.Cut(entry, " (")
		names = append(names, name)
	}
	return names
}

// overlappingSets creates the fixture's SidecarSet (container exporter) and
// a second one (container proxy) selecting the same pods, and returns their
// names.
func (f *testFixture) overlappingSets() (string, string) {
	f.T.Helper()
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	second := f.SidecarSet("proxy:v1", 0)
	second.Name = f.Set + "-b"
	second.Spec.Containers[0].Name = "proxy"
	if err := env.Client.Create(f.T.Context(), second); err != nil {
		f.T.Fatalf("create SidecarSet %s: %v", second.Name, err)
	}
	f.T.Cleanup(func() { _ = env.Client.Delete(context.Background(), second) })
	f.waitInjecting("exporter", "proxy")
	return f.Set, second.Name
}

// assertToldOnce fails when the named SidecarSet's events with reason tell
// a pod more than once, or tell more often than there are pods. A pod whose
// condition write lost a race is told in a later event of its own, but
// never twice.
func (f *testFixture) assertToldOnce(set, reason string, pods ...string) {
	f.T.Helper()
	evs := f.NamedSetEvents(set, reason)
	told := map[string]int{}
	occurred := 0
	var summary strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&summary, "\n  %d× %q", fixture.Occurrences(e), e.Message)
		occurred += fixture.Occurrences(e)
		for _, p := range pods {
			if strings.Contains(e.Message, f.NS+"/"+p) {
				told[p]++
			}
		}
	}
	// The events API keeps a repeat of an event (same reason, action and
	// object, whatever the message) as one event with a count and the
	// first message: a set that tells its pods in two batches shows one
	// event, counted twice, naming the first batch. So: every pod named,
	// and no more tellings than pods.
	for _, p := range pods {
		if told[p] > 1 {
			f.T.Errorf("SidecarSet %s: %s events name pod %s %d times, want once:%s", set, reason, p, told[p], summary.String())
		}
	}
	if occurred > len(pods) || occurred == 0 {
		f.T.Errorf("SidecarSet %s: %d %s events for %d pods, want between 1 and %d:%s", set, occurred, reason, len(pods), len(pods), summary.String())
	}
}

// countPodWrites watches the fixture's pods for d, from their current
// version on, and returns how many writes it saw of what the controller
// owns: the state annotation and the SidecarSet pod conditions. The
// kubelet's own status updates (a container the hand edit restarted, still
// starting on a slow node) are not the controller's.
func (f *testFixture) countPodWrites(d time.Duration) int {
	f.T.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		f.T.Fatalf("clientset: %v", err)
	}
	var list corev1.PodList
	if err := env.Client.List(f.T.Context(), &list, client.InNamespace(f.NS)); err != nil {
		f.T.Fatalf("list pods: %v", err)
	}
	last := map[string]string{}
	for i := range list.Items {
		last[list.Items[i].Name] = controllerOwned(&list.Items[i])
	}
	ctx, cancel := context.WithTimeout(f.T.Context(), d)
	defer cancel()
	w, err := cs.CoreV1().Pods(f.NS).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		f.T.Fatalf("watch pods: %v", err)
	}
	defer w.Stop()
	n := 0
	var seen []string
	for ev := range w.ResultChan() {
		p, ok := ev.Object.(*corev1.Pod)
		if ev.Type != watch.Modified || !ok {
			continue
		}
		if owned := controllerOwned(p); owned != last[p.Name] {
			last[p.Name] = owned
			n++
			if !slices.Contains(seen, p.Name) {
				seen = append(seen, p.Name)
			}
		}
	}
	if n > 0 {
		f.T.Logf("pods written: %v", seen)
	}
	return n
}

// controllerOwned spells what the controller writes into a pod: its state
// annotation and the SidecarSet conditions, with their transition times.
func controllerOwned(p *corev1.Pod) string {
	var b strings.Builder
	b.WriteString(p.Annotations[v1alpha1.AnnotationState])
	for _, c := range p.Status.Conditions {
		if c.Type == v1alpha1.PodConditionUpgradable || c.Type == controller.PodConditionDrifted {
			fmt.Fprintf(&b, "|%s=%s/%s/%s/%s", c.Type, c.Status, c.Reason, c.Message, c.LastTransitionTime)
		}
	}
	return b.String()
}
