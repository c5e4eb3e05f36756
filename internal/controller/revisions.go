package controller

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// syncRevisions makes sure a ControllerRevision holds set's current spec,
// and trims the set's history to revisionHistoryLimit without deleting a
// revision that inUse (the revisions pods still run) names. A spec equal to
// an older revision reuses that revision and moves it to the top, as a
// StatefulSet rollback does. It returns what the history says of the
// current revision, read before any revision is trimmed.
func (r *Reconciler) syncRevisions(ctx context.Context, set *v1alpha1.SidecarSet, inUse sets.Set[string]) (historyFacts, error) {
	var list appsv1.ControllerRevisionList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Namespace),
		client.MatchingLabels{v1alpha1.LabelSidecarSet: set.Name}); err != nil {
		return historyFacts{}, fmt.Errorf("list revisions of %s: %w", set.Name, err)
	}
	history := list.Items
	sort.Slice(history, func(i, j int) bool { return history[i].Revision < history[j].Revision })
	var top int64
	if len(history) > 0 {
		top = history[len(history)-1].Revision
	}

	name := revision.Name(set.Name, &set.Spec)
	var latest *appsv1.ControllerRevision
	for i := range history {
		if history[i].Name == name {
			latest = history[i].DeepCopy()
		}
	}
	labels := revision.Labels(set, latest)
	switch {
	case latest == nil:
		latest = &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{
				Name:      name,
				Namespace: r.Namespace,
				Labels:    labels,
				Annotations: map[string]string{
					v1alpha1.AnnotationFirstRevision: strconv.FormatInt(top+1, 10),
				},
			},
			Data:     runtime.RawExtension{Raw: revision.Data(&set.Spec)},
			Revision: top + 1,
		}
		if err := controllerutil.SetOwnerReference(set, latest, r.Client.Scheme()); err != nil {
			return historyFacts{}, fmt.Errorf("own revision %s: %w", name, err)
		}
		if err := r.Client.Create(ctx, latest); err != nil && !apierrors.IsAlreadyExists(err) {
			return historyFacts{}, fmt.Errorf("create revision %s: %w", name, err)
		}
		ctrl.LoggerFrom(ctx).Info("created revision", "revision", klog.KObj(latest), "number", latest.Revision)
	case latest.Revision != top || !maps.Equal(latest.Labels, labels):
		// The spec went back to an older revision (rollout undo): it becomes
		// the newest again, so `undo` twice flips between the last two. Or
		// spec.customVersion alone changed, which changes no hash.
		latest.Revision = top + 1
		latest.Labels = labels
		if err := r.Client.Update(ctx, latest); err != nil {
			return historyFacts{}, fmt.Errorf("renumber or relabel revision %s: %w", name, err)
		}
	}

	facts := historyFacts{
		withdrawn: revision.Withdrawn(history, name),
		resizable: revision.ResizableFrom(&set.Spec, history),
	}

	limit := int(ptr.Deref(set.Spec.RevisionHistoryLimit, 10))
	var old []appsv1.ControllerRevision
	for _, h := range history {
		if h.Name != name && !inUse.Has(h.Name) && !revision.Pinned(set, &h) {
			old = append(old, h)
		}
	}
	for i := 0; i < len(old)-limit; i++ {
		if err := r.Client.Delete(ctx, &old[i]); client.IgnoreNotFound(err) != nil {
			return historyFacts{}, fmt.Errorf("trim revision %s: %w", old[i].Name, err)
		}
	}
	return facts, nil
}

// historyFacts is what a set's history says of its current revision.
type historyFacts struct {
	// withdrawn names the revisions first declared after the current one
	// (revision.Withdrawn).
	withdrawn map[string]bool
	// resizable names the revisions whose pods reach the current one in
	// place (revision.ResizableFrom).
	resizable map[string]bool
}
