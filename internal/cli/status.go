package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/status"
)

// NewCmdStatus returns `status [NAME] [-w]`.
func NewCmdStatus(o *Options) *cobra.Command {
	var output string
	var watch bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show SidecarSets' pod counts and conditions; -w follows a rollout",
		Long: `Show each SidecarSet's latest revision and pod counts, as the controller last
wrote them in its status, and its Progressing, Complete and Stalled conditions.

MATCHED pods carry the SidecarSet's injection record; UPDATED run the latest
revision's spec; READY are Ready with every sidecar running what was written;
UPDATED-READY are both; NOT-UPGRADABLE need a recreate (something other than an
image changed); DRIFTED had a sidecar image changed by hand; UNMANAGED match
the selectors but carry no record (created before the SidecarSet, or while the
webhook was down: see restart-unmanaged); SKIPPED match, but the webhook could
not inject the SidecarSet into them (pods NAME lists them with why).
PAUSED is updateStrategy.paused.
INJECTION is what injects new pods: Policy (a MutatingAdmissionPolicy the
apiserver runs, with the manager's --injection=policy or auto), Webhook, or None
(injectionStrategy.paused); the row Injection below the table says why.

With -w, follow one SidecarSet's rollout until it is Complete (exit 0: every
selected pod on the latest revision and ready past minReadySeconds), Stalled
(exit 1), held (exit 3: paused by updateStrategy.paused, of type NotUpdate, the
partition keeps the rest, or only pods the rollout does not wait for are left:
pods never ready, pods that need a recreate, pods on nodes that are not Ready;
nothing moves until someone acts), or --timeout passes (exit 4): a progress bar
of updated-and-ready pods against the target (matched minus partition) on a
terminal, one line per change otherwise. A read that fails transiently (the
apiserver busy or restarting) is retried with back-off, until --timeout when
it is set.`,
		Example: `  # All SidecarSets
  kubectl sidecarset status

  # One, with partition, maxUnavailable and age
  kubectl sidecarset status mysql-exporter -o wide

  # Follow a rollout until it completes or stalls (exit 1 when stalled)
  kubectl sidecarset status mysql-exporter -w

  # In CI: give up after 10 minutes (exit 4)
  kubectl sidecarset status mysql-exporter -w --timeout 10m`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateOutput(output); err != nil {
				return err
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			if watch {
				if name == "" {
					return usageErrorf("-w follows one rollout: give the SidecarSet's NAME")
				}
				if output != OutputTable {
					return usageErrorf("-w draws progress, not objects: leave out --output")
				}
				if timeout < 0 {
					return usageErrorf("--timeout %s: must not be negative", timeout)
				}
				c, err := o.RetryingClient()
				if err != nil {
					return err
				}
				return WatchStatus(cmd.Context(), c, o.Out, WatchOptions{
					Name:     name,
					Terminal: o.IsTerminal(o.Out),
					Interval: o.PollInterval,
					Timeout:  timeout,
				})
			}
			if cmd.Flags().Changed("timeout") {
				return usageErrorf("--timeout bounds -w only")
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			return Status(cmd.Context(), c, o.Out, StatusOptions{Name: name, Output: output})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: wide, or as kubectl get: json, yaml, name, jsonpath=..., go-template=... (default: a table)")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "Follow the rollout of NAME until it is Complete, Stalled or paused")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "With -w: how long to follow before giving up (exit 4); 0 means no limit")
	return exits(cmd, map[int]string{
		0: "the SidecarSets are shown; with -w, the rollout is complete",
		1: "no such SidecarSet, or another error; with -w, the rollout stalled",
		3: "with -w: the rollout is held: paused, of type NotUpdate, or the partition or pods it does not wait for keep the rest",
		4: "with -w --timeout: the rollout was not complete in time",
		5: "",
	})
}

// StatusOptions says what Status prints.
type StatusOptions struct {
	// Name is one SidecarSet; empty means all.
	Name string
	// Output is "", "wide", "json" or "yaml".
	Output string
	// Now is the time ages are measured from; zero means the clock's.
	Now time.Time
}

// Status prints SidecarSets' counts and conditions.
func Status(ctx context.Context, c client.Reader, out io.Writer, opts StatusOptions) error {
	var sets []v1alpha1.SidecarSet
	var obj runtime.Object
	if opts.Name != "" {
		set := &v1alpha1.SidecarSet{}
		if err := c.Get(ctx, client.ObjectKey{Name: opts.Name}, set); err != nil {
			return fmt.Errorf("get SidecarSet %s: %w", opts.Name, err)
		}
		sets, obj = []v1alpha1.SidecarSet{*set}, set
	} else {
		list := &v1alpha1.SidecarSetList{}
		if err := c.List(ctx, list); err != nil {
			return fmt.Errorf("list SidecarSets: %w", err)
		}
		sets, obj = list.Items, list
	}
	if !isTable(opts.Output) {
		return printObject(out, obj, opts.Output)
	}
	if len(sets) == 0 {
		_, err := fmt.Fprintln(out, "No SidecarSets found.")
		return err
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	wide := opts.Output == OutputWide
	if err := printTable(out, statusTable(sets, now), wide); err != nil {
		return err
	}
	conds := conditionsTable(sets, now)
	if len(conds.Rows) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(out); err != nil {
		return err
	}
	return printTable(out, conds, wide)
}

// statusTable has one row per SidecarSet.
func statusTable(sets []v1alpha1.SidecarSet, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("NAME", "The SidecarSet's name.", false),
		column("REVISION", "status.latestRevision: the ControllerRevision of the current spec.", false),
		column("MATCHED", "Pods that match and carry the injection record.", false),
		column("UPDATED", "Pods whose spec carries the latest revision.", false),
		column("READY", "Pods Ready with every sidecar running what was written.", false),
		column("UPDATED-READY", "Pods both updated and ready.", false),
		column("NOT-UPGRADABLE", "Pods that need a recreate.", false),
		column("DRIFTED", "Pods with a sidecar image changed by hand.", false),
		column("UNMANAGED", "Pods that match but carry no injection record.", false),
		column("SKIPPED", "Pods that match, into which the webhook could not inject the SidecarSet (pods NAME lists them with why).", false),
		column("PAUSED", "updateStrategy.paused.", false),
		column("INJECTION", "status.injection.path: Policy (a MutatingAdmissionPolicy in the apiserver), Webhook or None (paused); why is in the table below.", false),
		column("PARTITION", "updateStrategy.partition.", true),
		column("MAX-UNAVAILABLE", "updateStrategy.maxUnavailable.", true),
		column("INJECTION-PAUSED", "injectionStrategy.paused: new pods get no sidecars.", true),
		column("OBSERVED", "status.observedGeneration/metadata.generation; behind means the status is not yet about the latest spec.", true),
		column("AGE", "Since the SidecarSet was created.", true),
	}}
	for i := range sets {
		s := &sets[i]
		st, us := s.Status, s.Spec.UpdateStrategy
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			s.Name, orNone(st.LatestRevision),
			st.MatchedPods, st.UpdatedPods, st.ReadyPods, st.UpdatedReadyPods,
			st.NotUpgradablePods, st.DriftedPods, st.UnmanagedPods, st.SkippedPods,
			strconv.FormatBool(us.Paused), injectionPath(st.Injection),
			intOrPercent(us.Partition, "0"), intOrPercent(us.MaxUnavailable, "1"),
			strconv.FormatBool(s.Spec.InjectionStrategy.Paused),
			fmt.Sprintf("%d/%d", st.ObservedGeneration, s.Generation),
			age(s.CreationTimestamp, now),
		}})
	}
	return t
}

