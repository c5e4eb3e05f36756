package rollout

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// HoldReason says why a pod waits.
type HoldReason string

const (
	// HeldByPartition means the partition keeps the pod on its revision.
	HeldByPartition HoldReason = "Partition"
	// HeldByMaxUnavailable means as many pods as maxUnavailable allows are
	// updating or updated but not ready.
	HeldByMaxUnavailable HoldReason = "MaxUnavailable"
	// HeldByDisruptionBudget means a PodDisruptionBudget of the pod allows no
	// further disruption now.
	HeldByDisruptionBudget HoldReason = "DisruptionBudget"
	// HeldNotUpgradable means something changed that the pod cannot take in
	// place (Pod.NotUpgradable says what); the pod needs a recreate.
	HeldNotUpgradable HoldReason = "NotUpgradable"
	// HeldPaused means updateStrategy.paused is true.
	HeldPaused HoldReason = "Paused"
	// HeldNotUpdate means updateStrategy.type is NotUpdate.
	HeldNotUpdate HoldReason = "NotUpdate"
	// HeldInFlight means the pod's last write is not done, and the container it
	// restarts runs.
	HeldInFlight HoldReason = "InFlight"
	// HeldByOtherRollout means another SidecarSet's rollout has the pod down
	// (Pod.DisruptedBy), and the write, not a handoff, would restart
	// a running sidecar of it, every one it writes serving: the pod goes
	// once it is back.
	HeldByOtherRollout HoldReason = "OtherRollout"
	// HeldChangeInFlight means someone else changed a running sidecar's image
	// (a hand edit) and the kubelet has not acted on it yet: its status
	// still shows another image running. Written now, the pod would record
	// as the container to see replaced the one the kubelet is about to
	// replace anyway, and take the container that change starts for this
	// write's; or, if the kubelet skipped the change, wait for a restart
	// that never comes. The pod goes once the status shows the spec's
	// image running, or the kubelet failing to start it. The runtime names a running
	// image by one of the tags its content has now, so an edit to a tag
	// that shares its content with others may show as another of them for
	// as long as the container runs: such a pod waits, reported, and the
	// rollout does not stall on it (status.Compute).
	HeldChangeInFlight HoldReason = "ChangeInFlight"
	// HeldNodeLost means the pod's node is not Ready (Pod.NodeLost): its
	// kubelet acts on nothing, and would act on every write at once when
	// it is back. The pod goes once its node is Ready again; meanwhile the
	// rollout neither counts it nor waits for it.
	HeldNodeLost HoldReason = "NodeLost"
)

// Held is a pod that waits.
type Held struct {
	Pod     types.NamespacedName
	Reason  HoldReason
	Message string
}

// A hold keeps a job's write back, and says why; ok is false when it lets
// the write go.
type hold func(j job, t *tally) (reason HoldReason, msg string, ok bool)

// holdChain is every hold on a write Next would make, in the order they are
// asked: the first that keeps a write says why. Whose hold it is orders
// them: the pod's node and the kubelet first (until the pod can take a
// write, nothing else matters), then the set's own hot upgrade, another
// SidecarSet's rollout, this set's maxUnavailable, and last the pod's
// PodDisruptionBudgets. Pods with no write to make are held before it:
// by the partition or as not upgradable (idle), and every write but a
// handoff by a pause or NotUpdate (handoffsOnly).
var holdChain = []hold{
	holdNodeLost,
	holdBackButOwed,
	holdInFlight,
	holdChangeInFlight,
	holdHandoff,
	holdOtherRollout,
	holdMaxUnavailable,
	holdDisruptionBudget,
}

// tally is what one plan may still spend: the room maxUnavailable leaves,
// and the disruptions spent of each budget, the plan's own writes counted
// as they are made (spend).
type tally struct {
	scope   Scope
	room    int
	budgets map[types.NamespacedName][]Budget
	spent   map[string]int32
}

// newTally starts a plan's tally with the room scope leaves and what
// budgets say is spent.
func newTally(scope Scope, budgets map[types.NamespacedName][]Budget) *tally {
	t := &tally{scope: scope, room: scope.MaxUnavailable - scope.Unavailable, budgets: budgets, spent: map[string]int32{}}
	for _, bs := range budgets {
		for _, b := range bs {
			t.spent[b.Name] = b.Spent
		}
	}
	return t
}

