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
	"github.com/sidecarset/sidecarset/internal/revision"
)

// Input is what Next decides on.
type Input struct {
	Latest Latest
	// Pods are the set's active pods that carry its record, classified
	// against Latest; in any order.
	Pods []Pod
	// Strategy is spec.updateStrategy; unset partition means 0, unset
	// maxUnavailable means 1.
	Strategy v1alpha1.UpdateStrategy
	// DriftPolicy is spec.driftPolicy; only Revert acts.
	DriftPolicy v1alpha1.DriftPolicy
	// Budgets lists, per pod, the PodDisruptionBudgets that select it. A pod
	// that is not a key has none. disruptionsAllowed lags the writes of the
	// previous reconciles (see Next).
	Budgets map[types.NamespacedName][]Budget
	// Withdrawn names the revisions first declared after Latest
	// (revision.Withdrawn): the set went back from them, by `rollout undo`
	// or by declaring an older spec again. Their pods go back whatever the
	// partition (see Next).
	Withdrawn map[string]bool
	// ReleasedBefore is the set's status.releasedBefore after this
	// reconcile, and ReleaseMargin the margin it moved by
	// (ReleasedBefore). A write back for settleAfter margins that it does
	// not pass, held by a write before it that is not back, is written
	// released, pod by pod (ActionSettle). A zero margin writes none.
	ReleasedBefore time.Time
	ReleaseMargin  time.Duration
}

// Budget is a PodDisruptionBudget as the planner needs it.
type Budget struct {
	// Name is the budget's namespace/name. It names the budget in messages,
	// and identifies it across the pods it selects, so that one plan never
	// spends more of its disruptions than it allows.
	Name string
	// DisruptionsAllowed is the budget's status.disruptionsAllowed.
	DisruptionsAllowed int32
	// Spent counts the pods of the budget that a rollout, of this set or of
	// any other, disrupted and that are not back yet (Disrupted): an in-place
	// write leaves no mark in the budget's status (see Next).
	Spent int32
}

// Scope is the partition and maxUnavailable arithmetic over the current
// pods, before the plan is applied.
type Scope struct {
	// Matched counts the pods given; Selected those within
	// updateStrategy.selector (all of them without one).
	Matched  int
	Selected int
	// Partition is how many selected pods stay on their revision; Target,
	// Selected minus Partition, how many may be on the latest one.
	Partition int
	Target    int
	// Updated and UpdatedReady count selected pods on the latest revision,
	// and those of them that are ready past minReadySeconds (Available).
	Updated      int
	UpdatedReady int
	// MaxUnavailable is how many pods may be disrupted at once;
	// Unavailable how many are (Pod.Disrupting, any pod, selected or not).
	MaxUnavailable int
	Unavailable    int
}

// Plan is what the controller does next.
type Plan struct {
	Scope Scope
	// Updates are the pods to write now, in the order decided.
	Updates []PodUpdate
	// Held are the pods that wait, with why, by namespace/name. A pod is in
	// Updates or in Held at most once; pods with nothing to do are in
	// neither.
	Held []Held
	// Due counts the candidates the partition lets move now (selected,
	// upgradable pods not on the latest revision, up to Target), and the
	// upgradable pods on a Withdrawn revision, whether they are written now
	// or wait.
	Due int
	// ReleaseAt is the soonest Pod.ReleaseAt: when a pod waiting out its
	// write's minReadySeconds is released. The caller should look again
	// by then: nothing else may happen to bring it back. Zero when none
	// waits.
	ReleaseAt time.Time
}

// Action says why a pod is written.
type Action string