// conditionsTable has one row per condition of each SidecarSet.
func conditionsTable(sets []v1alpha1.SidecarSet, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("SIDECARSET", "The SidecarSet the condition is about.", false),
		column("CONDITION", "Progressing, Complete or Stalled; Injection for status.injection.", false),
		column("STATUS", "True or False; for Injection, the path.", false),
		column("REASON", "Why, in one word.", false),
		column("AGE", "Since the condition's status last changed.", false),
		column("MESSAGE", "Why, for a human.", false),
	}}
	for i := range sets {
		for _, c := range sets[i].Status.Conditions {
			if c.Type == v1alpha1.ConditionReconciling {
				// Progressing again, for kstatus.
				continue
			}
			t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
				sets[i].Name, c.Type, string(c.Status), c.Reason, age(c.LastTransitionTime, now), c.Message,
			}})
		}
		// Which path injects, and why, reads like a condition whose status
		// is the path.
		if in := sets[i].Status.Injection; in != nil {
			t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
				sets[i].Name, "Injection", string(in.Path), in.Reason, age(in.LastTransitionTime, now), in.Message,
			}})
		}
	}
	return t
}

// injectionPath is the path status.injection names, or <none> before the
// controller wrote it.
func injectionPath(in *v1alpha1.InjectionStatus) string {
	if in == nil {
		return orNone("")
	}
	return string(in.Path)
}

