package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/imageref"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// Input is what Next decides on.
type Input struct {
	Latest Latest
	// Pods are the set's active pods carrying its record, in any order.
	Pods []Pod
	// Strategy is spec.updateStrategy (unset: partition 0, maxUnavailable 1).
	Strategy v1alpha1.UpdateStrategy
	// DriftPolicy is spec.driftPolicy; only Revert acts.
	DriftPolicy v1alpha1.DriftPolicy
	// Budgets lists, per pod, the PodDisruptionBudgets that select it.
	Budgets map[types.NamespacedName][]Budget
	// Withdrawn names the revisions declared after Latest (revision.Withdrawn).
	Withdrawn map[string]bool
	// ReleasedBefore is status.releasedBefore after this reconcile, and
	// ReleaseMargin the margin it moved by (see bookkeeping).
	ReleasedBefore time.Time
	ReleaseMargin  time.Duration
}

// Budget is a PodDisruptionBudget as the planner needs it.
type Budget struct {
	// Name is the budget's namespace/name, shared by every pod it selects.
	Name string
	// DisruptionsAllowed is the budget's status.disruptionsAllowed.
	DisruptionsAllowed int32
	// Spent counts the budget's pods that any rollout disrupted and that are
	// not back (Disrupted): an in-place write leaves no mark in its status.
	Spent int32
}

// Scope is the partition and maxUnavailable arithmetic over the pods.
type Scope struct {
	// Matched counts the pods given; Selected those the selector selects.
	Matched  int
	Selected int
	// Partition is how many selected pods stay on their revision; Target,
	// Selected minus Partition, how many may be on the latest one.
	Partition int
	Target    int
	// Updated counts selected pods on the latest revision; UpdatedReady, the
	// Available ones.
	Updated      int
	UpdatedReady int
	// MaxUnavailable is how many pods may be disrupted at once; Unavailable,
	// how many are (counted); UnavailableLost, how many of them are on lost
	// nodes.
	MaxUnavailable  int
	Unavailable     int
	UnavailableLost int
}

// Plan is what the controller does next.
type Plan struct {
	Scope Scope
	// Updates are the pods to write now, in the order decided.
	Updates []PodUpdate
	// Held are the pods that wait, with why; none of them is in Updates.
	Held []Held
	// Due counts the pods due (dueOf), written now or waiting.
	Due int
	// ReleaseAt is the soonest Pod.ReleaseAt, zero when none: the caller
	// should look again by then, as nothing else may bring it back.
	ReleaseAt time.Time
}

// Action says why a pod is written.
type Action string

const (
	// ActionUpdate moves a pod to the latest revision.
	ActionUpdate Action = "Update"
	// ActionRevertDrift writes the recorded images back over a hand edit.
	ActionRevertDrift Action = "RevertDrift"
	// ActionSettle writes only the record of a pod back from a write that
	// releasedBefore cannot pass yet, saying it is released: should the pod
	// fail later, that is not taken for the write's disruption (Pod.Again).
	ActionSettle Action = "Settle"
	// ActionResize writes only the resize a pod lacks (Pod.ResizeOwed): its
	// record landed, the resize did not. A pod counted in a slot of its own
	// takes nothing more; any other takes maxUnavailable and budgets as any
	// write.
	ActionResize Action = "Resize"
	// ActionHandoff empties a hot upgrade's old slot (Pod.HandoffOwed).
	ActionHandoff Action = "Handoff"
	// ActionRecordDisruption writes only the record of a pod written while
	// not ready, ready now with the write to come: it counts until back.
	ActionRecordDisruption Action = "RecordDisruption"
)

// RecordOnly reports whether u writes the record alone (bookkeeping).
func (u PodUpdate) RecordOnly() bool {
	return u.Action == ActionSettle || u.Action == ActionRecordDisruption
}

// Stamped returns u with at, when the controller writes it, as its Write's
// time when u writes the spec anew (not a resize alone): the update's
// duration and releasedBefore run from it. u is not modified.
func (u PodUpdate) Stamped(at time.Time) PodUpdate {
	if !u.writesSpec() || u.State.Write == nil || u.Action == ActionResize && !u.WithRecord {
		return u
	}
	w := *u.State.Write
	stamp := metav1.NewMicroTime(at)
	w.At = &stamp
	u.State.Write = &w
	return u
}

