package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/controller"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

// TestDisruptionBudget: an in-place update disrupts the pod, so a
// PodDisruptionBudget that allows no disruption holds the rollout whatever
// maxUnavailable says; relaxed to allow one, the rollout goes on one pod at
// a time.
func TestDisruptionBudget(t *testing.T) {
	const pods = 4
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 1)
	set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromString("100%"))
	f.CreateSet(set)
	f.CreatePods(pods, nil, nil)
	before := fixture.AppIDs(f.Pods())
	f.WaitStatus("all matched and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.MatchedPods == pods && s.UpdatedReadyPods == pods
	})

	// An integer minAvailable: a percentage needs the pods' controllers to
	// know the expected count, and these pods have none.
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.NS, Name: "db"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: new(intstr.FromInt32(pods)),
			Selector:     &metav1.LabelSelector{MatchLabels: f.Labels},
		},
	}
	if err := env.Client.Create(t.Context(), pdb); err != nil {
		t.Fatal(err)
	}
	f.waitBudget(pdb, pods, 0)

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	f.WaitStatus("pods held by the budget", func(s v1alpha1.SidecarSetStatus) bool {
		c := fixture.SetCondition(s, v1alpha1.ConditionProgressing)
		return c != nil && strings.Contains(c.Message, "4 held by a PodDisruptionBudget")
	})
	time.Sleep(time.Second)
	if n := fixture.CountImage(f.Pods(), "exporter:v2"); n != 0 {
		t.Fatalf("%d pods updated though the budget allows no disruption\n%s", n, f.Describe())
	}

	w := f.WatchUnavailable("exporter:v2")
	relax := []byte(`{"spec":{"minAvailable":3}}`)
	if err := env.Client.Patch(t.Context(), pdb, client.RawPatch(types.MergePatchType, relax)); err != nil {
		t.Fatal(err)
	}
	f.WaitStatus("all updated and ready", func(s v1alpha1.SidecarSetStatus) bool {
		return s.UpdatedReadyPods == pods && fixture.Condition(s, v1alpha1.ConditionComplete) == metav1.ConditionTrue
	})
	if got := w.Max(); got > 1 {
		t.Errorf("%d pods unavailable at once, more than the budget's 1", got)
	}
	if n := f.SetEventCount(controller.ReasonRolloutStarted); n != 1 {
		t.Errorf("%d %s events for one image change, want 1", n, controller.ReasonRolloutStarted)
	}
	f.AssertAppsUntouched(before)
}

// waitBudget waits until the disruption controller has computed pdb's
// status over healthy pods.
func (f *testFixture) waitBudget(pdb *policyv1.PodDisruptionBudget, healthy, allowed int32) {
	f.T.Helper()
	var got policyv1.PodDisruptionBudget
	err := wait.PollUntilContextTimeout(f.T.Context(), 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pdb), &got); err != nil {
			return false, err
		}
		st := got.Status
		return st.ObservedGeneration == got.Generation && st.CurrentHealthy == healthy && st.DisruptionsAllowed == allowed, nil
	})
	if err != nil {
		f.T.Fatalf("wait for PodDisruptionBudget %s to allow %d: %v; status %+v", pdb.Name, allowed, err, got.Status)
	}
}