// holds asks holdChain about j.
func (t *tally) holds(j job) (HoldReason, string, bool) {
	for _, h := range holdChain {
		if reason, msg, ok := h(j, t); ok {
			return reason, msg, true
		}
	}
	return "", "", false
}

// spend counts j's write, which no hold keeps, against maxUnavailable and
// the pod's budgets.
func (t *tally) spend(j job) {
	if !j.u.Disrupts {
		return
	}
	t.room -= 1 - int(j.own())
	for _, b := range t.budgets[j.pod.Key] {
		t.spent[b.Name] += 1 - j.ownBudget()
	}
}

// own is 1 when j's pod counts already (counted): it is in the count, and
// its write takes that place, not one more.
func (j job) own() int32 {
	if j.pod.counted() {
		return 1
	}
	return 0
}

// ownBudget is 1 when j's pod is among its budgets' spent disruptions
// (Disrupting: Disrupted over its records), and its write takes that place.
// A pod that failed again is not: the disruption controller sees it
// unhealthy itself.
func (j job) ownBudget() int32 {
	if j.pod.Disrupting {
		return 1
	}
	return 0
}

// holdNodeLost: the pod's node is not Ready; its kubelet acts on nothing.
func holdNodeLost(j job, _ *tally) (HoldReason, string, bool) {
	return HeldNodeLost, "its node is not Ready: the pod is written once the node is back", j.pod.NodeLost
}

// holdBackButOwed: the pod's record says it is back first (ActionRecordBack,
// in bookkeeping); then it no longer counts, and the write it owes takes a slot
// as a new one does. Written now, that write would leave the record
// unwritten for as long as it fails.
func holdBackButOwed(j job, _ *tally) (HoldReason, string, bool) {
	return HeldInFlight, "the pod is back but for a write that restarts it again; recording that it is back first", j.pod.BackButOwed
}

// holdInFlight: the kubelet has not finished the last write. Written again
// now, the pod could show, as the kubelet's first status of the new spec,
// the container of the write in flight running and ready, and be judged
// done just before the kubelet replaces it. A write whose container does
// not run (a pull that fails, a crash loop) is written over at once: an
// undo.
func holdInFlight(j job, _ *tally) (HoldReason, string, bool) {
	c, ok := j.pod.runningInFlight()
	if !ok {
		return "", "", false
	}
	msg := fmt.Sprintf("the kubelet has not finished the last write of %s yet", c)
	if j.pod.ResizeCondition != "" {
		msg += " (" + j.pod.ResizeCondition + ")"
	}
	return HeldInFlight, msg, true
}

// holdChangeInFlight: the kubelet has not acted on someone else's change
// (HeldChangeInFlight).
func holdChangeInFlight(j job, _ *tally) (HoldReason, string, bool) {
	c, ok := j.pod.unacted()
	if !ok {
		return "", "", false
	}
	shows := fmt.Sprintf("still shows %s running", c.StatusImage)
	if !c.Running {
		shows = "is still replacing the container"
	}
	return HeldChangeInFlight, fmt.Sprintf("the pod spec says %s for %s, but the kubelet %s: waiting for it to act on that change",
		c.Image, c.Name, shows), true
}

// holdHandoff: a hot upgrade's handoff comes first (hot.go) and has nothing
// to write. Due for an update, the handoff waits for a write of the old
// slot in flight: an update now would record the latest revision without
// the hot sidecar's image. Owed alone, the set no longer declares the
// sidecar hot, and the pod needs a recreate.
func holdHandoff(j job, _ *tally) (HoldReason, string, bool) {
	if j.u.Action != ActionHandoff || len(j.u.Containers) > 0 {
		return "", "", false
	}
	owed := strings.Join(j.pod.HandoffOwed, ", ")
	if j.action == ActionHandoff {
		return HeldNotUpgradable, fmt.Sprintf(
			"the set no longer declares %s upgraded hot: its hot upgrade cannot end, and the pod needs a recreate", owed), true
	}
	return HeldInFlight, fmt.Sprintf("the handoff of %s waits for the kubelet to finish the last write of its old slot", owed), true
}