// PodUpdate is one pod write: the images of some sidecars and this set's
// entry of the state annotation, in one patch so the record never
// disagrees with the spec; then any Resize, through pods/resize.
type PodUpdate struct {
	Pod    types.NamespacedName
	Action Action
	// Disrupts: the pod was ready and the write restarts a running sidecar.
	Disrupts bool
	// Containers are the sidecars whose image changes.
	Containers []ContainerImage
	// Resize are the sidecars whose cpu or memory changes.
	Resize []ContainerResources
	// WithRecord: an ActionResize writes the record first, counting the pod.
	WithRecord bool
	// State replaces the set's entry of the state annotation.
	State revision.SetState
}

// ContainerImage is a sidecar image to write into a pod spec.
type ContainerImage struct {
	Name string
	// Init: the container is in spec.initContainers.
	Init  bool
	Image string
}

// Next plans the next pod writes of a rollout; it fails only on a strategy
// validation refuses. Each pod due (dueOf) or owing another write is a job
// (jobsOf) whose write (writeFor) is made unless a hold of holdChain keeps
// it; the first that does says why.
//
// Candidates, the selected upgradable pods not on the latest revision, go
// not-ready first (they lose nothing), then in updateOrder; the first
// Target - Updated are due. A write disrupts a pod when it is Ready and the
// write restarts a running sidecar: it is made only while fewer than
// maxUnavailable pods are Disrupting and each of the pod's budgets allows
// a disruption, counting those any rollout spent (Budget.Spent), as an
// in-place write leaves no mark in a budget's status. Pods on a Withdrawn
// revision are due whatever the partition and selector, which would keep
// exactly the pods that moved. With driftPolicy Revert, a drifted pod not
// due gets its recorded images back. Paused or NotUpdate, only the writes a
// write in flight owes go (owedOnly).
//
// Worked cases, pods p01..p12 in one namespace, none updated, all ready
// unless said otherwise:
//
//	partition 50% maxUnavailable 1                        → Target 6: update p01; p02..p06 wait (MaxUnavailable), p07..p12 kept (Partition)
//	same, p01 updating (written, kubelet not done)        → Unavailable 1: nothing; p02..p06 wait
//	same, p01 updated and ready                           → update p02
//	same, p01..p06 updated and ready                      → nothing: Target reached, p07..p12 kept
//	partition 50% maxUnavailable 1, p03 p09 p11 not ready → update p03 p09 p11 (free) and p01; p02 p04 wait; p05..p08 p10 p12 kept
//	partition 0 maxUnavailable 25% (3 of 12)              → update p01 p02 p03
//	partition 0 maxUnavailable 10% (ceil 1.2 = 2)         → update p01 p02
//	partition 5                                           → Target 7
//	partition 33% of 10 pods (ceil 3.3 = 4)               → Target 6
//	partition 100%                                        → nothing; all kept
//	selector zone=a picks 8, partition 50%                → Partition 4 of the 8, Target 4; the other 4 pods are untouched
//	partition 0, 8 updated, raised to 50%                 → Target 6 < Updated 8: nothing (never rolls back)
//	maxUnavailable 1, p01 p02 updated but not ready       → Unavailable 2: no ready pod; a not-ready candidate still goes
//	maxUnavailable 3, budget b over p01..p03 allows 1     → update p01 p04 p05; p02 p03 wait (DisruptionBudget)
//	same, p01 updating, b still allows 1 (status lags)    → nothing for p02 p03 (DisruptionBudget): p01 spent it
//	partition 50%, p12 drifted, Revert, maxUnavailable 1  → revert p12; p01..p06 wait
//	partition 0, p05 not upgradable                       → p05 held (NotUpgradable); Target 12 is out of reach until p05 is recreated
func Next(in Input) (Plan, error) {
	selected, err := selectorOf(in.Strategy)
	if err != nil {
		return Plan{}, err
	}
	pods := slices.Clone(in.Pods)
	slices.SortFunc(pods, func(a, b Pod) int { return compareKeys(a.Key, b.Key) })
	if !hasWork(pods, in.Strategy, selected) {
		for i := range pods {
			pods[i].Again = false
		}
	}
	scope, err := newScope(pods, in.Strategy, selected)
	if err != nil {
		return Plan{}, err
	}
	due, err := dueOf(pods, in, scope, selected)
	if err != nil {
		return Plan{}, err
	}
	plan := Plan{Scope: scope, Due: len(due)}
	jobs := jobsOf(pods, due, in)
	plan.Held = idle(pods, jobs, scope, in.Latest, selected)
	if stop, reason, msg := stopped(in.Strategy); stop {
		var held []Held
		jobs, held = owedOnly(jobs, reason, msg)
		plan.Held = append(plan.Held, held...)
	}
	t := newTally(scope, pods, in.Budgets)
	for _, j := range jobs {
		j.u = writeFor(j.pod, j.action, in.Latest)
		if reason, msg, ok := t.holds(j); ok {
			plan.Held = append(plan.Held, Held{j.pod.Key, reason, msg})
			continue
		}
		t.spend(j)
		plan.Updates = append(plan.Updates, j.u)
	}
	plan.Updates = bookkeeping(pods, plan.Updates, in)
	for _, p := range pods {
		if !p.ReleaseAt.IsZero() && (plan.ReleaseAt.IsZero() || p.ReleaseAt.Before(plan.ReleaseAt)) {
			plan.ReleaseAt = p.ReleaseAt
		}
	}
	sortHeld(plan.Held)
	return plan, nil
}