const (
	// ActionUpdate moves a pod to the latest revision.
	ActionUpdate Action = "Update"
	// ActionRevertDrift writes back the images recorded as last written,
	// undoing a hand edit, without changing the pod's revision.
	ActionRevertDrift Action = "RevertDrift"
	// ActionSettle writes only the record of a pod back from its last write
	// (Pod.Back), saying it is released, when the set's releasedBefore
	// cannot pass that write yet (Input.ReleasedBefore): should the pod
	// fail later, it is not taken for that write's disruption (Pod.Again).
	ActionSettle Action = "Settle"
	// ActionResize writes only the resize a pod lacks (Pod.ResizeOwed):
	// its record landed, the resize after it did not. A pod the record
	// counts as disrupted takes nothing more, unless it is back but for
	// the resize (Pod.BackButOwed): it waits until the record says so
	// (ActionRecordBack); one written while not ready and ready now, or
	// recorded back, takes maxUnavailable and its budgets as any write.
	ActionResize Action = "Resize"
	// ActionHandoff writes the empty image into the old slot of a
	// HotUpgrade sidecar whose next slot has taken over (Pod.HandoffOwed),
	// when no update of the pod is due. A pod the record counts as
	// disrupted takes nothing more; a ready one takes maxUnavailable and
	// its budgets as any write, and so does one counted only since it
	// turned ready, once its record says it is back (Pod.BackButOwed).
	ActionHandoff Action = "Handoff"
	// ActionRecordDisruption writes only the record of a pod written while
	// not ready that is ready now, the write still to come
	// (Pod.Disrupting): the write is recorded as a disruption, so the pod
	// counts until it is back.
	ActionRecordDisruption Action = "RecordDisruption"
	// ActionRecordBack writes only the record of a pod back but for a
	// write that is a disruption of its own (Pod.BackButOwed): its write
	// no longer counts as a disruption.
	ActionRecordBack Action = "RecordBack"
)

// RecordOnly reports whether u writes the record alone: bookkeeping, not a
// rollout step.
func (u PodUpdate) RecordOnly() bool {
	return u.Action == ActionSettle || u.Action == ActionRecordDisruption || u.Action == ActionRecordBack
}

// Stamped returns u with at, the time the controller writes it, kept in
// the record's Write when u writes images, or a resize counted from now
// (WithRecord): the record then holds a new Write. The update's duration
// runs from it, whichever manager sees the pod back, and the set's
// status.releasedBefore passes it once it is back (ReleasedBefore).
// Record-only writes, and a resize alone, keep the time of the write they
// describe. u is not modified.
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
// entry of the pod's state annotation, which must go together in one patch
// so the record never disagrees with the spec; before them, when Resize
// lists any, the sidecars' resources through pods/resize, after them (see
// resize.go).
type PodUpdate struct {
	Pod    types.NamespacedName
	Action Action
	// Disrupts: the pod was ready and the write changes the image or the
	// resources of a running sidecar, so it took one of maxUnavailable and
	// one disruption of each of its budgets. A write into a pod that was not
	// ready, or one that changes no running container, takes neither.
	Disrupts bool
	// Containers are the sidecars whose image changes. Empty when only the
	// record changes (the spec already carries the images, put there by a
	// hand edit).
	Containers []ContainerImage
	// Resize are the sidecars whose cpu or memory changes, written after
	// the images and the record (ActionResize: alone, or after the record
	// when WithRecord).
	Resize []ContainerResources
	// WithRecord: an ActionResize writes the record first, which then
	// counts the pod as disrupted (a resize into a pod the record does not
	// count yet).
	WithRecord bool
	// State replaces the set's entry of sidecarset.dev/state; entries of
	// other SidecarSets stay.
	State revision.SetState
}

// ContainerImage is a sidecar image to write into a pod spec.
type ContainerImage struct {
	Name string
	// Init: the container is in spec.initContainers.
	Init  bool
	Image string
}