// WatchOptions says how WatchStatus follows a rollout.
type WatchOptions struct {
	Name string
	// Terminal draws a progress bar; otherwise one line per change.
	Terminal bool
	// Interval is how often the SidecarSet is read.
	Interval time.Duration
	// Timeout, when positive, bounds the watch.
	Timeout time.Duration
}

// ErrStalled is wrapped by WatchStatus's error when the rollout stalled.
var ErrStalled = errors.New("rollout stalled")

// WatchStatus follows one SidecarSet's rollout until its status, about the
// current spec, says Complete (nil), Stalled (an error wrapping ErrStalled),
// or that nothing will move: paused or NotUpdate (ErrPaused); or until
// opts.Timeout passes (ErrTimeout).
func WatchStatus(ctx context.Context, c client.Reader, out io.Writer, opts WatchOptions) error {
	var deadline time.Time
	// The first read is retried as any verb's (a cluster down from the
	// start is unreachable, exit 5); later ones, until the deadline.
	first, rest := ctx, ctx
	if opts.Timeout > 0 {
		deadline = time.Now().Add(opts.Timeout)
		var cancel context.CancelFunc
		rest, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	var r progressRenderer
	// seen: the set was read once; read is the context the next read runs in.
	read, seen := first, false
	if opts.Terminal {
		r = newBarRenderer(ctx, out, opts.Name)
	} else {
		r = &lineRenderer{out: out}
	}
	waiting := false
	for {
		set := &v1alpha1.SidecarSet{}
		if err := c.Get(read, client.ObjectKey{Name: opts.Name}, set); err != nil {
			r.stop()
			switch {
			case apierrors.IsNotFound(err) && !seen:
				return fmt.Errorf("SidecarSet %s not found", opts.Name)
			case apierrors.IsNotFound(err):
				return fmt.Errorf("SidecarSet %s was deleted while being watched", opts.Name)
			case !deadline.IsZero() && (errors.Is(err, context.DeadlineExceeded) || atDeadline(err, deadline)):
				return fmt.Errorf("%s: %w: not complete within --timeout %s: %w", opts.Name, ErrTimeout, opts.Timeout, err)
			}
			return fmt.Errorf("get SidecarSet %s: %w", opts.Name, err)
		}
		read, seen = rest, true
		// A status about an older spec would show the previous rollout's
		// counts as this one's.
		if set.Status.ObservedGeneration >= set.Generation {
			r.show(snapshotOf(set))
		} else if !waiting {
			r.say(fmt.Sprintf("%s: waiting for the controller to report on generation %d", opts.Name, set.Generation))
			waiting = true
		}
		switch v := verdictOf(set); {
		case v.complete:
			r.stop()
			_, err := fmt.Fprintf(out, "%s: rollout complete: %s\n", opts.Name, v.message)
			return err
		case v.stalled:
			r.stop()
			return fmt.Errorf("%s: %w (%s): %s", opts.Name, ErrStalled, v.reason, v.message)
		case v.halted:
			r.stop()
			return fmt.Errorf("%s: rollout %w: %s; nothing moves until %s", opts.Name, ErrPaused, v.message, v.remedy)
		case v.held:
			r.stop()
			return fmt.Errorf("%s: rollout held (%w): %s; %s", opts.Name, ErrPaused, v.message, v.remedy)
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			r.stop()
			return fmt.Errorf("%s: %w: not complete within --timeout %s", opts.Name, ErrTimeout, opts.Timeout)
		}
		select {
		case <-rest.Done():
			r.stop()
			if !deadline.IsZero() && ctx.Err() == nil {
				return fmt.Errorf("%s: %w: not complete within --timeout %s", opts.Name, ErrTimeout, opts.Timeout)
			}
			return fmt.Errorf("stopped following %s: %w", opts.Name, ctx.Err())
		case <-time.After(opts.Interval):
		}
	}
}

// verdict is what the status says about the rollout as a whole.
type verdict struct {
	complete, stalled bool
	// halted: nothing moves until someone acts (remedy).
	halted bool
	// held: the rollout did all it may; the partition, or pods it does not
	// wait for (not ready, or needing a recreate), keep it short of
	// complete until someone acts (remedy).
	held                    bool
	reason, message, remedy string
}

// verdictOf reads Stalled, Complete and what halts a rollout, but only
// from a status that observed the current spec: right after an edit, the
// last status is about the previous spec and may say Complete for a
// rollout that has not begun.
//
// Worked cases (status about the current spec):
//
//	Stalled True (paused by the controller after it)   → stalled
//	Complete True RolloutComplete                      → complete
//	Complete True PartitionReached                     → held: the partition keeps the rest
//	Complete False PodsNotReady, PodsNeedRecreate or
//	  PodsOnLostNodes                                  → held: only pods the rollout does not wait for are left
//	Complete True, but type NotUpdate                  → halted: no running pod moves, "complete" says nothing
//	paused, not complete                               → halted
//	RollingUpdate, not paused, not complete            → keep watching
func verdictOf(set *v1alpha1.SidecarSet) verdict {
	if set.Status.ObservedGeneration < set.Generation {
		return verdict{}
	}
	us := set.Spec.UpdateStrategy
	if c := meta.FindStatusCondition(set.Status.Conditions, v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		return verdict{stalled: true, reason: c.Reason, message: c.Message}
	}
	complete := meta.FindStatusCondition(set.Status.Conditions, v1alpha1.ConditionComplete)
	message := ""
	if complete != nil {
		message = complete.Message
	}
	switch {
	case us.Type == v1alpha1.NotUpdateStrategy:
		return verdict{halted: true, reason: "NotUpdate", message: "spec.updateStrategy.type is NotUpdate (" + message + ")",
			remedy: "the type is RollingUpdate"}
	case complete != nil && complete.Status == metav1.ConditionTrue && complete.Reason == status.ReasonPartitionReached:
		return verdict{held: true, reason: complete.Reason, message: complete.Message,
			remedy: "lower the partition to move the rest (`kubectl sidecarset rollout promote " + set.Name + " --partition 0`)"}
	case complete != nil && complete.Status == metav1.ConditionTrue:
		return verdict{complete: true, reason: complete.Reason, message: complete.Message}
	case complete != nil && complete.Reason == status.ReasonPodsNotReady:
		return verdict{held: true, reason: complete.Reason, message: complete.Message,
			remedy: "the rollout does not wait for pods that were not ready before their update: see `kubectl sidecarset pods " + set.Name + "`"}
	case complete != nil && complete.Reason == status.ReasonPodsNeedRecreate:
		return verdict{held: true, reason: complete.Reason, message: complete.Message,
			remedy: "recreate them: `kubectl sidecarset restart " + set.Name + " --not-upgradable`"}
	case complete != nil && complete.Reason == status.ReasonPodsOnLostNodes:
		return verdict{held: true, reason: complete.Reason, message: complete.Message,
			remedy: "their pods are updated once their nodes are Ready again"}
	case us.Paused:
		return verdict{halted: true, reason: "Paused", message: "spec.updateStrategy.paused is true (" + message + ")",
			remedy: "`kubectl sidecarset rollout resume " + set.Name + "`"}
	}
	return verdict{}
}

// atDeadline reports whether err is the client's own refusal to start a
// call the deadline, under a second away, would cut short: client-go's rate
// limiter returns such an error, which wraps no context error, rather than
// wait past the deadline. An answer of the apiserver never is one.
func atDeadline(err error, deadline time.Time) bool {
	var status apierrors.APIStatus
	return !errors.As(err, &status) && time.Until(deadline) < time.Second
}