// selectorOf returns whether updateStrategy.selector selects a pod.
func selectorOf(s v1alpha1.UpdateStrategy) (func(Pod) bool, error) {
	selector := labels.Everything()
	if s.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(s.Selector)
		if err != nil {
			return nil, fmt.Errorf("updateStrategy.selector: %w", err)
		}
		selector = sel
	}
	return func(p Pod) bool { return selector.Matches(labels.Set(p.Labels)) }, nil
}

// dueOf returns the pods due for an update, in update order: those on a
// Withdrawn revision, then the candidates the partition lets move.
func dueOf(pods []Pod, in Input, scope Scope, selected func(Pod) bool) ([]Pod, error) {
	order, err := newUpdateOrder(in.Strategy)
	if err != nil {
		return nil, err
	}
	var candidates, undone []Pod
	for _, p := range pods {
		switch {
		case p.Updated || !p.Upgradable:
		case in.Withdrawn[p.Record.Revision]:
			undone = append(undone, p)
		case selected(p):
			candidates = append(candidates, p)
		}
	}
	place := order.places(pods)
	// Pods on lost nodes last: held, they would take places from others.
	byPlace := func(a, b Pod) int {
		return cmp.Or(compareBool(a.NodeLost, b.NodeLost), compareBool(a.PodReady, b.PodReady), cmp.Compare(place[a.Key], place[b.Key]))
	}
	slices.SortFunc(undone, byPlace)
	slices.SortFunc(candidates, byPlace)
	// What the partition lets move, less the undone pods it counts.
	left := scope.Target - scope.Updated
	for _, p := range undone {
		if selected(p) {
			left--
		}
	}
	moving := min(max(left, 0), len(candidates))
	return append(undone, candidates[:moving]...), nil
}

// job is one write Next weighs: the pod, why, and the write (writeFor).
type job struct {
	pod    Pod
	action Action
	u      PodUpdate
}