// Next plans the next pod writes of a rollout. It fails only on a strategy
// that validation refuses (a malformed selector or percentage). It is a
// pipeline: the pods due (dueOf), one job per pod with a write to make
// (jobsOf), why the others stay (idle), then each job's write (writeFor)
// asked of holdChain in order; the first hold that keeps a write says why,
// and a write no hold keeps is made and spent (tally).
//
// Candidates for an update are the selected pods that are not on the latest
// revision and are upgradable. They are ordered by readiness, then by
// priority (updateStrategy.priorityStrategy), scattered among equal
// priority (scatterStrategy), then by namespace/name (updateOrder.places):
// pods that are not ready first, as they lose nothing by the update and it
// may be what fixes them.
//
// Partition: of the Selected pods, Target = Selected - Partition may be on the
// latest revision, the pods already there included (Partition a count, or a
// percentage of Selected rounded up, clamped to Selected). The first
// Target - Updated candidates are due; the partition keeps the rest, i.e. the
// last candidates in that order once not-ready pods went first. Lowering the
// partition step by step therefore extends the same set of pods, and a pod
// that waits (for maxUnavailable or its PodDisruptionBudget) keeps its place
// rather than handing it to a pod the partition keeps.
//
// maxUnavailable (a count, or a percentage of Matched rounded up; never
// below 1; default 1): a write disrupts a pod when the pod's Ready condition
// is True and the write changes the image of a running sidecar. Due writes
// that disrupt nothing (the pod is not ready, or only the record or an
// ordinary init container changes) are all made at once and take nothing. A
// disrupting write is made only while fewer than maxUnavailable pods are
// Disrupting (written while ready, and not seen ready since with every
// running sidecar complete), and each one made counts. A pod written while
// not ready never counts, neither now nor afterwards while it stays not
// ready, so never-ready pods cannot hold the ready ones back.
//
// PodDisruptionBudgets: a disrupting write is made only when each of the
// pod's budgets still allows a disruption, counting the ones this plan
// spends and the ones already spent (Budget.Spent: the budget's pods that
// any SidecarSet's rollout disrupted and that are not back yet). An
// in-place write, unlike an eviction, leaves no mark in the budget's status,
// and the disruption controller sees the pod go unready only after the
// kubelet restarted the container; until then disruptionsAllowed still
// counts the pod as healthy, and trusting it would let a second pod go
// before the first is back. A pod the disruption controller already counts
// as unready is counted twice this way: the rollout waits for it, never for
// more than the budget allows. Otherwise the pod waits
// (HeldByDisruptionBudget) and the next pod is tried. A write that disrupts
// nothing is made regardless: it takes nothing from the healthy pods a
// budget protects.
//
// Going back: pods on a Withdrawn revision, one declared after the latest
// (the set went back from it, by `rollout undo` or by declaring an older
// spec again), are due whatever the partition and the selector: the
// partition keeps pods on the revision they run, and after going back the
// pods that never moved are on the latest revision already, so that a
// partition above 0 would otherwise keep exactly the pods that took the
// withdrawn revision on it, and call the rollout complete. They count
// within Target when it leaves room and beyond it otherwise, so that the
// partition still keeps as many of the other candidates as before; they go
// before those within each readiness group, and take maxUnavailable and
// budgets like any update.
//
// Drift (driftPolicy Revert): a drifted pod that is not due for an update
// gets its recorded images written back (a due update writes the latest
// images and undoes the drift on the way). Reverts are not limited by the
// partition or the selector, but take maxUnavailable and budgets like
// updates, and among ready pods go before updates: they restore what was
// declared, and there are only as many as there are hand edits. A hand
// edit the kubelet has not acted on yet (its status still shows another
// image running) holds every write into the pod (HeldChangeInFlight):
// the kubelet publishes a spec's generation before it acts on it, so no
// status then tells the container the edit replaces from the one it
// starts. A hand edit also ends a write in flight: the kubelet acts on the
// spec, and the write is never completed nor waited for.
//
// Paused or type NotUpdate: nothing is written; every pod that would have
// been is held with that reason.
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
		jobs, held = handoffsOnly(jobs, reason, msg)
		plan.Held = append(plan.Held, held...)
	}
	t := newTally(scope, in.Budgets)
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
	// Pods on lost nodes last: held, they would take the partition's
	// places from pods that can move.
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

// job is one write Next weighs: the pod, why it is written, and the write
// (writeFor), which the holds judge.
type job struct {
	pod    Pod
	action Action
	u      PodUpdate
}

// jobsOf returns one job per pod with something to write, in the order
// they are weighed: not-ready pods first, as they lose nothing by a write
// and it may be what fixes them; among ready ones, reverts and the writes
// a pod owes before updates; pods on Withdrawn revisions first, then in
// due's order.
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

// idle returns why the selected pods with nothing to write and not on the
// latest revision stay where they are: they need a recreate, or the
// partition keeps them.
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

// handoffsOnly keeps, of a stopped rollout's jobs, the handoffs, and holds
// the rest with reason. A handoff ends a hot upgrade under way, whose old
// version has given its work up: held, it would keep the pod down, stopped
// halfway (a stalled rollout pauses itself). An update of a pod that owes
// one writes the handoff alone (updateOf).
func handoffsOnly(jobs []job, reason HoldReason, msg string) ([]job, []Held) {
	var kept []job
	var held []Held
	for _, j := range jobs {
		if j.action == ActionHandoff || j.action == ActionUpdate && len(j.pod.HandoffOwed) > 0 {
			kept = append(kept, j)
			continue
		}
		held = append(held, Held{j.pod.Key, reason, msg})
	}
	return kept, held
}

