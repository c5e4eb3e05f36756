// Package status computes a SidecarSet's status, counts and conditions, from
// the classified pods and the rollout plan. It never reads or writes the
// cluster: the controller calls Compute after rollout.Next and writes the
// result through the status subresource when Equal says it changed.
package status

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/rollout"
)

// Reasons of the Progressing, Complete and Stalled conditions. All three
// carry the reason of the rollout's state; their statuses differ.
const (
	// ReasonComplete: every selected pod is on the latest revision and
	// ready past minReadySeconds, and none is updating.
	ReasonComplete = "RolloutComplete"
	// ReasonPartitionReached: every pod the partition lets move is on the
	// latest revision and ready past minReadySeconds; the partition keeps
	// the rest. Complete is True: the step is done.
	ReasonPartitionReached = "PartitionReached"
	// ReasonPodsNotReady: nothing is left to write or wait for but pods on
	// the latest revision that were not ready before their write and are
	// still not: the rollout does not wait for them, nor stall on them, and
	// Complete is False until they are ready.
	ReasonPodsNotReady = "PodsNotReady"
	// ReasonPodsNeedRecreate: nothing is left to write or wait for but pods
	// the partition lets move that cannot take the latest revision in
	// place: Complete is False until they are recreated (`kubectl
	// sidecarset restart NAME --not-upgradable`).
	ReasonPodsNeedRecreate = "PodsNeedRecreate"
	// ReasonPodsOnLostNodes: nothing is left to write or wait for but pods
	// whose node is not Ready: they are written once it is back, and
	// Complete is False until then.
	ReasonPodsOnLostNodes = "PodsOnLostNodes"
	// ReasonUpdating: the rollout is moving pods, within its deadline.
	ReasonUpdating = "PodsUpdating"
	// ReasonPaused: updateStrategy.paused stops the rollout short of
	// complete.
	ReasonPaused = "Paused"
	// ReasonNotUpdate: updateStrategy.type NotUpdate leaves running pods on
	// their revision, and some pod is still finishing an earlier write.
	ReasonNotUpdate = "NotUpdate"
	// ReasonProgressDeadlineExceeded: no progress within
	// progressDeadlineSeconds.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
)

// DefaultProgressDeadline applies when progressDeadlineSeconds is unset.
const DefaultProgressDeadline = 600 * time.Second

// Input is what Compute needs.
type Input struct {
	// Generation is the SidecarSet's metadata.generation.
	Generation int64
	Latest     rollout.Latest
	// Pods and Plan are what rollout.Next got and returned in this
	// reconcile.
	Pods     []rollout.Pod
	Plan     rollout.Plan
	Strategy v1alpha1.UpdateStrategy
	// Unmanaged counts matched pods that carry no record of the set;
	// Skipped those the webhook could not inject it into
	// (rollout.Membership).
	Unmanaged int32
	Skipped   int32
	// Previous is the status the set carries now; its lastProgressTime is
	// where the progress deadline runs from.
	Previous v1alpha1.SidecarSetStatus
	// ReleasedBefore is the set's status.releasedBefore after this
	// reconcile (rollout.ReleasedBefore); zero keeps Previous's.
	ReleasedBefore time.Time
	// Now is the current time.
	Now metav1.Time
}

// Result is the computed status and what the controller does because of it.
type Result struct {
	Status v1alpha1.SidecarSetStatus
	// RecheckAfter is, for an active rollout not stalled yet, the time left
	// before its deadline: the controller requeues after it, so Stalled is
	// set even if nothing else happens. Zero otherwise.
	RecheckAfter time.Duration
	// PauseRollout: the rollout is stalled and still active. The controller
	// pauses it (updateStrategy.paused) and emits an event with the Stalled
	// condition's reason and message.
	PauseRollout bool
}