// jobsOf returns a job per pod with something to write, in the order they
// are weighed: not-ready first, reverts and owed writes before updates.
func jobsOf(pods, due []Pod, in Input) []job {
	jobs := make([]job, 0, len(due))
	rank := make(map[types.NamespacedName]int, len(due))
	for i, p := range due {
		jobs = append(jobs, job{pod: p, action: ActionUpdate})
		rank[p.Key] = i
	}
	for _, p := range pods {
		_, isDue := rank[p.Key]
		switch {
		case isDue:
		case in.DriftPolicy == v1alpha1.DriftRevert && len(p.Drifted) > 0:
			jobs = append(jobs, job{pod: p, action: ActionRevertDrift})
		case len(p.ResizeOwed) > 0:
			jobs = append(jobs, job{pod: p, action: ActionResize})
		case len(p.HandoffOwed) > 0:
			jobs = append(jobs, job{pod: p, action: ActionHandoff})
		}
	}
	slices.SortStableFunc(jobs, func(a, b job) int {
		return cmp.Or(
			compareBool(a.pod.PodReady, b.pod.PodReady),
			compareBool(a.action == ActionUpdate, b.action == ActionUpdate),
			compareBool(!in.Withdrawn[a.pod.Record.Revision], !in.Withdrawn[b.pod.Record.Revision]),
			cmp.Compare(rank[a.pod.Key], rank[b.pod.Key]),
			compareKeys(a.pod.Key, b.pod.Key))
	})
	return jobs
}

// idle returns why the selected pods not on the latest revision with
// nothing to write stay: they need a recreate, or the partition keeps them.
func idle(pods []Pod, jobs []job, scope Scope, latest Latest, selected func(Pod) bool) []Held {
	busy := make(map[types.NamespacedName]bool, len(jobs))
	for _, j := range jobs {
		busy[j.pod.Key] = true
	}
	var held []Held
	for _, p := range pods {
		switch {
		case busy[p.Key] || !selected(p) || p.Updated:
		case !p.Upgradable:
			msg := p.NotUpgradable
			if msg == "" {
				msg = fmt.Sprintf("something other than an image changed (imageless hash %s, latest %s): the pod needs a recreate",
					p.Record.ImagelessHash, latest.ImagelessHash)
			}
			held = append(held, Held{p.Key, HeldNotUpgradable, msg})
		default:
			held = append(held, Held{p.Key, HeldByPartition, fmt.Sprintf(
				"partition keeps %s of %d on their revision", podCount(scope.Partition), scope.Selected)})
		}
	}
	return held
}

// owedOnly keeps a stopped rollout's handoffs, and the resizes owed within
// a slot (Pod.holdsSlot), due for an update or not, and holds the rest with
// reason: held, they would leave the pod down, its write halfway.
func owedOnly(jobs []job, reason HoldReason, msg string) ([]job, []Held) {
	var kept []job
	var held []Held
	for _, j := range jobs {
		if len(j.pod.ResizeOwed) > 0 && j.pod.holdsSlot() && len(j.pod.HandoffOwed) == 0 {
			j.action = ActionResize
		}
		if j.action == ActionHandoff || j.action == ActionResize && j.pod.holdsSlot() || j.action == ActionUpdate && len(j.pod.HandoffOwed) > 0 {
			kept = append(kept, j)
			continue
		}
		held = append(held, Held{j.pod.Key, reason, msg})
	}
	return kept, held
}

// writeFor returns the write of action into p, with whether it disrupts
// the pod: judged by its Ready condition, as an unproven pod still serves.
func writeFor(p Pod, action Action, latest Latest) PodUpdate {
	var u PodUpdate
	switch action {
	case ActionUpdate:
		u = updateOf(p, latest)
	case ActionResize:
		u = PodUpdate{Pod: p.Key, Action: ActionResize, Resize: p.ResizeOwed, State: p.Record}
	case ActionHandoff:
		u = handoffOf(p, latest)
	default:
		u = revertOf(p)
	}
	// A handoff or owed resize into a pod in a slot of its own takes nothing
	// more; any other write into a Ready pod disrupts it anew.
	continues := p.holdsSlot() && (u.Action == ActionHandoff || u.Action == ActionResize)
	if u.Disrupts = p.PodReady && !continues && u.restartsRunning(p); u.Disrupts && u.Action == ActionResize {
		// The resize cannot write the record, so the record goes first.
		wr := revision.Write{Generation: p.Generation + 1}
		if u.State.Write != nil {
			wr = *u.State.Write
			wr.Generation = max(wr.Generation, p.Generation+1)
		}
		// Counted within maxUnavailable from now on.
		if u.State.Write == nil || wr != *u.State.Write || !wr.WasReady || wr.TurnedReady {
			wr.WasReady, wr.TurnedReady = true, false
			u.State.Write, u.WithRecord = &wr, true
		}
	}
	if u.writesSpec() && u.State.Write != nil {
		wr := *u.State.Write
		wr.MinReadySeconds = latest.MinReadySeconds
		// A write that takes a slot counts in it from now on. A new write
		// into a pod not Ready, counted for an earlier one, took none: the
		// pod may have been back in between and failed on its own, so what
		// the new write owes takes a slot.
		renewed := (u.Action == ActionUpdate || u.Action == ActionRevertDrift) && wr.WasReady && !p.PodReady
		wr.TurnedReady = (wr.TurnedReady || renewed) && !u.Disrupts
		u.State.Write = &wr
	}
	if u.writesSpec() {
		// A new write: the one released before it is no longer the pod's.
		u.State.Released = nil
	}
	return u
}

