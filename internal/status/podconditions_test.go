package status

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

var (
	t0 = metav1.NewTime(time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC))
	t1 = metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
)

func upgradable(status corev1.ConditionStatus, sets string, at metav1.Time) corev1.PodCondition {
	c := corev1.PodCondition{Type: v1alpha1.PodConditionUpgradable, Status: status, LastTransitionTime: at}
	if status == corev1.ConditionFalse {
		c.Reason, c.Message = v1alpha1.ReasonUpdateImmutableField, notUpgradablePrefix+sets
	} else {
		c.Reason, c.Message = ReasonInPlace, "every SidecarSet can update this pod's sidecars in place"
	}
	return c
}

func driftedCond(status corev1.ConditionStatus, sets string, at metav1.Time) corev1.PodCondition {
	c := corev1.PodCondition{Type: PodConditionDrifted, Status: status, LastTransitionTime: at}
	if status == corev1.ConditionTrue {
		c.Reason, c.Message = ReasonImageChangedByHand, driftedPrefix+sets
	} else {
		c.Reason, c.Message = ReasonAsWritten, "sidecar images are as the SidecarSets wrote them"
	}
	return c
}

var ready = corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t0}

func TestPodConditions(t *testing.T) {
	stuck := PodVerdict{NotUpgradable: true}
	tests := []struct {
		name    string
		current []corev1.PodCondition
		set     string
		verdict PodVerdict
		want    PodConditionsUpdate
	}{
		{
			name:    "no conditions, a clear: nothing to write",
			current: []corev1.PodCondition{ready},
			set:     "a",
			want:    PodConditionsUpdate{Conditions: []corev1.PodCondition{ready}},
		},
		{
			name:    "no conditions, a not upgradable",
			current: []corev1.PodCondition{ready},
			set:     "a", verdict: stuck,
			want: PodConditionsUpdate{
				Conditions: []corev1.PodCondition{ready, upgradable(corev1.ConditionFalse, "a", t1)},
				Changed:    true, NewlyNotUpgradable: true,
			},
		},
		{
			name:    "b not upgradable, a too: both listed, transition time kept",
			current: []corev1.PodCondition{upgradable(corev1.ConditionFalse, "b", t0), ready},
			set:     "a", verdict: stuck,
			want: PodConditionsUpdate{
				Conditions: []corev1.PodCondition{upgradable(corev1.ConditionFalse, "a; b", t0), ready},
				Changed:    true, NewlyNotUpgradable: true,
			},
		},
		{
			name:    "a and b listed, a still not upgradable: nothing to write",
			current: []corev1.PodCondition{upgradable(corev1.ConditionFalse, "a; b", t0)},
			set:     "a", verdict: stuck,
			want: PodConditionsUpdate{Conditions: []corev1.PodCondition{upgradable(corev1.ConditionFalse, "a; b", t0)}},
		},
		{
			name:    "a and b listed, a upgradable again: b's stays",
			current: []corev1.PodCondition{upgradable(corev1.ConditionFalse, "a; b", t0)},
			set:     "a",
			want: PodConditionsUpdate{
				Conditions: []corev1.PodCondition{upgradable(corev1.ConditionFalse, "b", t0)},
				Changed:    true,
			},
		},
		{
			name:    "a alone listed, a upgradable again: True from now",
			current: []corev1.PodCondition{upgradable(corev1.ConditionFalse, "a", t0)},
			set:     "a",
			want: PodConditionsUpdate{
				Conditions: []corev1.PodCondition{upgradable(corev1.ConditionTrue, "", t1)},
				Changed:    true,
			},
		},
		{
			name:    "True, a clear: nothing to write",
			current: []corev1.PodCondition{upgradable(corev1.ConditionTrue, "", t0), driftedCond(corev1.ConditionFalse, "", t0)},
			set:     "a",
			want: PodConditionsUpdate{Conditions: []corev1.PodCondition{
				upgradable(corev1.ConditionTrue, "", t0), driftedCond(corev1.ConditionFalse, "", t0)}},
		},
		{
			name:    "three sets: b joins a and c in order",
			current: []corev1.PodCondition{upgradable(corev1.ConditionFalse, "a; c", t0)},
			set:     "b", verdict: stuck,
			want: PodConditionsUpdate{
				Conditions: []corev1.PodCondition{upgradable(corev1.ConditionFalse, "a; b; c", t0)},
				Changed:    true, NewlyNotUpgradable: true,
			},
		},
		{
			name:    "three sets: b leaves, a and c stay",
			current: []corev1.PodCondition{upgradable(corev1.ConditionFalse, "a; b; c", t0)},
			set:     "b",
			want: PodConditionsUpdate{
				Conditions: []corev1.PodCondition{upgradable(corev1.ConditionFalse, "a; c", t0)},
				Changed:    true,
			},
		},
		{
			name:    "not listed and clear: the others' list is left as it is",
			current: []corev1.PodCondition{upgradable(corev1.ConditionFalse, "a; c", t0)},
			set:     "b",
			want:    PodConditionsUpdate{Conditions: []corev1.PodCondition{upgradable(corev1.ConditionFalse, "a; c", t0)}},
		},
		{
			name:    "a drifts, b drifted already",
			current: []corev1.PodCondition{driftedCond(corev1.ConditionTrue, "b (log, proxy)", t0)},
			set:     "a", verdict: PodVerdict{Drifted: []string{"exporter"}},
			want: PodConditionsUpdate{
				Conditions: []corev1.PodCondition{driftedCond(corev1.ConditionTrue, "a (exporter); b (log, proxy)", t0)},
				Changed:    true, NewlyDrifted: true,
			},
		},
		{
			name:    "a drifts in one more container: updated, not newly",
			current: []corev1.PodCondition{driftedCond(corev1.ConditionTrue, "a (exporter)", t0)},
			set:     "a", verdict: PodVerdict{Drifted: []string{"exporter", "log"}},
			want: PodConditionsUpdate{
				Conditions: []corev1.PodCondition{driftedCond(corev1.ConditionTrue, "a (exporter, log)", t0)},
				Changed:    true,
			},
		},
		{
			name:    "a reverted, b still drifted",
			current: []corev1.PodCondition{driftedCond(corev1.ConditionTrue, "a (exporter); b (proxy)", t0)},
			set:     "a",
			want: PodConditionsUpdate{
				Conditions: []corev1.PodCondition{driftedCond(corev1.ConditionTrue, "b (proxy)", t0)},
				Changed:    true,
			},
		},
		{
			name:    "drifted and not upgradable at once, from False conditions",
			current: []corev1.PodCondition{upgradable(corev1.ConditionTrue, "", t0), driftedCond(corev1.ConditionFalse, "", t0)},
			set:     "a", verdict: PodVerdict{NotUpgradable: true, Drifted: []string{"exporter"}},
			want: PodConditionsUpdate{
				Conditions: []corev1.PodCondition{upgradable(corev1.ConditionFalse, "a", t1), driftedCond(corev1.ConditionTrue, "a (exporter)", t1)},
				Changed:    true, NewlyNotUpgradable: true, NewlyDrifted: true,
			},
		},
		{
			name: "an earlier release's message counts as its set's entry",
			current: []corev1.PodCondition{{Type: v1alpha1.PodConditionUpgradable, Status: corev1.ConditionFalse,
				Reason: v1alpha1.ReasonUpdateImmutableField, LastTransitionTime: t0,
				Message: "SidecarSet b changed more than images; the pod needs a recreate to take it"}},
			set: "a", verdict: stuck,
			want: PodConditionsUpdate{
				Conditions: []corev1.PodCondition{upgradable(corev1.ConditionFalse, "a; b", t0)},
				Changed:    true, NewlyNotUpgradable: true,
			},
		},
		{
			name: "an earlier release's drift message of the set itself: rewritten, not newly",
			current: []corev1.PodCondition{{Type: PodConditionDrifted, Status: corev1.ConditionTrue,
				Reason: ReasonImageChangedByHand, LastTransitionTime: t0,
				Message: "SidecarSet a: image of exporter differs from what the controller wrote"}},
			set: "a", verdict: PodVerdict{Drifted: []string{"exporter"}},
			want: PodConditionsUpdate{
				Conditions: []corev1.PodCondition{driftedCond(corev1.ConditionTrue, "a (exporter)", t0)},
				Changed:    true,
			},
		},
		{
			name: "a raised message of another form holds no entry",
			current: []corev1.PodCondition{{Type: PodConditionDrifted, Status: corev1.ConditionTrue,
				Reason: "SomethingElse", Message: "written by someone else", LastTransitionTime: t0}},
			set: "a",
			want: PodConditionsUpdate{
				Conditions: []corev1.PodCondition{driftedCond(corev1.ConditionFalse, "", t1)},
				Changed:    true,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := fmt.Sprint(tt.current)
			got := PodConditions(tt.current, tt.set, tt.verdict, t1)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PodConditions (-want +got):\n%s", diff)
			}
			if fmt.Sprint(tt.current) != before {
				t.Errorf("PodConditions modified its input")
			}
		})
	}
}

