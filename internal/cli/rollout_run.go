package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/status"
)

// NewCmdRun returns `rollout run NAME --steps ...`.
func NewCmdRun(o *Options) *cobra.Command {
	var steps string
	opts := RunOptions{WaitReady: 5 * time.Minute, NotReadyTimeout: time.Minute}
	cmd := &cobra.Command{
		Use:   "run NAME --steps 90%,50%,0",
		Short: "Walk the partition down step by step, stopping at the first anomaly",
		Long: `Lower updateStrategy.partition one step at a time. After each step, wait until
the controller reports the step done (condition Complete for the new spec:
every pod the partition lets go is updated and ready), then take the next.

Stop, leaving the partition where it is, at the first anomaly:

  - pods updated but not ready: their number neither shrinks nor do updated
    pods become ready for --not-ready-timeout (exit 1);
  - the controller marks the rollout Stalled (exit 1);
  - someone pauses it, or sets type NotUpdate (exit 3);
  - the step is not done within --wait-ready (exit 4).

A step whose pods that can move have moved is done even if pods the rollout
does not wait for remain (pods that need a recreate, on nodes that are not
Ready, not ready before their update); once every step is done, such pods
make the run exit 3, saying what to do with them.

With --pause D, wait D after each step but the last before taking the next,
watching the rollout as during a step: a sidecar that fails a while after it
got ready shows then, and stops the run the same way. The step must still be
done when the pause ends.

Each step must be lower than the one before (50,90 is refused). A step that
would raise the partition is skipped, so after fixing what stopped a run, the
same command picks up where it stopped. A read or write
that fails transiently (the apiserver busy or restarting, the manager's
webhook briefly away) is retried with back-off.`,
		Example: `  # Canary 10%, then half, then everything
  kubectl sidecarset rollout run mysql-exporter --steps 90%,50%,0

  # Counts work too; give each step up to 10 minutes
  kubectl sidecarset rollout run mysql-exporter --steps 20,10,0 --wait-ready 10m

  # Let each step soak for 15 minutes before the next
  kubectl sidecarset rollout run mysql-exporter --steps 90%,50%,0 --pause 15m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if opts.Steps, err = parseSteps(steps); err != nil {
				return err
			}
			if opts.WaitReady <= 0 {
				return usageErrorf("--wait-ready %s: must be positive", opts.WaitReady)
			}
			if opts.NotReadyTimeout <= 0 {
				return usageErrorf("--not-ready-timeout %s: must be positive", opts.NotReadyTimeout)
			}
			if opts.Pause < 0 {
				return usageErrorf("--pause %s: must not be negative", opts.Pause)
			}
			c, err := o.RetryingClient()
			if err != nil {
				return err
			}
			opts.Name = args[0]
			opts.Interval = o.PollInterval
			return Run(cmd.Context(), c, o.Out, opts)
		},
	}
	cmd.Flags().StringVar(&steps, "steps", "", "Partitions to go through, comma-separated: counts (10) or percentages of the matched pods (50%)")
	cmd.Flags().DurationVar(&opts.WaitReady, "wait-ready", opts.WaitReady, "How long each step may take")
	cmd.Flags().DurationVar(&opts.NotReadyTimeout, "not-ready-timeout", opts.NotReadyTimeout, "How long updated pods may stay not ready with no pod becoming ready")
	cmd.Flags().DurationVar(&opts.Pause, "pause", 0, "How long to watch each step done before taking the next (0: none)")
	return exits(cmd, map[int]string{
		0: "every step is done",
		1: "an anomaly stopped the run (updated pods not ready for --not-ready-timeout, a stall), or another error",
		3: "the rollout is paused or of type NotUpdate, before or during the run; or, its steps done, pods it does not wait for are left (to recreate, on nodes not Ready, not ready before their update)",
		4: "--wait-ready ran out: a step not done, or the controller not yet reporting on the spec",
		5: "",
	})
}

// parseSteps reads --steps. Each step must keep fewer pods than the one
// before wherever that is known without the number of matched pods:
//
//	90%,50%,0   ok
//	20,10,0     ok
//	50,90       refused: step 2 keeps more pods than step 1
//	50%,50%     refused: step 2 would wait for nothing
//	0,0%        refused: 0 and 0% are the same partition
//	90%,5,0     ok: 90% and 5 compare only against the matched pods, so Run
//	            skips a step that would raise the partition
func parseSteps(s string) ([]intstr.IntOrString, error) {
	if strings.TrimSpace(s) == "" {
		return nil, usageErrorf("--steps is required: the partitions to go through, e.g. 90%%,50%%,0")
	}
	var steps []intstr.IntOrString
	for i, part := range strings.Split(s, ",") {
		p, err := parsePartition(fmt.Sprintf("--steps (step %d)", i+1), part)
		if err != nil {
			return nil, err
		}
		if i > 0 && !below(p, steps[i-1]) {
			return nil, usageErrorf("--steps %s: step %d (%s) is not below step %d (%s): the partition is how many pods stay on their revision, so each step must be lower than the one before, e.g. 90%%,50%%,0",
				s, i+1, p.String(), i, steps[i-1].String())
		}
		steps = append(steps, p)
	}
	return steps, nil
}

// below reports whether partition a keeps fewer pods than b, true when
// that depends on the number of matched pods (a count against a
// percentage, neither 0).
func below(a, b intstr.IntOrString) bool {
	an, bn := number(a), number(b)
	switch {
	case bn == 0:
		return false
	case an == 0, a.Type == b.Type:
		return an < bn
	}
	return true
}

// number is a parsed partition's number: 10 for 10, 50 for 50%.
func number(p intstr.IntOrString) int {
	if p.Type == intstr.Int {
		return int(p.IntVal)
	}
	n, _ := strconv.Atoi(strings.TrimSuffix(p.StrVal, "%")) // parsePartition checked it
	return n
}

// RunOptions say how Run walks the partition down.
type RunOptions struct {
	Name  string
	Steps []intstr.IntOrString
	// WaitReady bounds each step.
	WaitReady time.Duration
	// NotReadyTimeout bounds how long updated-but-not-ready pods may go
	// without one of them becoming ready.
	NotReadyTimeout time.Duration
	// Pause is how long each step but the last is watched, done, before
	// the next.
	Pause time.Duration
	// Interval is how often the SidecarSet is read.
	Interval time.Duration
}

// ErrAnomaly is wrapped by Run's error when it stopped at an anomaly.
var ErrAnomaly = errors.New("rollout stopped")

// Run lowers the partition step by step; see NewCmdRun.
func Run(ctx context.Context, c client.Client, out io.Writer, opts RunOptions) error {
	set, err := settled(ctx, c, opts)
	if err != nil {
		return err
	}
	if err := runnable(set); err != nil {
		return err
	}
	for i, step := range opts.Steps {
		label := fmt.Sprintf("step %d/%d (partition %s)", i+1, len(opts.Steps), step.String())
		if set, err = getSet(ctx, c, opts.Name); err != nil {
			return err
		}
		matched := set.Status.MatchedPods
		cur := intOrPercent(set.Spec.UpdateStrategy.Partition, "0")
		curN, err := partitionOf(set.Spec.UpdateStrategy.Partition, matched)
		if err != nil {
			return fmt.Errorf("%s: spec.updateStrategy.partition %s: %w", opts.Name, cur, err)
		}
		stepN, _ := partitionOf(&step, matched) // parseSteps validated it
		if stepN > curN {
			fmt.Fprintf(out, "%s: skipped: keeps %d of %d pods, more than the current partition %s (%d); run only lowers it\n",
				label, stepN, matched, cur, curN)
			continue
		}
		if cur != step.String() {
			if err := patchStrategy(ctx, c, set, map[string]any{"partition": step}); err != nil {
				return fmt.Errorf("%s: %w", label, err)
			}
			fmt.Fprintf(out, "%s: partition %s -> %s\n", label, cur, step.String())
		} else {
			fmt.Fprintf(out, "%s: partition already %s\n", label, cur)
		}
		err = waitStep(ctx, c, out, opts, set.Generation)
		if err == nil && opts.Pause > 0 && i < len(opts.Steps)-1 {
			fmt.Fprintf(out, "%s: done; pausing %s before the next step\n", label, opts.Pause)
			if err = soak(ctx, c, opts, set.Generation); err == nil {
				err = waitStep(ctx, c, out, opts, set.Generation)
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w; the partition stays at %s: see `kubectl sidecarset pods %s`, fix and run again, or `kubectl sidecarset rollout undo %s`",
				label, err, step.String(), opts.Name, opts.Name)
		}
		fmt.Fprintf(out, "%s: done\n", label)
	}
	if set, err = getSet(ctx, c, opts.Name); err != nil {
		return err
	}
	// Done as far as it could go; pods it does not wait for may be left.
	if v := verdictOf(set); v.held && v.reason != status.ReasonPartitionReached {
		return fmt.Errorf("%s: all %d steps done, but the rollout is held (%w): %s; %s", opts.Name, len(opts.Steps), ErrPaused, v.message, v.remedy)
	}
	_, err = fmt.Fprintf(out, "%s: all %d steps done\n", opts.Name, len(opts.Steps))
	return err
}

// settled waits, within WaitReady, for a status about the current spec, so
// the checks before the first step do not read a stale one (say, Stalled
// from before a resume).
func settled(ctx context.Context, c client.Reader, opts RunOptions) (*v1alpha1.SidecarSet, error) {
	deadline := time.Now().Add(opts.WaitReady)
	for {
		set, err := getSet(ctx, c, opts.Name)
		if err != nil {
			return nil, err
		}
		if set.Status.ObservedGeneration >= set.Generation {
			return set, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: %w: the controller has not reported on generation %d within --wait-ready %s (status.observedGeneration %d): is the manager running?",
				opts.Name, ErrTimeout, set.Generation, opts.WaitReady, set.Status.ObservedGeneration)
		}
		if err := sleep(ctx, opts.Interval); err != nil {
			return nil, err
		}
	}
}

// runnable refuses a rollout that would not move whatever the partition.
func runnable(set *v1alpha1.SidecarSet) error {
	us := set.Spec.UpdateStrategy
	switch {
	case us.Type == v1alpha1.NotUpdateStrategy:
		return fmt.Errorf("%s: %w: spec.updateStrategy.type is NotUpdate: running pods never move, whatever the partition", set.Name, ErrPaused)
	case meta.IsStatusConditionTrue(set.Status.Conditions, v1alpha1.ConditionStalled):
		c := meta.FindStatusCondition(set.Status.Conditions, v1alpha1.ConditionStalled)
		return fmt.Errorf("%s: the rollout is %w (%s: %s); fix the cause, then `kubectl sidecarset rollout resume %s`", set.Name, ErrStalled, c.Reason, c.Message, set.Name)
	case us.Paused:
		return fmt.Errorf("%s: %w: spec.updateStrategy.paused is true; `kubectl sidecarset rollout resume %s` first", set.Name, ErrPaused, set.Name)
	}
	return nil
}

// waitStep polls until stepWatch says the step is done or went wrong,
// printing a line whenever the counts change.
func waitStep(ctx context.Context, c client.Reader, out io.Writer, opts RunOptions, gen int64) error {
	w := newStepWatch(gen, opts, time.Now())
	lines := &lineRenderer{out: out}
	for {
		set, err := getSet(ctx, c, opts.Name)
		if err != nil {
			return err
		}
		if set.Status.ObservedGeneration >= gen {
			lines.show(snapshotOf(set))
		}
		done, err := w.observe(set, time.Now())
		if done || err != nil {
			return err
		}
		if err := sleep(ctx, opts.Interval); err != nil {
			return err
		}
	}
}

// soak watches a step done for opts.Pause, stopping at an anomaly as
// waitStep does: a stall, a pause someone else set, or updated pods not
// ready for NotReadyTimeout.
func soak(ctx context.Context, c client.Reader, opts RunOptions, gen int64) error {
	w := newStepWatch(gen, opts, time.Now())
	for end := time.Now().Add(opts.Pause); time.Now().Before(end); {
		set, err := getSet(ctx, c, opts.Name)
		if err != nil {
			return err
		}
		if _, err := w.observe(set, time.Now()); err != nil && !errors.Is(err, ErrTimeout) {
			return err
		}
		if err := sleep(ctx, min(opts.Interval, time.Until(end))); err != nil {
			return err
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// stepWatch judges one step of a run from successive reads of the
// SidecarSet.
type stepWatch struct {
	gen                        int64
	waitReady, notReadyTimeout time.Duration
	start                      time.Time

	// lastProgress is when updatedReady last grew, the updated but not
	// ready pods last shrank, or some first became not ready.
	lastProgress                  time.Time
	updatedReady, updatedNotReady int32
	seen                          bool
}

func newStepWatch(gen int64, opts RunOptions, now time.Time) *stepWatch {
	return &stepWatch{gen: gen, waitReady: opts.WaitReady, notReadyTimeout: opts.NotReadyTimeout, start: now, lastProgress: now}
}

// observe returns whether the step is done, or an error wrapping ErrAnomaly
// that says what went wrong. A status that has not observed generation gen
// yet only counts against WaitReady.
//
// Worked cases, --wait-ready 5m --not-ready-timeout 1m, step started at 0s:
//
//	10s  observedGeneration behind                        → wait
//	20s  Complete=True                                    → done
//	20s  Stalled=True                                     → anomaly: stalled
//	20s  spec.updateStrategy.paused                       → anomaly: paused
//	30s  first read: 1 updated but not ready              → wait; the not-ready clock starts
//	1m29s same counts                                     → wait
//	1m31s same counts since 30s                           → anomaly: not ready for 1m
//	1m20s instead one more pod ready                      → wait; the clock restarts
//	5m   not Complete, counts still moving                → anomaly: step not done within 5m
func (w *stepWatch) observe(set *v1alpha1.SidecarSet, now time.Time) (bool, error) {
	snap := snapshotOf(set)
	if set.Spec.UpdateStrategy.Paused {
		if c := meta.FindStatusCondition(set.Status.Conditions, v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
			return false, fmt.Errorf("%w: Stalled (%s): %s", ErrAnomaly, c.Reason, c.Message)
		}
		return false, fmt.Errorf("%w: %w: spec.updateStrategy.paused was set by someone else: %s", ErrAnomaly, ErrPaused, snap.counts())
	}
	if set.Status.ObservedGeneration >= w.gen {
		switch v := verdictOf(set); {
		case v.stalled:
			return false, fmt.Errorf("%w: Stalled (%s): %s", ErrAnomaly, v.reason, v.message)
		case v.halted:
			return false, fmt.Errorf("%w: %w: %s", ErrAnomaly, ErrPaused, v.message)
		case v.complete, v.held && v.reason != status.ReasonPodsNotReady:
			// Held: the step did all it may; what is left waits for the
			// next step, a recreate, or a node. Pods not ready are the
			// run's own anomaly, judged below by --not-ready-timeout.
			return true, nil
		}
		// The clock starts when not-ready pods first show (or at the first
		// read), and restarts whenever one of them becomes ready.
		if !w.seen || snap.updatedReady > w.updatedReady || snap.updatedNotReady < w.updatedNotReady ||
			(w.updatedNotReady == 0 && snap.updatedNotReady > 0) {
			w.lastProgress = now
		}
		w.seen = true
		w.updatedReady, w.updatedNotReady = snap.updatedReady, snap.updatedNotReady
		if snap.updatedNotReady > 0 && now.Sub(w.lastProgress) >= w.notReadyTimeout {
			return false, fmt.Errorf("%w: %d updated pods not ready, and none became ready, for %s (--not-ready-timeout): %s",
				ErrAnomaly, snap.updatedNotReady, w.notReadyTimeout, snap.counts())
		}
	}
	if now.Sub(w.start) >= w.waitReady {
		return false, fmt.Errorf("%w: %w: not done within %s (--wait-ready): %s", ErrAnomaly, ErrTimeout, w.waitReady, snap.counts())
	}
	return false, nil
}
