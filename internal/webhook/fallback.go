package webhook

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// withFallbacks returns sets with every set whose rollout stalled and paused
// itself replaced by a copy declaring its last completed revision
// (inject.FallbackRevision), and, by set name, a warning to give when the
// set is injected. A set whose completed revision cannot be read stays as
// it is: injecting the latest revision is what would have happened without
// the fallback, and never fails the pod.
func (m *PodMutator) withFallbacks(ctx context.Context, sets []*v1alpha1.SidecarSet) ([]*v1alpha1.SidecarSet, map[string]string) {
	warnings := map[string]string{}
	out, cloned := sets, false
	for i, set := range sets {
		name := inject.FallbackRevision(set)
		if name == "" {
			continue
		}
		fallback, err := m.fallback(ctx, set, name)
		if err != nil {
			warnings[set.Name] = fmt.Sprintf("sidecarset: %s: its rollout stalled, but %v; injected its latest revision", set.Name, err)
			continue
		}
		if !cloned {
			// The caller's slice is left as it was.
			out, cloned = slices.Clone(sets), true
		}
		out[i] = fallback
		warnings[set.Name] = fmt.Sprintf(
			"sidecarset: %s: the rollout of its latest revision stalled and paused itself; injected %s, the last revision that completed",
			set.Name, name)
	}
	return out, warnings
}

// fallback returns a copy of set that declares the revision name, read from
// its ControllerRevision in the manager's namespace.
func (m *PodMutator) fallback(ctx context.Context, set *v1alpha1.SidecarSet, name string) (*v1alpha1.SidecarSet, error) {
	var cr appsv1.ControllerRevision
	if err := m.Reader.Get(ctx, client.ObjectKey{Namespace: m.Options.ManagerNamespace, Name: name}, &cr); err != nil {
		return nil, fmt.Errorf("read revision %s: %w", name, err)
	}
	if cr.Labels[v1alpha1.LabelSidecarSet] != set.Name {
		return nil, fmt.Errorf("revision %s belongs to %q", name, cr.Labels[v1alpha1.LabelSidecarSet])
	}
	copied := set.DeepCopy()
	if err := revision.ApplyData(&copied.Spec, cr.Data.Raw); err != nil {
		return nil, fmt.Errorf("revision %s: %w", name, err)
	}
	// Its own cache entry: the injection cache keys a set's version by
	// resourceVersion, which this copy shares with the latest spec.
	copied.ResourceVersion = set.ResourceVersion + "/" + name
	return copied, nil
}