// writeFor returns the write of action into p, with whether it disrupts
// the pod (PodUpdate.Disrupts). Whether the pod is ready is its Ready
// condition, never whether a sidecar's completion is proven: a pod whose
// last update is not proven complete is still serving, and a write
// restarts it.
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
	// A handoff or an owed resize into a pod the rollout counts in a slot
	// of its own ends the disruption it counts: it takes nothing more. Any
	// other write into a Ready pod restarts it anew, and so does one into
	// a pod counted without a slot (Write.TurnedReady).
	counted := p.Disrupting && p.Record.Write != nil && !p.Record.Write.TurnedReady
	continues := counted && (u.Action == ActionHandoff || u.Action == ActionResize)
	if u.Disrupts = p.PodReady && !continues && u.restartsRunning(p); u.Disrupts && u.Action == ActionResize {
		// The pod counts from the resize on; the resize cannot write the
		// record, so the record goes first.
		wr := revision.Write{Generation: p.Generation + 1}
		if u.State.Write != nil {
			wr = *u.State.Write
			wr.Generation = max(wr.Generation, p.Generation+1)
		}
		// Counted from now on, within maxUnavailable: no longer a
		// disruption the rollout took no slot for.
		if u.State.Write == nil || wr != *u.State.Write || !wr.WasReady || wr.TurnedReady {
			wr.WasReady, wr.TurnedReady = true, false
			u.State.Write, u.WithRecord = &wr, true
		}
	}
	if u.writesSpec() && u.State.Write != nil {
		wr := *u.State.Write
		wr.MinReadySeconds = latest.MinReadySeconds
		u.State.Write = &wr
	}
	if u.writesSpec() {
		// A new write: the one released before it is no longer the pod's.
		u.State.Released = nil
	}
	return u
}

// bookkeeping appends to updates a record of the disruption of every pod
// written while not ready that the write is about to disrupt, a record of
// every pod back but for a write that is a disruption of its own
// (BackButOwed), and a record of every pod back for settleAfter margins that
// in.ReleasedBefore does not pass that it is released (ActionSettle), as
// of every pod whose record reads released that is not Available: the
// managers of earlier releases, which know no releasedBefore, would take
// its failure for the write's disruption, and hold its slot for ever. This
// is bookkeeping, not a rollout step: it is done paused or not, and
// whatever holds the pod's next update. A pod back from its write needs
// no record of its own while no write before it is stuck: the set's
// status.releasedBefore passes that write (ReleasedBefore).
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
		case p.BackButOwed:
			updates = append(updates, recordBackOf(p))
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

// settleAfter is how many release margins a pod must have been back before
// its write, which the set's releasedBefore does not pass, is written
// released on its own: a write back later than one written after it, by
// moments, is passed soon after, and needs no write of its own.
const settleAfter = 3

// passed reports whether a set's status.releasedBefore, before, passes w,
// a write its record holds: w was made before it.
func passed(w *revision.Write, before time.Time) bool {
	return w != nil && w.At != nil && w.At.Time.Before(before)
}

// releasable reports whether p's write, which its record holds, may be
// released: the pod is back from it (Back), owing no write of its own
// (BackButOwed, ResizeOwed, HandoffOwed: a release would forget it) and
// with no other set's write that no set counts in flight in it
// (OthersWriting); and when it will have been so for margin, counted from
// the later of when it came back and the write.
func releasable(p Pod, margin time.Duration) (bool, time.Time) {
	w := p.Record.Write
	if w == nil || !p.Back || p.BackButOwed || p.OthersWriting || len(p.ResizeOwed) > 0 || len(p.HandoffOwed) > 0 {
		return false, time.Time{}
	}
	since := p.BackAt
	if w.At != nil && w.At.After(since) {
		since = w.At.Time
	}
	return true, since.Add(margin)
}

