package rollout

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// labelled returns a ready pod on the old revision with exactly labels.
func labelled(name string, labels map[string]string) Pod {
	p := mk(name)
	p.Labels = labels
	return p
}

func inPlaceOrder(t *testing.T, s v1alpha1.UpdateStrategy, pods []Pod) []string {
	t.Helper()
	o, err := newUpdateOrder(s)
	if err != nil {
		t.Fatal(err)
	}
	place := o.places(pods)
	got := make([]string, len(pods))
	for _, p := range pods {
		got[place[p.Key]] = p.Key.Name
	}
	return got
}

func TestUpdateOrderPlaces(t *testing.T) {
	zone := func(z string) map[string]string { return map[string]string{"zone": z} }
	tests := []struct {
		name     string
		strategy v1alpha1.UpdateStrategy
		pods     []Pod
		want     []string
	}{
		{
			name: "no strategy: by name",
			pods: []Pod{labelled("c", nil), labelled("a", nil), labelled("b", nil)},
			want: []string{"a", "b", "c"},
		},
		{
			name: "weightPriority sums the matching terms' weights",
			strategy: v1alpha1.UpdateStrategy{PriorityStrategy: &v1alpha1.UpdatePriorityStrategy{WeightPriority: []v1alpha1.UpdatePriorityWeightTerm{
				{Weight: 50, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "replica"}}},
				{Weight: 20, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}},
			}}},
			pods: []Pod{
				labelled("p1", map[string]string{"role": "replica"}),
				labelled("p2", map[string]string{"tier": "canary"}),
				labelled("p3", nil),
				labelled("p4", map[string]string{"role": "replica", "tier": "canary"}),
			},
			want: []string{"p4", "p1", "p2", "p3"},
		},
		{
			name: "replicas first, primary last",
			strategy: v1alpha1.UpdateStrategy{PriorityStrategy: &v1alpha1.UpdatePriorityStrategy{WeightPriority: []v1alpha1.UpdatePriorityWeightTerm{
				{Weight: 100, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "replica"}}},
			}}},
			pods: []Pod{
				labelled("db-0", map[string]string{"role": "primary"}),
				labelled("db-1", map[string]string{"role": "replica"}),
				labelled("db-2", map[string]string{"role": "replica"}),
			},
			want: []string{"db-1", "db-2", "db-0"},
		},
		{
			name: "orderPriority: first key by its number, then the next key, then the rest",
			strategy: v1alpha1.UpdateStrategy{PriorityStrategy: &v1alpha1.UpdatePriorityStrategy{OrderPriority: []v1alpha1.UpdatePriorityOrderTerm{
				{OrderedKey: "shard"}, {OrderedKey: "rack"},
			}}},
			pods: []Pod{
				labelled("a", map[string]string{"shard": "s-2"}),
				labelled("b", map[string]string{"shard": "s-10"}),
				labelled("c", map[string]string{"rack": "7"}),
				labelled("d", nil),
				labelled("e", map[string]string{"shard": "x"}),
				labelled("f", map[string]string{"shard": "s-99999999999999999999"}),
			},
			// f's number overflows and counts as none, like e's.
			want: []string{"b", "a", "e", "f", "c", "d"},
		},
		{
			name: "scatter spreads each term's pods and the rest evenly",
			strategy: v1alpha1.UpdateStrategy{ScatterStrategy: []v1alpha1.UpdateScatterTerm{
				{Key: "zone", Value: "a"}, {Key: "zone", Value: "b"},
			}},
			pods: []Pod{
				labelled("a1", zone("a")), labelled("a2", zone("a")), labelled("a3", zone("a")), labelled("a4", zone("a")),
				labelled("b1", zone("b")), labelled("b2", zone("b")), labelled("n1", nil), labelled("n2", nil),
			},
			want: []string{"a1", "b1", "n1", "a2", "a3", "b2", "n2", "a4"},
		},
		{
			name: "scatter of one zone among three",
			strategy: v1alpha1.UpdateStrategy{ScatterStrategy: []v1alpha1.UpdateScatterTerm{
				{Key: "zone", Value: "a"},
			}},
			pods: []Pod{
				labelled("p1", zone("a")), labelled("p2", zone("a")), labelled("p3", zone("b")),
				labelled("p4", zone("b")), labelled("p5", zone("c")), labelled("p6", zone("c")),
			},
			want: []string{"p3", "p1", "p4", "p5", "p2", "p6"},
		},
		{
			name: "scatter within equal priority only",
			strategy: v1alpha1.UpdateStrategy{
				PriorityStrategy: &v1alpha1.UpdatePriorityStrategy{WeightPriority: []v1alpha1.UpdatePriorityWeightTerm{
					{Weight: 10, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"early": "true"}}},
				}},
				ScatterStrategy: []v1alpha1.UpdateScatterTerm{{Key: "zone", Value: "a"}},
			},
			pods: []Pod{
				labelled("p1", map[string]string{"zone": "a", "early": "true"}),
				labelled("p2", map[string]string{"zone": "a", "early": "true"}),
				labelled("p3", map[string]string{"zone": "b", "early": "true"}),
				labelled("p4", map[string]string{"zone": "a"}),
				labelled("p5", map[string]string{"zone": "b"}),
			},
			want: []string{"p1", "p3", "p2", "p4", "p5"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, inPlaceOrder(t, tt.strategy, tt.pods)); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNextFollowsUpdateOrder: the order decides which pods go first and