// bookkeeping appends the record-only writes, whatever holds the pod:
// RecordDisruption, and Settle for a pod back for settleAfter
// margins that in.ReleasedBefore does not pass, or read released but not
// Available: releases that know no releasedBefore would count its failure.
func bookkeeping(pods []Pod, updates []PodUpdate, in Input) []PodUpdate {
	written := make(map[types.NamespacedName]bool, len(updates))
	for _, u := range updates {
		written[u.Pod] = true
	}
	for _, p := range pods {
		switch {
		case written[p.Key]:
		case p.Disrupting && p.Record.Write != nil && !p.Record.Write.WasReady:
			u := PodUpdate{Pod: p.Key, Action: ActionRecordDisruption, State: p.Record}
			// The same write, its generation and time kept.
			w := *p.Record.Write
			w.WasReady, w.TurnedReady = true, true
			u.State.Write = &w
			updates = append(updates, u)
		case p.ReadReleased && !p.Available:
			updates = append(updates, PodUpdate{Pod: p.Key, Action: ActionSettle, State: p.Record})
		case in.ReleaseMargin > 0 && !passed(p.Record.Write, in.ReleasedBefore):
			if ok, ready := releasable(p, settleAfter*in.ReleaseMargin); ok && !ready.After(in.Latest.Now) {
				updates = append(updates, PodUpdate{Pod: p.Key, Action: ActionSettle, State: releasedRecord(p.Record)})
			}
		}
	}
	return updates
}

// settleAfter is how many release margins a pod must have been back for
// before its write, not passed by releasedBefore, is written released.
const settleAfter = 3

// passed reports whether releasedBefore passes w: w was made before it.
func passed(w *revision.Write, before time.Time) bool {
	return w != nil && w.At != nil && w.At.Time.Before(before)
}

// releasable reports whether p's write may be released, and when: the pod
// is Back, owing no write (a release would forget it), with no other set's
// uncounted write in flight, margin after the later of its return and the
// write.
func releasable(p Pod, margin time.Duration) (bool, time.Time) {
	w := p.Record.Write
	if w == nil || !p.Back || p.OthersWriting || len(p.ResizeOwed) > 0 || len(p.HandoffOwed) > 0 {
		return false, time.Time{}
	}
	since := p.BackAt
	if w.At != nil && w.At.After(since) {
		since = w.At.Time
	}
	return true, since.Add(margin)
}

