package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// updateOrder orders candidates by priorityStrategy and scatterStrategy.
type updateOrder struct {
	weights []weightTerm
	keys    []string
	scatter []v1alpha1.UpdateScatterTerm
}

type weightTerm struct {
	weight   int64
	selector labels.Selector
}

func newUpdateOrder(s v1alpha1.UpdateStrategy) (updateOrder, error) {
	o := updateOrder{scatter: s.ScatterStrategy}
	if ps := s.PriorityStrategy; ps != nil {
		for i, t := range ps.WeightPriority {
			sel, err := metav1.LabelSelectorAsSelector(&t.MatchSelector)
			if err != nil {
				return updateOrder{}, fmt.Errorf("updateStrategy.priorityStrategy.weightPriority[%d].matchSelector: %w", i, err)
			}
			o.weights = append(o.weights, weightTerm{int64(t.Weight), sel})
		}
		for _, t := range ps.OrderPriority {
			o.keys = append(o.keys, t.OrderedKey)
		}
	}
	return o, nil
}

// places returns each pod's place in the update order: by priority, higher
// first; among equal priority, scatter terms spread their pods evenly; by
// namespace/name otherwise. It is taken over every pod of the set, so the
// pods left keep their order as others update, and lowering the partition
// extends the same pods (scatter places may move as pods come and go).
//
// Worked cases:
//
//	weightPriority role=replica 50, tier=canary 20; pods p1 {role=replica}, p2 {tier=canary}, p3 {}, p4 {role=replica, tier=canary}
//	  → p4 (70) p1 (50) p2 (20) p3 (0)
//	orderPriority shard, then rack; pods a {shard=s-2}, b {shard=s-10}, c {rack=7}, d {}, e {shard=x}
//	  → b (shard 10) a (shard 2) e (shard, no number: 0) c (rack 7) d (no key)
//	scatter zone=a, zone=b; a1..a4 {zone=a}, b1 b2 {zone=b}, n1 n2 {}
//	  → a1 b1 n1 a2 a3 b2 n2 a4
func (o updateOrder) places(pods []Pod) map[types.NamespacedName]int {
	ordered := slices.Clone(pods)
	slices.SortFunc(ordered, func(a, b Pod) int {
		return cmp.Or(o.comparePriority(a.Labels, b.Labels), compareKeys(a.Key, b.Key))
	})
	if len(o.scatter) > 0 {
		for start := 0; start < len(ordered); {
			end := start + 1
			for end < len(ordered) && o.comparePriority(ordered[end].Labels, ordered[start].Labels) == 0 {
				end++
			}
			o.scattered(ordered[start:end])
			start = end
		}
	}
	place := make(map[types.NamespacedName]int, len(ordered))
	for i, p := range ordered {
		place[p.Key] = i
	}
	return place
}

// comparePriority orders a pod with labels a first if its priority is higher.
func (o updateOrder) comparePriority(a, b map[string]string) int {
	if len(o.weights) > 0 {
		return cmp.Compare(o.weight(b), o.weight(a))
	}
	if len(o.keys) > 0 {
		levelA, numA := o.rank(a)
		levelB, numB := o.rank(b)
		return cmp.Or(cmp.Compare(levelA, levelB), cmp.Compare(numB, numA))
	}
	return 0
}

func (o updateOrder) weight(l map[string]string) int64 {
	var w int64
	for _, t := range o.weights {
		if t.selector.Matches(labels.Set(l)) {
			w += t.weight
		}
	}
	return w
}

// rank returns the index of the first ordered key among l, len(keys) when
// none is there, and the number that ends that label's value.
func (o updateOrder) rank(l map[string]string) (int, int64) {
	for i, k := range o.keys {
		if v, ok := l[k]; ok {
			return i, trailingNumber(v)
		}
	}
	return len(o.keys), 0
}

// trailingNumber is the number the digits at the end of v spell: 10 for
// "shard-10", 0 when v ends in no digit or the number overflows.
func trailingNumber(v string) int64 {
	i := len(v)
	for i > 0 && v[i-1] >= '0' && v[i-1] <= '9' {
		i--
	}
	n, err := strconv.ParseInt(v[i:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// scattered reorders pods, in place, spreading each scatter term's pods (a
// pod counts for the first it matches), and the rest, evenly: the k-th of
// m pods of a group takes the place (2k+1)/2m, ties in term order.
func (o updateOrder) scattered(pods []Pod) {
	type placed struct {
		pod          Pod
		group        int
		index, count int64
	}
	group := func(p Pod) int {
		for i, t := range o.scatter {
			if v, ok := p.Labels[t.Key]; ok && v == t.Value {
				return i
			}
		}
		return len(o.scatter)
	}
	counts := make([]int64, len(o.scatter)+1)
	all := make([]placed, len(pods))
	for i, p := range pods {
		g := group(p)
		all[i] = placed{pod: p, group: g, index: counts[g]}
		counts[g]++
	}
	for i := range all {
		all[i].count = counts[all[i].group]
	}
	slices.SortStableFunc(all, func(a, b placed) int {
		// (2a.index+1)/2a.count against (2b.index+1)/2b.count.
		return cmp.Or(cmp.Compare((2*a.index+1)*b.count, (2*b.index+1)*a.count), cmp.Compare(a.group, b.group))
	})
	for i, p := range all {
		pods[i] = p.pod
	}
}