// which the partition keeps; not-ready pods still go first.
func TestNextFollowsUpdateOrder(t *testing.T) {
	replicasFirst := &v1alpha1.UpdatePriorityStrategy{WeightPriority: []v1alpha1.UpdatePriorityWeightTerm{
		{Weight: 100, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "replica"}}},
	}}
	pods := []Pod{mk("p01", label("role", "primary")), mk("p02", label("role", "replica")), mk("p03", label("role", "replica")), mk("p04", label("role", "primary"))}

	s := strategy("2", "1")
	s.PriorityStrategy = replicasFirst
	plan, err := Next(Input{Latest: planLatest, Pods: pods, Strategy: s})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(outcome{[]string{"p02"}, held(HeldByMaxUnavailable, "p03", HeldByPartition, "p01", "p04")}, outcomeOf(plan)); diff != "" {
		t.Errorf("replicas first, partition 2 (-want +got):\n%s", diff)
	}

	pods[3] = mk("p04", label("role", "primary"), notReady)
	plan, err = Next(Input{Latest: planLatest, Pods: pods, Strategy: s})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(outcome{[]string{"p04", "p02"}, held(HeldByPartition, "p01", "p03")}, outcomeOf(plan)); diff != "" {
		t.Errorf("a not-ready primary goes first (-want +got):\n%s", diff)
	}
}

// TestUpdateOrderProperties: places is a permutation; priority never rises
// along it; within one priority, the pods of each scatter group keep their
// name order; and the order of any pods does not depend on which other
// pods are already updated (it is taken over all of them).
func TestUpdateOrderProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		values := []string{"a", "b", "c"}
		var s v1alpha1.UpdateStrategy
		switch rapid.IntRange(0, 2).Draw(t, "priority") {
		case 1:
			var terms []v1alpha1.UpdatePriorityWeightTerm
			for i := range rapid.IntRange(1, 3).Draw(t, "weights") {
				terms = append(terms, v1alpha1.UpdatePriorityWeightTerm{
					Weight:        int32(rapid.IntRange(1, 100).Draw(t, fmt.Sprintf("weight%d", i))),
					MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"k": rapid.SampledFrom(values).Draw(t, fmt.Sprintf("wv%d", i))}},
				})
			}
			s.PriorityStrategy = &v1alpha1.UpdatePriorityStrategy{WeightPriority: terms}
		case 2:
			s.PriorityStrategy = &v1alpha1.UpdatePriorityStrategy{OrderPriority: []v1alpha1.UpdatePriorityOrderTerm{{OrderedKey: "n"}, {OrderedKey: "k"}}}
		}
		for _, v := range rapid.SliceOfDistinct(rapid.SampledFrom(values), rapid.ID[string]).Draw(t, "scatter") {
			s.ScatterStrategy = append(s.ScatterStrategy, v1alpha1.UpdateScatterTerm{Key: "z", Value: v})
		}
		var pods []Pod
		for i := range rapid.IntRange(0, 12).Draw(t, "pods") {
			l := map[string]string{}
			for _, k := range []string{"k", "z"} {
				if v := rapid.SampledFrom(append(values, "")).Draw(t, fmt.Sprintf("%s%d", k, i)); v != "" {
					l[k] = v
				}
			}
			if rapid.Bool().Draw(t, fmt.Sprintf("n%d", i)) {
				l["n"] = fmt.Sprintf("x-%d", rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("nv%d", i)))
			}
			pods = append(pods, labelled(fmt.Sprintf("p%02d", i), l))
		}
		o, err := newUpdateOrder(s)
		if err != nil {
			t.Fatal(err)
		}
		place := o.places(pods)
		ordered := make([]Pod, len(pods))
		seen := make([]bool, len(pods))
		for _, p := range pods {
			i, ok := place[p.Key]
			if !ok || i < 0 || i >= len(pods) || seen[i] {
				t.Fatalf("places is not a permutation: %v", place)
			}
			seen[i] = true
			ordered[i] = p
		}
		group := func(p Pod) string {
			for _, term := range s.ScatterStrategy {
				if p.Labels[term.Key] == term.Value {
					return term.Value
				}
			}
			return ""
		}
		for i := 1; i < len(ordered); i++ {
			if o.comparePriority(ordered[i-1].Labels, ordered[i].Labels) > 0 {
				t.Fatalf("%s before %s, of higher priority", ordered[i-1].Key.Name, ordered[i].Key.Name)
			}
			for j := range i {
				a, b := ordered[j], ordered[i]
				if o.comparePriority(a.Labels, b.Labels) == 0 && group(a) == group(b) && a.Key.Name > b.Key.Name {
					t.Fatalf("scatter group %q: %s before %s", group(a), a.Key.Name, b.Key.Name)
				}
			}
		}
		// The same pods, some now updated, are placed the same.
		again := slices.Clone(pods)
		for i := range again {
			if rapid.Bool().Draw(t, fmt.Sprintf("updated%d", i)) {
				updated(&again[i])
			}
		}
		if diff := cmp.Diff(place, o.places(again)); diff != "" {
			t.Fatalf("places changed with pods updated (-before +after):\n%s", diff)
		}
	})
}