// ReleasedBefore returns the set's status.releasedBefore after a reconcile
// at now, from was: a write made before it reads as released (Classify),
// kept once for all pods as a later failure hides a release. It moves only
// forward, to just after the last write it passes, and passes none made
// within margin (how old the view of pods may be: a write whose patch
// failed without saying it did not land shows within it too). next is
// when a write not passed yet may be, zero when none.
// Worked cases, margin 1m, now 12:10:00, was 12:00:00:
//
//	writes at 12:01 and 12:03, back since 12:02 and 12:04 → 12:03:00.000001
//	writes at 12:01 back since 12:02, 12:03 not back       → 12:01:00.000001
//	write at 12:01 back since 12:09:30                     → 12:00:00, next 12:10:30
//	write at 11:58, not back (read released already)       → 12:00:00
func ReleasedBefore(pods []Pod, was, now time.Time, margin time.Duration) (at, next time.Time) {
	// The cut: no write at or after it is passed.
	cut := now.Add(-margin)
	var ready []time.Time
	for _, p := range pods {
		w := p.Record.Write
		if w == nil || w.At == nil {
			continue
		}
		switch ok, when := releasable(p, margin); {
		case ok && !when.After(now):
			ready = append(ready, w.At.Time)
			continue
		case ok && (next.IsZero() || when.Before(next)):
			next = when
		}
		if w.At.Time.Before(cut) {
			cut = w.At.Time
		}
	}
	at = was
	for _, t := range ready {
		if t.Before(cut) && !t.Before(at) {
			at = t.Add(time.Microsecond)
		}
	}
	return at, next
}

// Awaited reports whether the rollout waits for p: disrupted and not back,
// or a write not complete while it runs (not Pending).
func (p Pod) Awaited() bool {
	return !p.NodeLost && (p.Disrupting || (p.Updating && !p.Pending))
}

// backOf returns p's record saying its last write is back: released when
// Back.
func backOf(p Pod) (revision.SetState, bool) {
	if p.Back {
		return releasedRecord(p.Record), true
	}
	return revision.SetState{}, false
}

// runningInFlight returns a sidecar of p whose write is in flight while it
// runs, but for a resize the kubelet holds or one still owed.
func (p Pod) runningInFlight() (string, bool) {
	for _, c := range p.Containers {
		if c.InFlight && c.Running && !c.ResizeHeld && !c.ResizeOwed {
			return c.Name, true
		}
	}
	return "", false
}

// restartsRunning reports whether u changes the image or resources of a
// container of p that keeps running: a resize gone wrong (a memory limit
// below use) takes the sidecar down too, so it is paced as a restart.
func (u PodUpdate) restartsRunning(p Pod) bool {
	for _, ci := range u.Containers {
		if c, ok := p.container(ci.Name); ok && c.Runs {
			return true
		}
	}
	for _, r := range u.Resize {
		if c, ok := p.container(r.Name); ok && c.Runs {
			return true
		}
	}
	return false
}

// failingSidecar reports whether a sidecar of p runs but does not serve now
// (not running, or not ready), and the kubelet acts on its change at once
// (not NotStarted): the pod is down for this set's own sidecar.
func (p Pod) failingSidecar() bool {
	return slices.ContainsFunc(p.Containers, func(c Container) bool {
		return c.Runs && (!c.Running || !c.Ready) && !c.NotStarted
	})
}

// WritesRecord reports whether u writes the record: all but a bare resize.
func (u PodUpdate) WritesRecord() bool {
	return u.Action != ActionResize || u.WithRecord
}

// writesSpec reports whether u changes the pod spec: images or resources.
func (u PodUpdate) writesSpec() bool {
	return len(u.Containers) > 0 || len(u.Resize) > 0
}

// hasWork reports whether the rollout has pods to move, now or later: only
// then does a pod that failed Again count.
func hasWork(pods []Pod, s v1alpha1.UpdateStrategy, selected func(Pod) bool) bool {
	return s.Type != v1alpha1.NotUpdateStrategy &&
		slices.ContainsFunc(pods, func(p Pod) bool { return !p.Updated && p.Upgradable && selected(p) })
}

// slotless reports whether p counts against maxUnavailable in no slot the
// rollout took: it turned ready with a write to come (Write.TurnedReady).
func (p Pod) slotless() bool {
	return p.Disrupting && p.Record.Write != nil && p.Record.Write.TurnedReady
}

// holdsSlot reports whether a slot the rollout took for p's write still
// has p down: the writes that write owes go within it. A pod counted since
// it turned ready (Write.TurnedReady) took none.
func (p Pod) holdsSlot() bool {
	return p.Disrupting && p.Record.Write != nil && !p.Record.Write.TurnedReady
}