// Compute returns the status of a SidecarSet.
//
// Counts are over all the given pods (matchedPods, updatedPods, readyPods,
// updatedReadyPods, notUpgradablePods, driftedPods); unmanagedPods is passed
// in.
//
// Rollout work is what the rollout still has to do or wait for: candidates
// the partition lets move (Plan.Due), pods it disrupted that are not back
// (rollout.Pod.Disrupting), and writes not complete yet in pods that run
// (rollout.Pod.Updating, not Pending); a pod the rollout restarted counts
// as disrupted until it has been Ready for minReadySeconds, and a pod it
// wrote while not ready, Ready now, is waited for until then too (it is
// released by itself, no failure of the rollout). What is not
// rollout work is reported, never waited on nor stalled on: pods that are
// not ready for reasons of their own (a crash-looping app, a pod written
// while not ready that stays so, a new pod still Pending), pods that are not
// upgradable, ordinary init containers whose new image reaches new pods
// only. The rollout is Complete when there is no work and every pod the
// partition lets move is on the latest revision and ready past
// minReadySeconds (rollout.Pod.Available): pods not ready and pods that
// need a recreate keep it short of Complete, with the reason PodsNotReady
// or PodsNeedRecreate, and Progressing False. Under type NotUpdate only
// writes still in flight are work. Being paused does not keep a rollout
// from being complete.
//
// Progress is any of:
//
//   - the rollout (re)starts: the latest revision is new, or the previous
//     status did not show it progressing (no status yet, paused, NotUpdate,
//     complete), except when it showed it stalled;
//   - updatedPods or updatedReadyPods grew since the previous status (not
//     readyPods: pods flapping, or new pods of a scale-up, are no progress
//     of the rollout);
//   - the plan writes a pod (a write of the record alone does not
//     count). A plan never writes the same pod twice for the same reason (once written it is updated, or no longer drifted), so a
//     non-empty plan means the planned set changed.
//
// The deadline clock runs only while there is rollout work other than pods
// that a PodDisruptionBudget, another set's rollout or someone else's change
// alone holds (due pods, or pods the rollout does not have down that still
// owe a write of their update), from status.lastProgressTime: kept in the
// status, it survives a manager restart. A budget that allows
// nothing keeps the rollout Progressing, saying so, but never makes it stall
// and pause itself. Stalled: the rollout is active (RollingUpdate, not
// paused), has such work, and either progressDeadlineSeconds (default 600) passed since the
// last progress, or the previous status already showed it stalled and
// nothing progressed since. After the controller pauses a stalled rollout,
// Stalled stays True (with the message of the moment it stalled) until the
// rollout is resumed, completes, or gets a new revision.
//
// completedRevision is the latest revision once a RollingUpdate rollout is
// complete, and stays what it was otherwise.
//
// The conditions, by state:
//
//	state                          Progressing                    Complete               Stalled
//	complete                       False RolloutComplete          True RolloutComplete   False RolloutComplete
//	complete, the partition keeps  False PartitionReached         True PartitionReached  False PartitionReached
//	no work, pods not ready left   False PodsNotReady             False PodsNotReady     False PodsNotReady
//	no work, recreates left        False PodsNeedRecreate         False PodsNeedRecreate False PodsNeedRecreate
//	paused, not complete           False Paused                   False Paused           False Paused (True as it was, after a stall)
//	NotUpdate, pods still updating False NotUpdate                False NotUpdate        False NotUpdate
//	active, within deadline        True PodsUpdating              False PodsUpdating     False PodsUpdating
//	active, deadline exceeded      False ProgressDeadlineExceeded False (same)           True ProgressDeadlineExceeded
//
// Worked cases, 12 ready pods, progressDeadlineSeconds 600:
//
//	partition 50%, 6 updated and ready                   → Complete True PartitionReached "6 of 12 pods updated and ready; partition keeps 6"
//	partition 50%, 3 updated and ready, 1 updating, plan empty,
//	  last progress 599s ago                             → Progressing True PodsUpdating, RecheckAfter 1s
//	same, last progress 600s ago                         → Stalled True ProgressDeadlineExceeded, PauseRollout
//	same, but updatedReadyPods grew from 2 to 3          → progress: lastProgressTime = now, not stalled
//	stalled, then paused by the controller               → Progressing False Paused, Stalled still True, PauseRollout false
//	paused after a stall, then resumed                   → restart: lastProgressTime = now, Stalled False
//	complete, then a new pod's app crash-loops           → Complete False PodsNotReady, no clock: the rollout did not disrupt it
//	complete, then a pod written while ready goes unready → Complete False PodsNotReady, no clock: it was
//	                                                        released, and its failure is not waited for
//	partition 0, 12 updated, 2 of them written while not
//	  ready and still not ready                          → Complete False PodsNotReady "10 of 12 pods updated and ready; 2 updated but not ready"
//	same, the 2 ready now for less than minReadySeconds  → Progressing True PodsUpdating: they come back by themselves
//
// Conditions are set with meta.SetStatusCondition on a copy of the previous
// ones: LastTransitionTime moves only when a condition's status changes, and
// then to Now truncated to seconds, as it reads back from the apiserver.
// Conditions of other types are kept.
func Compute(in Input) Result {
	now := in.Now.Rfc3339Copy()
	sc := in.Plan.Scope
	st, c, failingPods, heldByOthers := count(in)
	notUpdate := in.Strategy.Type == v1alpha1.NotUpdateStrategy
	active := !notUpdate && !in.Strategy.Paused
	// Due pods on lost nodes are not waited for: they go when it is back.
	work := c.inFlight > 0 || c.returning > 0 || (!notUpdate && in.Plan.Due > c.nodeLost)
	left := leftOver(in.Pods, sc, c)
	complete := !work && (notUpdate || left == "")
	// Due pods that others alone hold, in flight or not, are no failure.
	// heldByOthers may also name a drifted pod to revert, which is not due:
	// that can hide only a due pod held for a reason of the rollout's own,
	// maxUnavailable or its own write in flight, and then a pod it is
	// waiting for is failing already.
	// So are due pods held for slots that pods on lost nodes keep.
	failing := failingPods > 0 || (!notUpdate && in.Plan.Due > heldByOthers+c.nodeLost+heldForLost(in.Plan))
	if complete && !notUpdate {
		st.CompletedRevision = in.Latest.Name
	}
	deadline := DefaultProgressDeadline
	if s := in.Strategy.ProgressDeadlineSeconds; s != nil {
		deadline = time.Duration(*s) * time.Second
	}
	stalled, due := false, time.Duration(0)
	if failing && active {
		st.LastProgressTime, due, stalled = clock(in, st, now, deadline)
	}

	shown := sc
	prefix := ""
	if notUpdate {
		// The partition means nothing when no running pod moves.
		shown.Partition = 0
		prefix = "updateStrategy.type is NotUpdate, running pods keep their revision: "
	}
	summary := prefix + summarize(st, shown, c, in.Plan.Held, in.Strategy.Selector != nil)
	res := Result{PauseRollout: stalled}
	var reason, message string
	switch {
	case complete && sc.Partition > 0 && !notUpdate:
		reason, message = ReasonPartitionReached, summary
	case complete:
		reason, message = ReasonComplete, summary
	case !work && !notUpdate:
		reason, message = left, summary
	case stalled:
		reason, message = ReasonProgressDeadlineExceeded, fmt.Sprintf(
			"no progress within progressDeadlineSeconds (%ds): %s", int64(deadline/time.Second), summary)
	case notUpdate:
		reason, message = ReasonNotUpdate, summary
	case !active:
		reason, message = ReasonPaused, "updateStrategy.paused is true: "+summary
	default:
		reason, message = ReasonUpdating, summary
		if failing {
			res.RecheckAfter = due
		}
	}
	st.Conditions = conditions(in, now, reason, message, work && active && !stalled, complete, stalled)
	res.Status = st
	return res
}

