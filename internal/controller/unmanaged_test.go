package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// adoptionFixture is a namespace with pods made before a SidecarSet with
// adoptionPolicy SameName: some carry its sidecar (adoptable), most do not.
type adoptionFixture struct {
	t     *testing.T
	ns    string
	set   *v1alpha1.SidecarSet
	r     *controller.Reconciler
	reqs  *requests
	clock *clocktesting.FakePassiveClock
}

func newAdoptionFixture(t *testing.T) *adoptionFixture {
	ns := namespace(t)
	labels := map[string]string{"app": ns}
	set := &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: v1alpha1.SidecarSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
			AdoptionPolicy: v1alpha1.AdoptSameName,
			Containers:     []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: "exporter", Image: "exporter:v1"}}},
		},
	}
	create(t, set)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), set) })
	reqs := newRequests()
	c := directClient(t, reqs.config(env.Config))
	clock := clocktesting.NewFakePassiveClock(time.Now())
	r := &controller.Reconciler{Client: c, APIReader: c, Recorder: &recorder{}, Namespace: "sidecarset-system", Clock: clock}
	r.Init()
	return &adoptionFixture{t: t, ns: ns, set: set, r: r, reqs: reqs, clock: clock}
}

// pod creates a pod of the set; with the exporter, it is adoptable.
func (f *adoptionFixture) pod(name string, exporter bool, annotations map[string]string) *corev1.Pod {
	f.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: f.set.Spec.Selector.MatchLabels, Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
	if exporter {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "exporter", Image: "exporter:v0"})
	}
	create(f.t, pod)
	return pod
}

// count runs the count and checks what it found and the pod requests it
// made.
func (f *adoptionFixture) count(what string, wantUnmanaged, wantSkipped int32, wantErr bool, wantRequests map[string]int) {
	f.t.Helper()
	f.reqs.take()
	unmanaged, skipped, err := f.r.CountUnmanaged(f.t.Context(), f.set)
	if (err != nil) != wantErr {
		f.t.Errorf("%s: error %v, want one: %v", what, err, wantErr)
	}
	if unmanaged != wantUnmanaged || skipped != wantSkipped {
		f.t.Errorf("%s: %d unmanaged, %d skipped; want %d, %d", what, unmanaged, skipped, wantUnmanaged, wantSkipped)
	}
	if diff := cmp.Diff(wantRequests, f.reqs.take()); diff != "" {
		f.t.Errorf("%s: pod requests (-want +got):\n%s", what, diff)
	}
}

func (f *adoptionFixture) adopted(name string) bool {
	f.t.Helper()
	pod := &corev1.Pod{}
	if err := env.Client.Get(f.t.Context(), client.ObjectKey{Namespace: f.ns, Name: name}, pod); err != nil {
		f.t.Fatal(err)
	}
	state, _ := revision.Decode(pod.Annotations)
	_, ok := state[f.set.Name]
	return ok && pod.Labels[v1alpha1.LabelManaged] == "true"
}

// TestUnmanagedRecountCost: with adoptionPolicy SameName, a recount reads
// each candidate pod once; a recount with nothing new costs its list pages
// only, whatever the number of pods. A finished pod counts nowhere; a
// skipped one counts in skippedPods.
func TestUnmanagedRecountCost(t *testing.T) {
	f := newAdoptionFixture(t)
	const plain = 40
	for i := range plain {
		f.pod(fmt.Sprintf("plain-%02d", i), false, nil)
	}
	f.pod("adoptable-1", true, nil)
	f.pod("adoptable-2", true, nil)
	f.pod("skipped", false, map[string]string{v1alpha1.AnnotationSkipped: f.set.Name})
	f.pod("opted-out", true, map[string]string{v1alpha1.AnnotationInject: "false"})
	done := f.pod("done", false, nil)
	done.Status.Phase = corev1.PodSucceeded
	if err := env.Client.Status().Update(t.Context(), done); err != nil {
		t.Fatal(err)
	}

	// The first count reads every candidate (the opted-out pod is none)
	// and adopts the two that carry the sidecar.
	f.count("first count", plain+1, 1, false, map[string]int{"LIST pods": 1, "GET pod": plain + 3, "PATCH pod": 2})
	if !f.adopted("adoptable-1") || !f.adopted("adoptable-2") {
		t.Fatal("the adoptable pods were not adopted")
	}
	f.count("within the recount interval", plain+1, 1, false, map[string]int{})

	f.clock.SetTime(f.clock.Now().Add(controller.UnmanagedRecount))
	f.count("recount, nothing new", plain+1, 1, false, map[string]int{"LIST pods": 1})

	// A pod that changed is read again; so is a new one.
	pod := &corev1.Pod{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: f.ns, Name: "plain-07"}, pod); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Annotations = map[string]string{"example.com/touched": "yes"}
	if err := env.Client.Patch(t.Context(), pod, patch); err != nil {
		t.Fatal(err)
	}
	f.pod("new", false, nil)
	f.clock.SetTime(f.clock.Now().Add(controller.UnmanagedRecount))
	f.count("recount after two pods changed", plain+2, 1, false, map[string]int{"LIST pods": 1, "GET pod": 2})

	// A new generation may make pods adoptable: every candidate is read.
	f.set.Generation++
	f.count("new generation", plain+2, 1, false, map[string]int{"LIST pods": 1, "GET pod": plain + 2})
}

// TestAdoptionErrorKeepsCount: a failed adoption neither loses the count
// nor makes every reconcile recount; the failed pod alone is retried.
func TestAdoptionErrorKeepsCount(t *testing.T) {
	f := newAdoptionFixture(t)
	for i := range 10 {
		f.pod(fmt.Sprintf("plain-%02d", i), false, nil)
	}
	f.pod("adoptable-1", true, nil)
	f.pod("adoptable-2", true, nil)
	failing := func(req *http.Request) bool {
		return req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/pods/adoptable-1")
	}
	f.reqs.set(failing)

	f.count("first count, one adoption fails", 11, 0, true, map[string]int{"LIST pods": 1, "GET pod": 12, "PATCH pod": 2})
	if f.adopted("adoptable-1") || !f.adopted("adoptable-2") {
		t.Fatal("want adoptable-2 adopted and adoptable-1 not")
	}
	f.count("next reconcile retries the failed pod only", 11, 0, true, map[string]int{"GET pod": 1, "PATCH pod": 1})
	f.reqs.set(nil)
	f.count("the retry succeeds", 10, 0, false, map[string]int{"GET pod": 1, "PATCH pod": 1})
	if !f.adopted("adoptable-1") {
		t.Fatal("adoptable-1 was not adopted on retry")
	}
	f.count("nothing left to retry", 10, 0, false, map[string]int{})
}