// counted reports whether p counts against maxUnavailable: the rollout has
// it down, on a lost node too (its kubelet may run on, and the write have
// broken it), or it failed Again, unless another set has it down or its
// node is lost.
func (p Pod) counted() bool {
	return p.Disrupting || p.Again && !p.NodeLost && len(p.DisruptedBy) == 0
}

// newScope does the arithmetic Next and status.Compute share.
func newScope(pods []Pod, s v1alpha1.UpdateStrategy, selected func(Pod) bool) (Scope, error) {
	sc := Scope{Matched: len(pods)}
	for _, p := range pods {
		// Every pod, selected or not.
		if p.counted() {
			sc.Unavailable++
			if p.NodeLost {
				sc.UnavailableLost++
			}
		}
		if !selected(p) {
			continue
		}
		sc.Selected++
		if p.Updated {
			sc.Updated++
			if p.Available {
				sc.UpdatedReady++
			}
		}
	}
	if s.Partition != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(s.Partition, sc.Selected, true)
		if err != nil {
			return Scope{}, fmt.Errorf("updateStrategy.partition: %w", err)
		}
		sc.Partition = min(max(n, 0), sc.Selected)
	}
	sc.Target = sc.Selected - sc.Partition
	sc.MaxUnavailable = 1
	if s.MaxUnavailable != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(s.MaxUnavailable, sc.Matched, true)
		if err != nil {
			return Scope{}, fmt.Errorf("updateStrategy.maxUnavailable: %w", err)
		}
		// Never 0: a rollout that may disrupt no pod would never move.
		sc.MaxUnavailable = max(n, 1)
	}
	return sc, nil
}

// updateOf writes the latest images into p's running sidecars and records
// the latest revision. An ordinary init container, which the kubelet never
// runs again, keeps the image it ran (Pod.StaleInit).
func updateOf(p Pod, latest Latest) PodUpdate {
	if len(p.HandoffOwed) > 0 {
		// The handoff first (hot.go); the pod is due again after it.
		return handoffOf(p, latest)
	}
	u := PodUpdate{Pod: p.Key, Action: ActionUpdate, State: revision.SetState{
		Revision:      latest.Name,
		Hash:          latest.Hash,
		ImagelessHash: latest.ImagelessHash,
		Write:         p.Record.Write,
	}}
	steps := hotSteps(p, latest)
	for _, rc := range p.Record.Containers {
		c, inSpec := p.container(rc.Name)
		if w, ok := steps[rc.Name]; ok {
			if c.Image != w.image {
				rc = written1(c, rc)
				u.Containers = append(u.Containers, ContainerImage{Name: c.Name, Init: c.Init, Image: w.image})
			}
			u.State.Containers = append(u.State.Containers, withHot(rc, w))
			continue
		}
		image, declared := latest.Containers[rc.Name]
		switch {
		case !inSpec || !c.Runs:
		case declared && !imageref.Same(image, c.Image):
			// (Not an image of the same meaning that admission made of
			// it: a digest pin. Written again, it would be stored as is.)
			rc = written1(c, rc)
			rc.Image = image
			u.Containers = append(u.Containers, ContainerImage{Name: c.Name, Init: c.Init, Image: image})
		case declared:
			rc.Image = image
			fallthrough
		default:
			if c.Complete {
				rc = settled(rc)
			}
		}
		u.State.Containers = append(u.State.Containers, rc)
	}
	u.Resize = p.Resize
	for i, rc := range u.State.Containers {
		c, _ := p.container(rc.Name)
		rs := &u.State.Containers[i]
		if j := slices.IndexFunc(u.Resize, func(r ContainerResources) bool { return r.Name == rc.Name }); j >= 0 {
			rs.Resized, rs.Resources = true, cpuMemoryOf(u.Resize[j].Resources)
		} else if c.Unresized {
			// Unapplied resources: the write waits for them.
			rs.Resized, rs.Resources = true, c.Resources
		} else if rs.Resized && !declaresResize(latest, rc.Name, rs.Resources) {
			// An older revision's resize that did not land and that latest
			// does not declare: owed, it would resize to what none declares.
			rs.Resized, rs.Resources = false, nil
		}
	}
	u.State.Write = writeOf(p, u)
	return u
}