// count returns the status's pod counts, the counts its message tells,
// how many pods in flight others alone do not hold (failing), and how many
// pods others alone hold.
//
// Pods that only a PodDisruptionBudget, another set's rollout or someone
// else's change the kubelet has not acted on holds are not the rollout's
// failure: the budget is spent by others, or allows nothing; the other
// rollout has the pod down; the kubelet still shows the image from before
// a hand edit (which, for a tag that shares its content with others, it
// may show for as long as the container runs). The rollout waits for them,
// says so, and does not stall on them: due pods, and pods it does not have
// down that still owe a write of their update (a resize that did not land,
// the handoff of a hot upgrade).
func count(in Input) (st v1alpha1.SidecarSetStatus, c counts, failing, heldByOthers int) {
	st = v1alpha1.SidecarSetStatus{
		ObservedGeneration: in.Generation,
		LatestRevision:     in.Latest.Name,
		MatchedPods:        int32(len(in.Pods)),
		UnmanagedPods:      in.Unmanaged,
		SkippedPods:        in.Skipped,
		CompletedRevision:  in.Previous.CompletedRevision,
		ReleasedBefore:     in.Previous.ReleasedBefore,
	}
	if !in.ReleasedBefore.IsZero() {
		st.ReleasedBefore = new(metav1.NewMicroTime(in.ReleasedBefore))
	}
	byOthers := make(map[types.NamespacedName]bool)
	otherRollout := make(map[types.NamespacedName]bool)
	for _, h := range in.Plan.Held {
		switch h.Reason {
		case rollout.HeldByDisruptionBudget, rollout.HeldByOtherRollout, rollout.HeldChangeInFlight:
			byOthers[h.Pod] = true
			otherRollout[h.Pod] = h.Reason == rollout.HeldByOtherRollout
		case rollout.HeldNodeLost:
			c.nodeLost++
		}
	}
	for _, p := range in.Pods {
		if otherRollout[p.Key] {
			c.otherSets = append(c.otherSets, p.DisruptedBy...)
		}
		st.UpdatedPods += one(p.Updated)
		st.ReadyPods += one(p.Ready)
		st.UpdatedReadyPods += one(p.Updated && p.Available)
		st.NotUpgradablePods += one(!p.Upgradable)
		st.DriftedPods += one(len(p.Drifted) > 0)
		c.staleInit += int(one(len(p.StaleInit) > 0))
		c.rewritten += int(one(len(p.Rewritten(in.Latest)) > 0))
		switch {
		case p.Updating:
			c.updating++
		case p.Updated && !p.Ready:
			c.updatedNotReady++
		case p.Updated && !p.Available:
			c.minReady++
			c.returning += int(one(p.Record.Write != nil && !p.ReleaseAt.IsZero()))
		}
		if p.Awaited() {
			c.inFlight++
			if p.Disrupting || !byOthers[p.Key] {
				failing++
			}
		}
	}
	slices.Sort(c.otherSets)
	c.otherSets = slices.Compact(c.otherSets)
	return st, c, failing, len(byOthers)
}

