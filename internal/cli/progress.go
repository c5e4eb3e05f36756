package cli

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// snapshot is what a progress display shows of a rollout.
type snapshot struct {
	name string
	// updatedReady of target: target is matched minus the partition when
	// that can be told from the status; otherwise (targetKnown false) it is
	// matched.
	updatedReady, target, matched int32
	targetKnown                   bool
	partition                     int32
	// updated pods, and those of them not ready yet.
	updated, updatedNotReady int32
}

// snapshotOf reads a snapshot from set's spec and status.
func snapshotOf(set *v1alpha1.SidecarSet) snapshot {
	st := set.Status
	s := snapshot{
		name:            set.Name,
		updatedReady:    st.UpdatedReadyPods,
		matched:         st.MatchedPods,
		updated:         st.UpdatedPods,
		updatedNotReady: max(st.UpdatedPods-st.UpdatedReadyPods, 0),
	}
	s.target, s.partition, s.targetKnown = target(set)
	return s
}

// target returns how many matched pods the rollout moves to the latest
// revision, and the partition, as rollout.Next counts them: the partition
// (a count, or a percentage of the pods rounded up) stays behind. With
// updateStrategy.selector the partition counts within the selected pods,
// which the status does not tell, and under NotUpdate no running pod moves;
// then the target is unknown and the matched count stands in for it.
//
// Worked cases: 12 matched, partition 50% → 6; partition 5 → 7;
// partition 33% of 10 → 10 - ceil(3.3) = 6; partition 20 of 12 → 0.
func target(set *v1alpha1.SidecarSet) (target, partition int32, known bool) {
	matched := set.Status.MatchedPods
	us := set.Spec.UpdateStrategy
	if us.Selector != nil || us.Type == v1alpha1.NotUpdateStrategy {
		return matched, 0, false
	}
	p, err := partitionOf(us.Partition, matched)
	if err != nil {
		// Validation refuses such a partition; show the matched pods.
		return matched, 0, false
	}
	return matched - p, p, true
}

// partitionOf scales a partition against n pods, rounding a percentage up
// and clamping to [0, n], as the planner does.
func partitionOf(p *intstr.IntOrString, n int32) (int32, error) {
	if p == nil {
		return 0, nil
	}
	v, err := intstr.GetScaledValueFromIntOrPercent(p, int(n), true)
	if err != nil {
		return 0, err
	}
	return min(max(int32(v), 0), n), nil
}

// counts spells the numbers of s, e.g.
// "3/6 updated and ready (12 matched, partition 6); 4 updated, 1 not ready".
func (s snapshot) counts() string {
	var head string
	switch {
	case !s.targetKnown:
		head = fmt.Sprintf("%d of %d matched updated and ready", s.updatedReady, s.matched)
	case s.partition > 0:
		head = fmt.Sprintf("%d/%d updated and ready (%d matched, partition %d)", s.updatedReady, s.target, s.matched, s.partition)
	default:
		head = fmt.Sprintf("%d/%d updated and ready", s.updatedReady, s.target)
	}
	return fmt.Sprintf("%s; %d updated, %d not ready", head, s.updated, s.updatedNotReady)
}

// progressRenderer shows snapshots as they come.
type progressRenderer interface {
	show(snapshot)
	// say writes a line of its own (above the bar, on a terminal).
	say(line string)
	// stop leaves the last snapshot on screen.
	stop()
}

// lineRenderer writes one line per change, for logs and pipes.
type lineRenderer struct {
	out  io.Writer
	last string
}

func (r *lineRenderer) show(s snapshot) {
	line := s.name + ": " + s.counts()
	if line != r.last {
		fmt.Fprintln(r.out, line)
		r.last = line
	}
}

func (r *lineRenderer) say(line string) { fmt.Fprintln(r.out, line) }

func (r *lineRenderer) stop() {}

// barRenderer redraws one progress bar in place on a terminal.
type barRenderer struct {
	p   *mpb.Progress
	bar *mpb.Bar

	mu   sync.Mutex
	text string
}

// barWidth is the bar's; lineWidth the whole line's where the terminal's
// width cannot be read (mpb reads it from a real one).
const (
	barWidth  = 30
	lineWidth = 140
)

func newBarRenderer(ctx context.Context, out io.Writer, name string) *barRenderer {
	r := &barRenderer{}
	// The caller has decided out is a terminal, and it may be a wrapper mpb
	// cannot see through: ForceTTY redraws in place, and WithAutoRefresh
	// renders at all, which mpb otherwise does only for an *os.File
	// terminal.
	r.p = mpb.NewWithContext(ctx, mpb.WithOutput(out), mpb.ForceTTY(), mpb.WithAutoRefresh(), mpb.WithWidth(lineWidth))
	// Total 0 never completes by itself: the bar ends when the status says
	// Complete or Stalled, not when the counts first meet the target.
	r.bar = r.p.New(0, mpb.BarStyle().Lbound("[").Filler("=").Tip(">").Padding("-").Rbound("]"),
		mpb.BarWidth(barWidth),
		mpb.PrependDecorators(decor.Name(name, decor.WCSyncSpaceR)),
		mpb.AppendDecorators(decor.Any(func(decor.Statistics) string {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.text
		})),
	)
	return r
}

func (r *barRenderer) show(s snapshot) {
	r.mu.Lock()
	r.text = " " + s.counts()
	r.mu.Unlock()
	r.bar.SetTotal(int64(s.target), false)
	r.bar.SetCurrent(int64(s.updatedReady))
}

// say writes through mpb, which owns the terminal while the bar runs:
// writing to it directly would race the bar's redraws.
func (r *barRenderer) say(line string) { fmt.Fprintln(r.p, line) }

func (r *barRenderer) stop() {
	r.bar.Abort(false)
	r.p.Wait()
}