// ReleasedBefore returns the set's status.releasedBefore after a reconcile
// that judged pods at now, from was, the one stored. A write made before it
// is read as released (Classify): every write before it may be released
// (releasable). A release is a fact of the past that a pod failing later
// hides, so it is kept here, for all the set's pods at once, rather than
// in a write of each pod.
//
// margin is how much older than now the view of pods may be. A pod shown
// back for margin was back when the view was taken, whatever happened
// since; and a write made within margin may not show in the view yet, so
// none is passed, nor any at or after limit (zero: none). It only moves
// forward, and only as far as just after the last write it passes, so that
// it changes only when a write is released. next is when a write not
// passed yet may be: the caller should look again then; zero when none.
// Worked cases, margin 1m, now 12:10:00, was 12:00:00:
//
//	writes at 12:01 and 12:03, back since 12:02 and 12:04 → 12:03:00.000001
//	writes at 12:01 back since 12:02, 12:03 not back       → 12:01:00.000001
//	write at 12:01 back since 12:09:30                     → 12:00:00, next 12:10:30
//	write at 11:58, not back (read released already)       → 12:00:00
//	writes at 12:01 and 12:03, both back, limit 12:02      → 12:01:00.000001
func ReleasedBefore(pods []Pod, was, now time.Time, margin time.Duration, limit time.Time) (at, next time.Time) {
	// The cut: no write at or after it is passed.
	cut := now.Add(-margin)
	if !limit.IsZero() && limit.Before(cut) {
		cut = limit
	}
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

// Awaited reports whether the rollout waits for p: the rollout disrupted it
// and it is not back, or a write into it is not complete while it runs
// (not Pending).
func (p Pod) Awaited() bool {
	return !p.NodeLost && (p.Disrupting || (p.Updating && !p.Pending))
}

// backOf returns p's record saying that its last write is back: recorded
// back when the pod is back but for a write that is a disruption of its
// own (BackButOwed), released when it is Back. A pod can be both (a
// drifted sidecar counts as complete while its resize is owed): recorded
// back, it keeps the resize it owes, which a release would forget.
func backOf(p Pod) (revision.SetState, bool) {
	switch {
	case p.BackButOwed:
		return recordedBack(p.Record), true
	case p.Back:
		return releasedRecord(p.Record), true
	}
	return revision.SetState{}, false
}

// recordBackOf records that p is back but for a write that is a disruption
// of its own (ActionRecordBack).
func recordBackOf(p Pod) PodUpdate {
	return PodUpdate{Pod: p.Key, Action: ActionRecordBack, State: recordedBack(p.Record)}
}

// recordedBack returns rec, whose write is back but for a write that is a
// disruption of its own, saying so: the same write, no longer counted.
func recordedBack(rec revision.SetState) revision.SetState {
	w := *rec.Write
	w.WasReady, w.TurnedReady = false, false
	rec.Write = &w
	return rec
}

// runningInFlight returns the name of a sidecar of p whose write is in
// flight while it runs, but for a resize the kubelet holds (the container
// runs what it ran, and the kubelet resizes to whatever the spec says when
// it can) or one still to write (ActionResize).
func (p Pod) runningInFlight() (string, bool) {
	for _, c := range p.Containers {
		if c.InFlight && c.Running && !c.ResizeHeld && !c.ResizeOwed {
			return c.Name, true
		}
	}
	return "", false
}

// restartsRunning reports whether u changes the image of a container of p
// that keeps running, which the kubelet then restarts, or its resources.
// A resize restarts the container only under a resizePolicy that says so,
// but a resize that goes wrong (a memory limit below what the sidecar
// uses) takes the sidecar down too: it is paced like a restart.
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

// writesUnserving reports whether u writes a sidecar of p that keeps
// running but does not serve now (it does not run, or it is not ready),
// and whose change the kubelet acts on at once (not NotStarted).
func (u PodUpdate) writesUnserving(p Pod) bool {
	unserving := func(name string) bool {
		c, ok := p.container(name)
		return ok && c.Runs && (!c.Running || !c.Ready) && !c.NotStarted
	}
	return slices.ContainsFunc(u.Containers, func(c ContainerImage) bool { return unserving(c.Name) }) ||
		slices.ContainsFunc(u.Resize, func(r ContainerResources) bool { return unserving(r.Name) })
}

// WritesRecord reports whether u writes the pod's record: every action but
// an ActionResize without WithRecord.
func (u PodUpdate) WritesRecord() bool {
	return u.Action != ActionResize || u.WithRecord
}

// writesSpec reports whether u changes the pod spec: images, resources or
// both.
func (u PodUpdate) writesSpec() bool {
	return len(u.Containers) > 0 || len(u.Resize) > 0
}

// hasWork reports whether the rollout has pods to move, now or in a later
// step of the partition: only then does a pod that failed again count
// (Pod.Again). Once none is left, its failure is not the rollout's.
func hasWork(pods []Pod, s v1alpha1.UpdateStrategy, selected func(Pod) bool) bool {
	return s.Type != v1alpha1.NotUpdateStrategy &&
		slices.ContainsFunc(pods, func(p Pod) bool { return !p.Updated && p.Upgradable && selected(p) })
}

// counted reports whether p counts against maxUnavailable: the rollout has
// it down, or it failed again once released (Again), unless its node is
// lost or another set's rollout has it down. A pod on a lost node whose
// write is still to come keeps its slot: the kubelet acts on it when the
// node is back.
func (p Pod) counted() bool {
	return p.Disrupting && (!p.NodeLost || p.Updating) || p.Again && !p.NodeLost && len(p.DisruptedBy) == 0
}

// newScope does the arithmetic Next and status.Compute share.
func newScope(pods []Pod, s v1alpha1.UpdateStrategy, selected func(Pod) bool) (Scope, error) {
	sc := Scope{Matched: len(pods)}
	for _, p := range pods {
		// A pod on a lost node whose write is still to come keeps its
		// slot: the kubelet acts on it when the node is back.
		if p.counted() {
			sc.Unavailable++
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
// the latest revision.
//
// An ordinary init container is not written: it ran before the app started
// and the kubelet never runs it again, so a new image would only make the
// spec claim what never ran. Its record keeps the image it ran, and its new
// image reaches new pods only (Pod.StaleInit tells).
//
// A container that is not written keeps its record as it was, except that a
// complete one forgets its previous container: nothing of it is in flight.
// One whose spec already carries the latest image (a hand edit got there
// first) is not written either; it keeps what it recorded, since the
// kubelet already acted on that edit.
func updateOf(p Pod, latest Latest) PodUpdate {
	if len(p.HandoffOwed) > 0 {
		// The handoff first (hot.go); the pod is due again after it. One
		// that must wait writes nothing, and Next holds the pod.
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
		case declared && c.Image != image:
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
			// The spec has resources the kubelet has yet to apply (a
			// resize that landed without its record, or someone else's):
			// the write waits for them, and owes nothing.
			rs.Resized, rs.Resources = true, c.Resources
		} else if rs.Resized && !declaresResize(latest, rc.Name, rs.Resources) {
			// An older revision's resize, which did not land, that the
			// latest one does not declare: owed still, it would resize the
			// pod to what no revision declares after this write.
			rs.Resized, rs.Resources = false, nil
		}
	}
	u.State.Write = writeOf(p, u)
	return u
}

// releasedRecord returns rec with its write moved to Released and every
// container settled, so that a sidecar failing later is judged as any
// running container, not as a write in flight.
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

// maxBetween is how many images of writes gone over in flight a record
// keeps (ContainerState.Between).
const maxBetween = 4

// written1 records, for a write into c, the container that runs before it.
// When the last write of c is still in flight, the container that ran before
// that write is kept: it is the last one known to run a written image, and
// the kubelet may not have acted on the write in between (A→B→A); the image
// of that write is kept in Between. A write
// whose image runs and whose resize alone is owed or held is not in flight
// so: the container running now is the one the new write replaces, and
// judging by the one before would take that write for done at once. Over a
// hand edit, which also ends a write in flight, Next writes only once the
// kubelet runs the edited image (or the container does not run), and the
// container that runs then is recorded: never one the edit is about to
// replace.
func written1(c Container, rc revision.ContainerState) revision.ContainerState {
	if c.InFlight && !c.imageComplete() {
		if rc.PreviousContainerID == "" && rc.PreviousImage == "" && !rc.NoneRan {
			// Written before containerIDs were kept: the container that
			// does not run now (Next writes over no running one in flight)
			// is the one to see replaced.
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
	// Started from the image written now: as the last one written, or,
	// under a hand edit the status does not show apart from it (a pin of
	// the content it runs), as the image recorded. If the kubelet keeps it,
	// it is the write's.
	if c.imageComplete() && c.Image == rc.Image || c.Running && c.Image != rc.Image && c.shows(rc.Image) {
		rc.PreviousImage = rc.Image
	}
	return rc
}

// imageComplete reports whether the kubelet runs the image last written
// into c: c is Complete, or would be but for its resize, owed or held
// (ResizeOwed and ResizeHeld are set only then).
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
// whether the pod counts as disrupted by the rollout: it was ready and u
// restarts a running sidecar, or an earlier write disrupted it and it is
// not back yet (a write over an update that never came up, such as an undo
// after a failed pull, must not free the slot that update holds). A write
// that changes no container leaves the spec, and so the generation, as it
// was, and keeps the record's Write. The resize and the image write each
// move the generation by one.
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
	// A disruption kept is still one the rollout took no slot for, if it
	// was so.
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