// TestPodConditionsConverge: sets judging one pod in turn, in any order,
// each write once at most; a second round writes nothing and every verdict
// is listed.
func TestPodConditionsConverge(t *testing.T) {
	verdicts := map[string]PodVerdict{
		"a": {NotUpgradable: true},
		"b": {NotUpgradable: true, Drifted: []string{"proxy"}},
		"c": {Drifted: []string{"exporter", "log"}},
		"d": {},
	}
	orders := [][]string{{"a", "b", "c", "d"}, {"d", "c", "b", "a"}, {"b", "d", "a", "c"}}
	for _, order := range orders {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			conds := []corev1.PodCondition{ready}
			for round := range 3 {
				for _, set := range order {
					u := PodConditions(conds, set, verdicts[set], t1)
					if u.Changed && round > 0 {
						t.Errorf("round %d: set %s wrote again: %v", round, set, u.Conditions)
					}
					conds = u.Conditions
				}
			}
			want := []corev1.PodCondition{ready,
				upgradable(corev1.ConditionFalse, "a; b", t1),
				driftedCond(corev1.ConditionTrue, "b (proxy); c (exporter, log)", t1),
			}
			// The order of the two conditions is the order they were first
			// added in.
			if conds[1].Type != v1alpha1.PodConditionUpgradable {
				want[1], want[2] = want[2], want[1]
			}
			if diff := cmp.Diff(want, conds); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}
