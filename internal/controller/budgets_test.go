package controller_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/controller"
)

// TestBudgetWakesItsSets: a PodDisruptionBudget event requeues the sets
// whose managed pods the budget selects, not every SidecarSet.
func TestBudgetWakesItsSets(t *testing.T) {
	shop, billing := namespace(t), namespace(t)
	managedPod := func(ns, name, app, sets string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
				Labels:      map[string]string{"app": app, v1alpha1.LabelManaged: "true"},
				Annotations: map[string]string{v1alpha1.AnnotationInjected: sets}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
		}
	}
	create(t,
		managedPod(shop, "web-1", "web", "exporter,proxy"),
		managedPod(shop, "web-2", "web", "proxy"),
		managedPod(shop, "db-1", "db", "backup"),
		managedPod(billing, "web-1", "web", "ledger"),
		// Not managed: no set of its is woken by a budget over it.
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "cron", Labels: map[string]string{"app": "cron"},
			Annotations: map[string]string{v1alpha1.AnnotationInjected: "stale"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}},
	)
	// Sets of the pods, and one without pods, that no budget event may wake.
	for _, name := range []string{"exporter", "proxy", "backup", "ledger", "elsewhere"} {
		set := &v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"set": name}},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: "c", Image: "c:1"}}},
		}}
		create(t, set)
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), set) })
	}
	c := directClient(t, env.Config)
	r := &controller.Reconciler{Client: c, APIReader: c, Recorder: &recorder{}}
	budget := func(ns string, sel *metav1.LabelSelector) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: new(intstr.FromInt32(1)), Selector: sel}}
	}
	cases := []struct {
		name string
		pdb  *policyv1.PodDisruptionBudget
		want []string
	}{
		{"over web in shop", budget(shop, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}), []string{"exporter", "proxy"}},
		{"over db in shop", budget(shop, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}), []string{"backup"}},
		// policy/v1: an empty selector selects every pod of the namespace.
		{"empty selector", budget(shop, &metav1.LabelSelector{}), []string{"backup", "exporter", "proxy"}},
		{"nil selector selects nothing", budget(shop, nil), nil},
		{"over web in billing", budget(billing, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}), []string{"ledger"}},
		{"over pods no set manages", budget(shop, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cron"}}), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, req := range r.SetsOfBudget(t.Context(), tc.pdb) {
				got = append(got, req.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("sets woken (-want +got):\n%s", diff)
			}
		})
	}
}
