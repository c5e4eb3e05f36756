package webhook

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// withFallbacks returns sets with every set whose new pods get another
// revision than its latest (inject.PickRevision: the last completed one of a
// rollout that stalled and paused itself, or the one
// injectionStrategy.revision names) replaced by a copy declaring that
// revision, and, by set name, a warning to give (and tell the set in an
// event, when event) if the set is injected. A set whose revision cannot be
// read stays as it is: injecting the latest revision is what would have
// happened without the pick, and never fails the pod.
func (m *PodMutator) withFallbacks(ctx context.Context, sets []*v1alpha1.SidecarSet) ([]*v1alpha1.SidecarSet, map[string]fallbackNote) {
	notes := map[string]fallbackNote{}
	out, cloned := sets, false
	for i, set := range sets {
		pick := inject.PickRevision(set)
		if pick.Latest() {
			continue
		}
		fallback, name, err := m.fallback(ctx, set, pick)
		switch {
		case err != nil && pick.Stalled:
			notes[set.Name] = fallbackNote{warning: fmt.Sprintf("sidecarset: %s: its rollout stalled, but %v; injected its latest revision", set.Name, err)}
			continue
		case err != nil:
			notes[set.Name] = fallbackNote{event: true, warning: fmt.Sprintf(
				"sidecarset: %s: spec.injectionStrategy.revision: %v; injected its latest revision", set.Name, err)}
			continue
		case fallback == nil:
			// The custom version names the latest revision.
			continue
		}
		if !cloned {
			// The caller's slice is left as it was.
			out, cloned = slices.Clone(sets), true
		}
		out[i] = fallback
		if pick.Stalled {
			notes[set.Name] = fallbackNote{warning: fmt.Sprintf(
				"sidecarset: %s: the rollout of its latest revision stalled and paused itself; injected %s, the last revision that completed",
				set.Name, name)}
		}
	}
	return out, notes
}

// fallbackNote is what withFallbacks says about a set it looked at.
type fallbackNote struct {
	warning string
	// event: the warning is told the set too (inject.ReasonInjectionWarning):
	// its own spec names a revision that is missing.
	event bool
}

// fallback returns a copy of set that declares the revision pick names,
// read from its ControllerRevision in the manager's namespace, and that
// revision's name; a nil copy when it is the latest revision.
func (m *PodMutator) fallback(ctx context.Context, set *v1alpha1.SidecarSet, pick inject.RevisionPick) (*v1alpha1.SidecarSet, string, error) {
	var cr appsv1.ControllerRevision
	switch {
	case pick.Name != "":
		if err := m.Reader.Get(ctx, client.ObjectKey{Namespace: m.Options.ManagerNamespace, Name: pick.Name}, &cr); err != nil {
			return nil, "", fmt.Errorf("read revision %s: %w", pick.Name, err)
		}
		if cr.Labels[v1alpha1.LabelSidecarSet] != set.Name {
			return nil, "", fmt.Errorf("revision %s belongs to %q", pick.Name, cr.Labels[v1alpha1.LabelSidecarSet])
		}
	default:
		var list appsv1.ControllerRevisionList
		if err := m.Reader.List(ctx, &list, client.InNamespace(m.Options.ManagerNamespace), client.MatchingLabels{
			v1alpha1.LabelSidecarSet: set.Name, v1alpha1.LabelCustomVersion: pick.CustomVersion,
		}); err != nil {
			return nil, "", fmt.Errorf("list revisions of custom version %q: %w", pick.CustomVersion, err)
		}
		if len(list.Items) == 0 {
			return nil, "", fmt.Errorf("no revision has custom version %q", pick.CustomVersion)
		}
		// The newest one: a custom version declared again on another
		// spec labels that spec's revision too.
		cr = slices.MaxFunc(list.Items, func(a, b appsv1.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })
		if cr.Name == revision.Name(set.Name, &set.Spec) {
			return nil, cr.Name, nil
		}
	}
	copied := set.DeepCopy()
	if err := revision.ApplyData(&copied.Spec, cr.Data.Raw); err != nil {
		return nil, "", fmt.Errorf("revision %s: %w", cr.Name, err)
	}
	// Its own cache entry: the injection cache keys a set's version by
	// resourceVersion, which this copy shares with the latest spec.
	copied.ResourceVersion = set.ResourceVersion + "/" + cr.Name
	return copied, cr.Name, nil
}
