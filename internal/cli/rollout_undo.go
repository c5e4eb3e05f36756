package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// NewCmdUndo returns `rollout undo NAME [--to-revision R]`.
func NewCmdUndo(o *Options) *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "undo NAME [--to-revision R]",
		Short: "Declare the previous (or a given) revision's containers again",
		Long: `Declare the containers, init containers, volumes and imagePullSecrets of an
earlier revision again, read from its ControllerRevision in the manager's
namespace (--manager-namespace). Selectors, strategies and the partition stay
as they are, so pods move back at the pace the rollout is set to
(maxUnavailable, PodDisruptionBudgets).

Going back to a revision declared before the current one, the pods on every
revision declared after it go back whatever the partition: the controller
moves them first, beyond the partition if need be. (Otherwise a partition above
0 would keep exactly the canaries on the withdrawn revision, since the pods that
never moved are on the latest revision again.) The controller does so however
the older spec is declared again: by undo, or by applying the old manifest.
Pods on revisions declared before it stay as the partition says. Going forward
to a revision declared after the current one is a rollout like any other: the
partition decides. Undo lists the pods it brings back, and says so when the
rollout is paused: nothing moves until it is resumed.

Without --to-revision the previous revision is taken: the newest one other than
the current spec's. --to-revision takes a revision's name, as status shows the
latest one and kubectl get controllerrevisions -n sidecarset-system
-l sidecarset.dev/sidecarset=NAME lists them all (the REVISION number that
kubectl lists works too).

The patch carries the resourceVersion read, so an edit made in between fails
the undo rather than being overwritten.`,
		Example: `  # Back to the previous revision
  kubectl sidecarset rollout undo mysql-exporter

  # Back to a given revision
  kubectl sidecarset rollout undo mysql-exporter --to-revision mysql-exporter-c6z2fb9f54`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.Client()
			if err != nil {
				return err
			}
			return Undo(cmd.Context(), c, o.Out, UndoOptions{
				Name:             args[0],
				ToRevision:       to,
				ManagerNamespace: o.ManagerNamespace,
			})
		},
	}
	cmd.Flags().StringVar(&to, "to-revision", "", "Name of the revision to go back to, or its number (default: the previous one)")
	return exits(cmd, map[int]string{
		0: "the revision is declared again (or already was)",
		1: "no such SidecarSet or revision, the SidecarSet changed while undo read it, or another error",
		5: "",
	})
}

// UndoOptions says what Undo goes back to.
type UndoOptions struct {
	Name string
	// ToRevision is a revision number or name; empty means the previous one.
	ToRevision string
	// ManagerNamespace holds the ControllerRevisions.
	ManagerNamespace string
}

// Undo declares an earlier revision's injected part again.
func Undo(ctx context.Context, c client.Client, out io.Writer, opts UndoOptions) error {
	set, err := getSet(ctx, c, opts.Name)
	if err != nil {
		return err
	}
	list, err := setRevisions(ctx, c, opts.Name, opts.ManagerNamespace)
	if err != nil {
		return err
	}
	current := revision.Name(set.Name, &set.Spec)
	cr, err := pickRevision(list.Items, current, opts.ToRevision)
	if err != nil {
		return fmt.Errorf("%s (revisions are kept in namespace %s; see --manager-namespace): %w", opts.Name, opts.ManagerNamespace, err)
	}
	if cr.Name == current {
		_, err := fmt.Fprintf(out, "%s: already declares revision %s; nothing to do\n", opts.Name, cr.Name)
		return err
	}

	withdrawn := revision.Withdrawn(list.Items, cr.Name)
	if !slices.ContainsFunc(list.Items, func(r appsv1.ControllerRevision) bool { return r.Name == current }) {
		// Declared so recently that no revision is kept for it yet: the
		// newest of all.
		withdrawn[current] = true
	}
	back := withdrawn[current]
	var moving []string
	if back {
		pods, err := setPods(ctx, c, set, "", opts.ManagerNamespace)
		if err != nil {
			return err
		}
		for _, p := range pods {
			if withdrawn[p.Record.Revision] {
				moving = append(moving, p.Key.String())
			}
		}
	}

	before := images(&set.Spec)
	patch := client.MergeFromWithOptions(set.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if err := revision.ApplyData(&set.Spec, cr.Data.Raw); err != nil {
		return fmt.Errorf("read revision %s: %w", cr.Name, err)
	}
	if err := c.Patch(ctx, set, patch); err != nil {
		return fmt.Errorf("declare revision %s in SidecarSet %s: %w", cr.Name, opts.Name, err)
	}
	if _, err := fmt.Fprintf(out, "%s: declared revision %s again: %s (was %s)\n",
		opts.Name, cr.Name, images(&set.Spec), before); err != nil {
		return err
	}
	return undoPlan(out, set, back, moving)
}

// undoPlan says what the controller does after an undo: going back, the
// pods it brings back from the undone revision, at what pace, and what
// holds them; going forward, that the partition decides.
func undoPlan(out io.Writer, set *v1alpha1.SidecarSet, back bool, moving []string) error {
	st := set.Spec.UpdateStrategy
	var b strings.Builder
	switch {
	case !back:
		fmt.Fprintf(&b, "  a revision declared after the current one: pods move to it as the partition (%s) says, at most %s at a time\n",
			intOrPercent(st.Partition, "0"), intOrPercent(st.MaxUnavailable, "1"))
	case len(moving) == 0:
		b.WriteString("  no pod runs the revision undone; new pods get the one declared now\n")
	default:
		fmt.Fprintf(&b, "  %d pod(s) go back, whatever the partition (%s), at most %s at a time: %s\n",
			len(moving), intOrPercent(st.Partition, "0"), intOrPercent(st.MaxUnavailable, "1"), strings.Join(moving, ", "))
	}
	switch {
	case st.Type == v1alpha1.NotUpdateStrategy:
		b.WriteString("  updateStrategy.type is NotUpdate: running pods keep their revision; only new pods get this one\n")
	case st.Paused:
		fmt.Fprintf(&b, "  updateStrategy.paused is true: nothing moves until `kubectl sidecarset rollout resume %s`\n", set.Name)
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// pickRevision returns the revision to: its name or number, or, when empty,
// the newest revision other than current. Revisions are named as status
// names them (by name only): the number is taken for those who read it
// from kubectl get controllerrevisions.
func pickRevision(revs []appsv1.ControllerRevision, current, to string) (*appsv1.ControllerRevision, error) {
	slices.SortFunc(revs, func(a, b appsv1.ControllerRevision) int { return int(b.Revision - a.Revision) })
	if to == "" {
		for i := range revs {
			if revs[i].Name != current {
				return &revs[i], nil
			}
		}
		return nil, fmt.Errorf("no revision before the current one (%s) is kept", current)
	}
	n, numErr := strconv.ParseInt(to, 10, 64)
	for i := range revs {
		if (numErr == nil && revs[i].Revision == n) || revs[i].Name == to {
			return &revs[i], nil
		}
	}
	var kept []string
	for _, r := range revs {
		kept = append(kept, r.Name)
	}
	return nil, fmt.Errorf("--to-revision %s: no such revision; kept, newest first: %s", to, orNone(strings.Join(kept, ", ")))
}

// images spells a spec's sidecar images, "exporter=img:1, shipper=img:2".
func images(spec *v1alpha1.SidecarSetSpec) string {
	var parts []string
	for _, cs := range [][]v1alpha1.SidecarContainer{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			parts = append(parts, c.Name+"="+c.Image)
		}
	}
	return orNone(strings.Join(parts, ", "))
}
