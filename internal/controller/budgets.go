package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/rollout"
)

// budgets returns, per pod, the PodDisruptionBudgets that select it, each
// with the disruptions already spent on it: the pods it selects that any
// SidecarSet's rollout disrupted and that are not back yet
// (rollout.Disrupted). Two sets bumped in one commit share one budget; each
// counting only its own pods would let both take its one disruption.
func (r *Reconciler) budgets(ctx context.Context, pods []matched) (map[types.NamespacedName][]rollout.Budget, error) {
	out := map[types.NamespacedName][]rollout.Budget{}
	namespaces := sets.New[string]()
	for _, p := range pods {
		namespaces.Insert(p.pod.Namespace)
	}
	if namespaces.Len() == 0 {
		return out, nil
	}
	known, err := r.sets(ctx)
	if err != nil {
		return nil, err
	}
	for _, ns := range sets.List(namespaces) {
		var pdbs policyv1.PodDisruptionBudgetList
		if err := r.Client.List(ctx, &pdbs, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("list PodDisruptionBudgets in %s: %w", ns, err)
		}
		if len(pdbs.Items) == 0 {
			continue
		}
		var managed corev1.PodList
		if err := r.Client.List(ctx, &managed, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelManaged: "true"},
			client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list managed pods in %s: %w", ns, err)
		}
		fresh := make([]*corev1.Pod, len(managed.Items))
		for i := range managed.Items {
			fresh[i] = r.freshest(&managed.Items[i])
		}
		disrupted := rollout.NewDisruptions(fresh, known, r.Clock.Now())
		for _, pdb := range pdbs.Items {
			sel, ok := rollout.BudgetSelector(pdb.Spec.Selector)
			if !ok {
				continue
			}
			b := rollout.Budget{Name: pdb.Namespace + "/" + pdb.Name, DisruptionsAllowed: pdb.Status.DisruptionsAllowed,
				Spent: disrupted.Spent(sel)}
			for _, p := range pods {
				if p.pod.Namespace == ns && sel.Matches(labels.Set(p.pod.Labels)) {
					key := types.NamespacedName{Namespace: ns, Name: p.pod.Name}
					out[key] = append(out[key], b)
				}
			}
		}
	}
	return out, nil
}

// markDisruptedBy marks what other SidecarSets' records tell of each pod
// (rollout.MarkOthers): whether another set's rollout has it down, or is
// taking it down, and, on a ready pod back from this set's write, whether
// another set's write that no set counts is in flight. The others' writes
// this manager made are seen even before the cache has them.
func (r *Reconciler) markDisruptedBy(ctx context.Context, set string, pods []matched, classified []rollout.Pod) error {
	var sets rollout.Sets
	for i, p := range pods {
		pod := r.freshest(p.pod)
		if pod.Annotations[v1alpha1.AnnotationInjected] == set {
			// The set's record alone: every record's set is named there.
			continue
		}
		state, _ := revision.Decode(pod.Annotations)
		delete(state, set)
		if len(state) == 0 {
			continue
		}
		if sets == nil {
			var err error
			if sets, err = r.sets(ctx); err != nil {
				return err
			}
		}
		rollout.MarkOthers(&classified[i], pod, state, sets, r.Clock.Now())
	}
	return nil
}

// sets tells what every SidecarSet's records mean (rollout.SetsOf).
func (r *Reconciler) sets(ctx context.Context) (rollout.Sets, error) {
	var list v1alpha1.SidecarSetList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list SidecarSets: %w", err)
	}
	return rollout.SetsOf(list.Items), nil
}