func one(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// clock returns, for a rollout with work that fails to progress, when it
// last progressed, how long it has left before progressDeadlineSeconds,
// and whether it stalled: the deadline passed, or it stalled before and
// has not progressed since. The clock runs only while there is work: a set
// with nothing to do cannot stall, however long it stays so.
func clock(in Input, st v1alpha1.SidecarSetStatus, now metav1.Time, deadline time.Duration) (*metav1.Time, time.Duration, bool) {
	prev := in.Previous
	prevProgressing := meta.FindStatusCondition(prev.Conditions, v1alpha1.ConditionProgressing)
	restarted := prev.LatestRevision != in.Latest.Name || prevProgressing == nil ||
		(prevProgressing.Status != metav1.ConditionTrue && prevProgressing.Reason != ReasonProgressDeadlineExceeded)
	progressed := restarted ||
		st.UpdatedPods > prev.UpdatedPods ||
		st.UpdatedReadyPods > prev.UpdatedReadyPods ||
		movesPods(in.Plan.Updates)
	last := now
	if p := prev.LastProgressTime; p != nil && !progressed {
		last = *p
	}
	due := deadline - now.Sub(last.Time)
	stalled := due <= 0 || (meta.IsStatusConditionTrue(prev.Conditions, v1alpha1.ConditionStalled) && !progressed)
	return &last, due, stalled
}

// conditions returns the previous conditions updated: Progressing,
// Complete and Stalled, each with reason and message. A rollout paused
// because it stalled still says why it stopped.
func conditions(in Input, now metav1.Time, reason, message string, progressing, complete, stalled bool) []metav1.Condition {
	prev := in.Previous
	out := slices.Clone(prev.Conditions)
	set := func(conditionType string, isTrue bool, why, msg string) {
		meta.SetStatusCondition(&out, metav1.Condition{
			Type:               conditionType,
			Status:             conditionStatus(isTrue),
			ObservedGeneration: in.Generation,
			LastTransitionTime: now,
			Reason:             why,
			Message:            msg,
		})
	}
	set(v1alpha1.ConditionProgressing, progressing, reason, message)
	set(v1alpha1.ConditionComplete, complete, reason, message)
	active := in.Strategy.Type != v1alpha1.NotUpdateStrategy && !in.Strategy.Paused
	if meta.IsStatusConditionTrue(prev.Conditions, v1alpha1.ConditionStalled) && !active && !complete && prev.LatestRevision == in.Latest.Name {
		kept := meta.FindStatusCondition(prev.Conditions, v1alpha1.ConditionStalled)
		set(v1alpha1.ConditionStalled, true, kept.Reason, kept.Message)
	} else {
		set(v1alpha1.ConditionStalled, stalled, reason, message)
	}
	set(v1alpha1.ConditionReconciling, progressing, reason, message)
	return out
}

// leftOver returns, when the rollout has nothing left to write or wait for,
// why it is not complete: the reason of pods it does not wait for that
// keep it short of every pod the partition lets move being on the latest
// revision and ready past minReadySeconds (pods not ready since before
// their write, first; then pods that need a recreate), or "" when none do.
func leftOver(pods []rollout.Pod, sc rollout.Scope, c counts) string {
	if c.nodeLost > 0 || slices.ContainsFunc(pods, func(p rollout.Pod) bool { return p.Updated && !p.Available && p.NodeLost }) {
		return ReasonPodsOnLostNodes
	}
	// Ready for less than minReadySeconds, or not ready at all.
	if slices.ContainsFunc(pods, func(p rollout.Pod) bool { return p.Updated && !p.Available }) {
		return ReasonPodsNotReady
	}
	if sc.Updated < sc.Target && slices.ContainsFunc(pods, func(p rollout.Pod) bool { return !p.Upgradable && !p.Updated }) {
		return ReasonPodsNeedRecreate
	}
	return ""
}

// heldForLost returns how many pods plan holds for maxUnavailable that
// would have room but for the pods on lost nodes that keep their slots.
func heldForLost(plan rollout.Plan) int {
	sc := plan.Scope
	if sc.UnavailableLost == 0 || sc.Unavailable-sc.UnavailableLost >= sc.MaxUnavailable {
		return 0
	}
	return heldBy(plan.Held, rollout.HeldByMaxUnavailable)
}

// movesPods reports whether updates move a pod: a write of the record
// alone is bookkeeping, and a plan of those alone is no progress.
func movesPods(updates []rollout.PodUpdate) bool {
	for _, u := range updates {
		if !u.RecordOnly() {
			return true
		}
	}
	return false
}

// heldBy counts the held pods of a reason.
func heldBy(held []rollout.Held, reason rollout.HoldReason) int {
	n := 0
	for _, h := range held {
		if h.Reason == reason {
			n++
		}
	}
	return n
}

// counts are the pod counts the summary tells beside the status fields.
type counts struct {
	// updating: a write not complete; updatedNotReady: on the latest
	// revision, complete, not ready.
	updating, updatedNotReady int
	// minReady: on the latest revision, ready, not for minReadySeconds
	// yet; returning: those of them back from a write of the rollout that
	// is still open, which will be released by themselves.
	minReady, returning int
	// inFlight: pods the rollout waits for (disrupted, or running with a
	// write not complete).
	inFlight int
	// staleInit: pods whose ordinary init containers ran an older image.
	staleInit int
	// nodeLost: pods held because their node is not Ready.
	nodeLost int
	// rewritten: pods that run images admission rewrote from the declared
	// ones (rollout.Pod.Rewritten).
	rewritten int
	// otherSets names, sorted, the SidecarSets whose rollouts hold down
	// the pods held for them (rollout.HeldByOtherRollout).
	otherSets []string
}

// summarize spells the counts for a human, e.g.
// "6 of 12 pods updated and ready; partition keeps 6; 1 updating".
func summarize(st v1alpha1.SidecarSetStatus, sc rollout.Scope, c counts, held []rollout.Held, selector bool) string {
	of := "pods"
	if selector {
		of = "selected pods"
	}
	parts := []string{fmt.Sprintf("%d of %d %s updated and ready", sc.UpdatedReady, sc.Selected, of)}
	if sc.Partition > 0 {
		parts = append(parts, fmt.Sprintf("partition keeps %d", sc.Partition))
	}
	if c.updating > 0 {
		parts = append(parts, fmt.Sprintf("%d updating", c.updating))
	}
	if c.minReady > 0 {
		parts = append(parts, fmt.Sprintf("%d ready for less than minReadySeconds", c.minReady))
	}
	if c.updatedNotReady > 0 {
		parts = append(parts, fmt.Sprintf("%d updated but not ready", c.updatedNotReady))
	}
	if c.staleInit > 0 {
		parts = append(parts, fmt.Sprintf("%d keep an older init container image (a new one reaches new pods only)", c.staleInit))
	}
	if st.NotUpgradablePods > 0 {
		parts = append(parts, fmt.Sprintf("%d not upgradable (need a recreate)", st.NotUpgradablePods))
	}
	if c.rewritten > 0 {
		parts = append(parts, fmt.Sprintf("%d run sidecar images admission rewrote from the declared ones", c.rewritten))
	}
	if n := heldBy(held, rollout.HeldByDisruptionBudget); n > 0 {
		parts = append(parts, fmt.Sprintf("%d held by a PodDisruptionBudget", n))
	}
	if n := heldBy(held, rollout.HeldByOtherRollout); n > 0 {
		parts = append(parts, fmt.Sprintf("%d held for the rollout of SidecarSet %s", n, strings.Join(c.otherSets, ", ")))
	}
	if c.nodeLost > 0 {
		parts = append(parts, fmt.Sprintf("%d on nodes that are not Ready", c.nodeLost))
	}
	switch n := sc.UnavailableLost; {
	case n == 1:
		parts = append(parts, "1 keeps a maxUnavailable slot on a node that is not Ready")
	case n > 1:
		parts = append(parts, fmt.Sprintf("%d keep maxUnavailable slots on nodes that are not Ready", n))
	}
	if n := heldBy(held, rollout.HeldChangeInFlight); n > 0 {
		parts = append(parts, fmt.Sprintf("%d wait for the kubelet to act on an image changed by someone else", n))
	}
	if st.DriftedPods > 0 {
		parts = append(parts, fmt.Sprintf("%d drifted", st.DriftedPods))
	}
	return strings.Join(parts, "; ")
}

func conditionStatus(b bool) metav1.ConditionStatus {
	if b {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}

// Equal reports whether two statuses say the same, so the controller writes
// only a status that changed. Conditions are compared by type, in any order,
// and without LastTransitionTime: Compute keeps it whenever a condition's
// status stays, so a LastTransitionTime that differs alone is noise (a
// different precision or location of the same instant), never news.
func Equal(a, b v1alpha1.SidecarSetStatus) bool {
	if len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for _, ca := range a.Conditions {
		cb := meta.FindStatusCondition(b.Conditions, ca.Type)
		if cb == nil || ca.Status != cb.Status || ca.Reason != cb.Reason ||
			ca.Message != cb.Message || ca.ObservedGeneration != cb.ObservedGeneration {
			return false
		}
	}
	// Like LastTransitionTime: the same instant may read back in another
	// location.
	if (a.LastProgressTime == nil) != (b.LastProgressTime == nil) ||
		(a.LastProgressTime != nil && !a.LastProgressTime.Equal(b.LastProgressTime)) {
		return false
	}
	if (a.ReleasedBefore == nil) != (b.ReleasedBefore == nil) ||
		(a.ReleasedBefore != nil && !a.ReleasedBefore.Equal(b.ReleasedBefore)) {
		return false
	}
	a.Conditions, b.Conditions = nil, nil
	a.LastProgressTime, b.LastProgressTime = nil, nil
	a.ReleasedBefore, b.ReleasedBefore = nil, nil
	// injection is decided and written on its own (Injection).
	a.Injection, b.Injection = nil, nil
	return reflect.DeepEqual(a, b)
}