// holdOtherRollout: another SidecarSet's rollout has the pod down, or its
// write is still to take it down, and this write would keep it down longer,
// which no budget or slot would count. It goes once the pod is back, unless it writes a sidecar that does not
// serve (Pod.DisruptedBy), or is a handoff, owed alone or the first
// step of an update (updateOf): the old slot it writes has handed its work
// over, and held, the hot upgrade could not end. A pod this rollout
// disrupted already holds its slot and its budgets' disruption.
func holdOtherRollout(j job, _ *tally) (HoldReason, string, bool) {
	p, u := j.pod, j.u
	if len(p.DisruptedBy) == 0 || p.Disrupting || u.Action == ActionHandoff || !u.restartsRunning(p) || u.writesUnserving(p) {
		return "", "", false
	}
	return HeldByOtherRollout, fmt.Sprintf("the rollout of SidecarSet %s has the pod down, or is taking it down; it goes once the pod is back from it",
		strings.Join(p.DisruptedBy, ", ")), true
}

// holdMaxUnavailable: a write that disrupts the pod finds maxUnavailable
// spent. A pod that counts already takes its own place, and only while the
// count is within maxUnavailable.
func holdMaxUnavailable(j job, t *tally) (HoldReason, string, bool) {
	if !j.u.Disrupts || t.room+int(j.own()) > 0 {
		return "", "", false
	}
	return HeldByMaxUnavailable, fmt.Sprintf("maxUnavailable %d reached: %s updating or updated but not ready",
		t.scope.MaxUnavailable, podCount(t.scope.MaxUnavailable-t.room)), true
}

// holdDisruptionBudget: a write that disrupts the pod finds one of its
// budgets spent (exhausted).
func holdDisruptionBudget(j job, t *tally) (HoldReason, string, bool) {
	if !j.u.Disrupts {
		return "", "", false
	}
	if b, ok := exhausted(t.budgets[j.pod.Key], t.spent, j.ownBudget()); ok {
		return HeldByDisruptionBudget, fmt.Sprintf("PodDisruptionBudget %s allows no further disruption now", b.Name), true
	}
	return "", "", false
}

// exhausted returns the first budget that allows no further disruption once
// the ones spent by this plan are counted, but for own, the pod's own
// disruption that the spent ones count already.
func exhausted(budgets []Budget, spent map[string]int32, own int32) (Budget, bool) {
	for _, b := range budgets {
		if b.DisruptionsAllowed-(spent[b.Name]-own) <= 0 {
			return b, true
		}
	}
	return Budget{}, false
}

// stopped reports whether the strategy forbids writing running pods.
func stopped(s v1alpha1.UpdateStrategy) (bool, HoldReason, string) {
	switch {
	case s.Type == v1alpha1.NotUpdateStrategy:
		return true, HeldNotUpdate, "updateStrategy.type is NotUpdate: running pods keep their revision"
	case s.Paused:
		return true, HeldPaused, "updateStrategy.paused is true"
	}
	return false, "", ""
}

func sortHeld(h []Held) {
	slices.SortFunc(h, func(a, b Held) int { return compareKeys(a.Pod, b.Pod) })
}

// KeptBack says why strategy s may keep a pod with podLabels on a revision
// other than the latest, whatever the count of pods, or "" when it lets
// the pod move: the rollout is stopped (NotUpdate, paused), a partition
// above 0 keeps some pods, or the selector leaves the pod out. Next holds
// pods for the same reasons, the partition by count; `kubectl sidecarset
// restart` recreates no pod they may keep, as a new pod takes the latest
// revision at injection. partition reports that the partition keeps it.
func KeptBack(s v1alpha1.UpdateStrategy, podLabels map[string]string) (why string, partition bool) {
	switch {
	case s.Type == v1alpha1.NotUpdateStrategy:
		return "updateStrategy.type is NotUpdate", false
	case s.Paused:
		return "updateStrategy.paused is true", false
	}
	if s.Partition != nil {
		if n, err := intstr.GetScaledValueFromIntOrPercent(s.Partition, 100, true); err != nil || n > 0 {
			return fmt.Sprintf("updateStrategy.partition %s keeps pods on older revisions", s.Partition.String()), true
		}
	}
	if s.Selector != nil {
		if sel, err := metav1.LabelSelectorAsSelector(s.Selector); err != nil || !sel.Matches(labels.Set(podLabels)) {
			return "updateStrategy.selector leaves the pod out", false
		}
	}
	return "", false
}