// releasedRecord returns rec with its write moved to Released and every
// container settled, so that a later failure is not judged a write in flight.
func releasedRecord(rec revision.SetState) revision.SetState {
	containers := make([]revision.ContainerState, len(rec.Containers))
	for i, rc := range rec.Containers {
		containers[i] = settled(rc)
	}
	rec.Containers = containers
	if rec.Write != nil {
		w := *rec.Write
		w.TurnedReady = false
		rec.Write, rec.Released = nil, &w
	}
	return rec
}

// revertOf writes the recorded images back into p's drifted containers.
func revertOf(p Pod) PodUpdate {
	u := PodUpdate{Pod: p.Key, Action: ActionRevertDrift, State: p.Record}
	u.State.Containers = nil
	for _, rc := range p.Record.Containers {
		if slices.Contains(p.Drifted, rc.Name) {
			c, _ := p.container(rc.Name)
			u.Containers = append(u.Containers, ContainerImage{Name: c.Name, Init: c.Init, Image: rc.Image})
			if c.Runs {
				rc = written1(c, rc)
			}
		}
		u.State.Containers = append(u.State.Containers, rc)
	}
	u.State.Write = writeOf(p, u)
	return u
}

// maxBetween is how many images a record's Between keeps.
const maxBetween = 4

// written1 records the container that runs before a write into c; over a
// write in flight, the one before that write, which the kubelet may not
// have acted on (A→B→A), that write's image going into Between.
func written1(c Container, rc revision.ContainerState) revision.ContainerState {
	if c.InFlight && !c.imageComplete() {
		if rc.PreviousContainerID == "" && rc.PreviousImage == "" && !rc.NoneRan {
			// Written before containerIDs were kept: the one not
			// running now is the one to see replaced.
			rc.PreviousContainerID = c.ContainerID
		}
		if !slices.Contains(rc.Between, c.Image) {
			rc.Between = append(rc.Between, c.Image)
			rc.Between = rc.Between[max(0, len(rc.Between)-maxBetween):]
		}
		return rc
	}
	rc.PreviousContainerID = c.ContainerID
	rc.PreviousImageID = c.ImageID
	rc.PreviousImage = ""
	rc.NoneRan = c.ContainerID == ""
	rc.Between = nil
	// Started from the image written now, or from the recorded one under an
	// edit the status does not tell apart: if the kubelet keeps it, it is ours.
	if c.imageComplete() && c.Image == rc.Image || c.Running && c.Image != rc.Image && c.shows(rc.Image) {
		rc.PreviousImage = rc.Image
	}
	return rc
}

// imageComplete reports whether the kubelet runs the image last written
// into c: Complete, or would be but for a resize owed or held.
func (c Container) imageComplete() bool {
	return c.Complete || c.ResizeOwed || c.ResizeHeld
}

// settled forgets the previous container of a complete one, and its resize.
func settled(rc revision.ContainerState) revision.ContainerState {
	rc.PreviousContainerID, rc.PreviousImageID, rc.PreviousImage, rc.NoneRan = "", "", "", false
	rc.Between, rc.Resized, rc.Resources = nil, false, nil
	return rc
}

// writeOf returns the Write of u into p: the generation it makes, and
// whether the pod counts as disrupted: ready and u restarts a running
// sidecar, or still down from an earlier write, whose slot an undo keeps.
func writeOf(p Pod, u PodUpdate) *revision.Write {
	if !u.writesSpec() {
		return p.Record.Write
	}
	generation := p.Generation
	if len(u.Resize) > 0 {
		generation++
	}
	if len(u.Containers) > 0 {
		generation++
	}
	kept := p.Disrupting && p.Record.Write != nil
	w := &revision.Write{WasReady: kept || (p.PodReady && u.restartsRunning(p)), Generation: generation}
	// Whether the rollout took no slot for it is kept (writeFor).
	w.TurnedReady = kept && p.Record.Write.TurnedReady
	return w
}

func compareKeys(a, b types.NamespacedName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// podCount spells a count of pods: "1 pod", "6 pods".
func podCount(n int) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}
