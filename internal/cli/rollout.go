package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// NewCmdRollout returns `rollout`, the parent of the verbs that steer a
// rollout.
func NewCmdRollout(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Steer a rollout: promote, pause, resume, undo, run, history",
		Long: `Steer how running pods move to a SidecarSet's latest revision.

Every write is a JSON merge patch of the fields it changes, so an edit someone
makes at the same time to other fields is kept.`,
		Example: `  # Keep 10 of the matched pods on their revision, update the rest
  kubectl sidecarset rollout promote mysql-exporter --partition 10

  # Walk the partition down, stopping at the first anomaly
  kubectl sidecarset rollout run mysql-exporter --steps 90%,50%,0`,
	}
	cmd.AddCommand(NewCmdPromote(o), NewCmdPause(o), NewCmdResume(o), NewCmdUndo(o), NewCmdRun(o), NewCmdHistory(o))
	return cmd
}

// NewCmdPromote returns `rollout promote NAME --partition P`.
func NewCmdPromote(o *Options) *cobra.Command {
	var partition string
	cmd := &cobra.Command{
		Use:   "promote NAME --partition P",
		Short: "Set updateStrategy.partition: how many matched pods stay on their revision",
		Long: `Set updateStrategy.partition, the number (or percentage, rounded up) of matched
pods that stay on their current revision; the others move to the latest one.
Lowering it promotes more pods; raising it stops further pods from moving but
never moves updated pods back (use rollout undo for that).`,
		Example: `  # Update all but 10 pods
  kubectl sidecarset rollout promote mysql-exporter --partition 10

  # Update half of them (50% of the matched pods stay, rounded up)
  kubectl sidecarset rollout promote mysql-exporter --partition 50%

  # Update every pod
  kubectl sidecarset rollout promote mysql-exporter --partition 0`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("partition") {
				return usageErrorf("--partition is required: how many matched pods (N or N%%) stay on their revision")
			}
			p, err := parsePartition("--partition", partition)
			if err != nil {
				return err
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			return Promote(cmd.Context(), c, o.Out, args[0], p)
		},
	}
	cmd.Flags().StringVar(&partition, "partition", "", "Pods that stay on their revision: a count (10) or a percentage of the matched pods (50%)")
	return exits(cmd, map[int]string{
		0: "the partition is set",
		1: "no such SidecarSet, a refused patch, or another error",
		5: "",
	})
}

// NewCmdPause returns `rollout pause NAME`.
func NewCmdPause(o *Options) *cobra.Command {
	return exits(&cobra.Command{
		Use:   "pause NAME",
		Short: "Stop updating running pods (updateStrategy.paused: true)",
		Long: `Set updateStrategy.paused: no further running pod is updated. Updates already
written finish, new pods are still injected, and status is still kept.`,
		Example: `  kubectl sidecarset rollout pause mysql-exporter`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.Client()
			if err != nil {
				return err
			}
			return SetPaused(cmd.Context(), c, o.Out, args[0], true)
		},
	}, map[int]string{
		0: "the rollout is paused (or already was)",
		1: "no such SidecarSet, a refused patch, or another error",
		5: "",
	})
}

// NewCmdResume returns `rollout resume NAME`.
func NewCmdResume(o *Options) *cobra.Command {
	return exits(&cobra.Command{
		Use:   "resume NAME",
		Short: "Resume updating running pods (updateStrategy.paused: false)",
		Long: `Clear updateStrategy.paused. A rollout the controller paused because it
stalled starts again with a fresh progress deadline.`,
		Example: `  kubectl sidecarset rollout resume mysql-exporter`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.Client()
			if err != nil {
				return err
			}
			return SetPaused(cmd.Context(), c, o.Out, args[0], false)
		},
	}, map[int]string{
		0: "the rollout is resumed (or already was)",
		1: "no such SidecarSet, a refused patch, or another error",
		5: "",
	})
}

// Promote sets the SidecarSet's updateStrategy.partition.
func Promote(ctx context.Context, c client.Client, out io.Writer, name string, partition intstr.IntOrString) error {
	set, err := getSet(ctx, c, name)
	if err != nil {
		return err
	}
	before := intOrPercent(set.Spec.UpdateStrategy.Partition, "0")
	if err := patchStrategy(ctx, c, set, map[string]any{"partition": partition}); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: partition %s -> %s\n", name, before, partition.String())
	if set.Spec.UpdateStrategy.Paused {
		fmt.Fprintf(out, "note: the rollout is paused; nothing moves until `kubectl sidecarset rollout resume %s`\n", name)
	}
	return nil
}

// SetPaused sets the SidecarSet's updateStrategy.paused.
func SetPaused(ctx context.Context, c client.Client, out io.Writer, name string, paused bool) error {
	set, err := getSet(ctx, c, name)
	if err != nil {
		return err
	}
	word := "resumed"
	if paused {
		word = "paused"
	}
	if set.Spec.UpdateStrategy.Paused == paused {
		_, err := fmt.Fprintf(out, "%s: rollout already %s\n", name, word)
		return err
	}
	if err := patchStrategy(ctx, c, set, map[string]any{"paused": paused}); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s: rollout %s\n", name, word)
	return err
}

func getSet(ctx context.Context, c client.Reader, name string) (*v1alpha1.SidecarSet, error) {
	set := &v1alpha1.SidecarSet{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, set); err != nil {
		return nil, fmt.Errorf("get SidecarSet %s: %w", name, err)
	}
	return set, nil
}

// patchStrategy merge-patches fields of set's spec.updateStrategy, and
// leaves set as the apiserver returned it. Only the given fields are sent:
// someone else's concurrent edit of other fields is kept.
func patchStrategy(ctx context.Context, c client.Client, set *v1alpha1.SidecarSet, fields map[string]any) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"updateStrategy": fields}})
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	if err := c.Patch(ctx, set, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("patch spec.updateStrategy of SidecarSet %s with %s: %w", set.Name, patch, err)
	}
	return nil
}

// parsePartition reads a partition flag: a non-negative count, or a
// percentage from 0% to 100%.
func parsePartition(flag, s string) (intstr.IntOrString, error) {
	s = strings.TrimSpace(s)
	if pct, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(pct)
		if err != nil || n < 0 || n > 100 {
			return intstr.IntOrString{}, usageErrorf("%s %q: a percentage must be a whole number from 0%% to 100%%", flag, s)
		}
		return intstr.FromString(s), nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return intstr.IntOrString{}, usageErrorf("%s %q: must be a non-negative number of pods (10) or a percentage of the matched pods (50%%)", flag, s)
	}
	return intstr.FromInt32(int32(n)), nil
}

// intOrPercent spells an optional int-or-percent field, def when unset.
func intOrPercent(v *intstr.IntOrString, def string) string {
	if v == nil {
		return def
	}
	return v.String()
}
