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
	// HeldByMaxUnavailable means maxUnavailable pods are down already.
	HeldByMaxUnavailable HoldReason = "MaxUnavailable"
	// HeldByDisruptionBudget means a budget of the pod allows no disruption.
	HeldByDisruptionBudget HoldReason = "DisruptionBudget"
	// HeldNotUpgradable means the pod needs a recreate (Pod.NotUpgradable).
	HeldNotUpgradable HoldReason = "NotUpgradable"
	// HeldPaused means updateStrategy.paused is true.
	HeldPaused HoldReason = "Paused"
	// HeldNotUpdate means updateStrategy.type is NotUpdate.
	HeldNotUpdate HoldReason = "NotUpdate"
	// HeldInFlight means the pod's last write is not done, its sidecar running.
	HeldInFlight HoldReason = "InFlight"
	// HeldByOtherRollout means another set's rollout has the pod down.
	HeldByOtherRollout HoldReason = "OtherRollout"
	// HeldChangeInFlight means someone else changed a running sidecar's image
	// and the kubelet has not acted on it yet: written now, the pod would
	// record as replaced the container about to go anyway. A tag sharing its
	// content may show as another for good: the rollout does not stall on it.
	HeldChangeInFlight HoldReason = "ChangeInFlight"
	// HeldNodeLost means the pod's node is not Ready (Pod.NodeLost): its
	// kubelet would act on every write at once when it is back.
	HeldNodeLost HoldReason = "NodeLost"
)

// Held is a pod that waits.
type Held struct {
	Pod     types.NamespacedName
	Reason  HoldReason
	Message string
}

// A hold keeps a job's write back, and says why; ok is false if it lets it go.
type hold func(j job, t *tally) (reason HoldReason, msg string, ok bool)

// holdChain is every hold on a write Next would make, asked in order: the
// first that keeps a write says why. The pod's node and kubelet come first
// (until the pod can take a write nothing else matters), then the set's
// hot upgrade, another set's rollout, maxUnavailable, and last the budgets.
var holdChain = []hold{
	holdNodeLost,
	holdInFlight,
	holdChangeInFlight,
	holdHandoff,
	holdOtherRollout,
	holdMaxUnavailable,
	holdDisruptionBudget,
}

// tally is what one plan may still spend: the room maxUnavailable leaves,
// and each budget's spent disruptions, counting the plan's own (spend).
// slotless counts the pods counted in no slot the rollout took
// (Pod.slotless).
type tally struct {
	scope    Scope
	room     int
	slotless int
	budgets  map[types.NamespacedName][]Budget
	spent    map[string]int32
}

// newTally starts a plan's tally from scope, pods and budgets.
func newTally(scope Scope, pods []Pod, budgets map[types.NamespacedName][]Budget) *tally {
	t := &tally{scope: scope, room: scope.MaxUnavailable - scope.Unavailable, budgets: budgets, spent: map[string]int32{}}
	for _, p := range pods {
		if p.slotless() {
			t.slotless++
		}
	}
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

// spend counts j's write against maxUnavailable and the pod's budgets.
func (t *tally) spend(j job) {
	if !j.u.Disrupts {
		return
	}
	t.room -= 1 - int(j.own())
	for _, b := range t.budgets[j.pod.Key] {
		t.spent[b.Name] += 1 - j.ownBudget()
	}
}

// own is 1 when j's pod counts already (counted): its write takes that place.
func (j job) own() int32 {
	if j.pod.counted() {
		return 1
	}
	return 0
}

// ownBudget is 1 when j's pod is among its budgets' spent disruptions
// (Disrupting). One that failed Again is not: the disruption controller
// sees it unhealthy itself.
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

// holdInFlight: the kubelet has not finished the last write: its first
// status of a new spec could show that container ready, judged done just
// before it is replaced. One whose container does not run is written over.
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

// holdChangeInFlight: see HeldChangeInFlight.
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

// holdHandoff: a handoff with nothing to write. Due for an update, it waits
// for the old slot's write in flight; owed alone, the set no longer
// declares the sidecar hot, and the pod needs a recreate.
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

// holdOtherRollout: another set's rollout has the pod down, or is taking
// it down, and this write would keep it down unseen by budgets and slots.
// It lets go a handoff (held, the upgrade could not end) and a write into
// a pod down for this set already: its write, or a sidecar of its own that
// fails, which the other set cannot end.
func holdOtherRollout(j job, _ *tally) (HoldReason, string, bool) {
	p, u := j.pod, j.u
	if len(p.DisruptedBy) == 0 || p.Disrupting || u.Action == ActionHandoff || !u.restartsRunning(p) || p.failingSidecar() {
		return "", "", false
	}
	return HeldByOtherRollout, fmt.Sprintf("the rollout of SidecarSet %s has the pod down, or is taking it down; it goes once the pod is back from it",
		strings.Join(p.DisruptedBy, ", ")), true
}

// holdMaxUnavailable: a write that disrupts the pod finds maxUnavailable
// spent; a pod that counts already takes its own place. A write owed within
// the pod's slot, into a Ready pod, waits only while pods counted in no
// slot (slotless) keep the count over maxUnavailable: they serve again, or
// fail and stall the rollout, while pods in slots wait on nothing else.
func holdMaxUnavailable(j job, t *tally) (HoldReason, string, bool) {
	owed := !j.u.Disrupts && t.slotless > 0 && j.pod.PodReady && j.u.restartsRunning(j.pod)
	if !j.u.Disrupts && !owed || t.room+int(j.own()) > 0 {
		return "", "", false
	}
	msg := fmt.Sprintf("maxUnavailable %d reached: %s updating or updated but not ready",
		t.scope.MaxUnavailable, podCount(t.scope.MaxUnavailable-t.room))
	if n := t.scope.UnavailableLost; n > 0 {
		msg += fmt.Sprintf(", %d of them on nodes that are not Ready", n)
	}
	return HeldByMaxUnavailable, msg, true
}

// holdDisruptionBudget: a write that disrupts the pod finds a budget spent.
func holdDisruptionBudget(j job, t *tally) (HoldReason, string, bool) {
	if !j.u.Disrupts {
		return "", "", false
	}
	if b, ok := exhausted(t.budgets[j.pod.Key], t.spent, j.ownBudget()); ok {
		return HeldByDisruptionBudget, fmt.Sprintf("PodDisruptionBudget %s allows no further disruption now", b.Name), true
	}
	return "", "", false
}

// exhausted returns the first budget that allows no further disruption,
// counting spent ones but for own, the pod's own disruption among them.
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

// KeptBack says why strategy s may keep a pod with podLabels on an older
// revision whatever the count of pods, or "": stopped, a partition above 0
// (partition true), or a selector leaving it out. `kubectl sidecarset
// restart` recreates no such pod: a new one would take the latest revision.
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
