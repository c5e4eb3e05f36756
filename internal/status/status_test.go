package status

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/rollout"
)

const generation = 3

var (
	// now has nanoseconds, which Compute drops as the apiserver would.
	now     = metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC))
	nowSec  = metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	hourAgo = metav1.NewTime(nowSec.Add(-time.Hour))

	latest = rollout.Latest{Name: "mysql-sidecars-new", Hash: "new", ImagelessHash: "shape",
		Containers: map[string]string{"exporter": "exporter:v2"}}
)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(nowSec.Add(-d)) }

// mix says how many pods of a fleet are in each state, assigned in this
// order from p01; the rest are on the old revision and ready. The last
// Drifted pods are drifted besides.
type mix struct {
	UpdatedReady, Updating, UpdatedNotReady, NotReady, NotUpgradable, Drifted int
	// WrittenNotReady pods, the last ones before Drifted, are on the latest
	// revision, written while not ready and still so.
	WrittenNotReady int
}

func fleet(total int, m mix) []rollout.Pod {
	var pods []rollout.Pod
	for i := range total {
		p := rollout.Pod{
			Key:    types.NamespacedName{Namespace: "db", Name: fmt.Sprintf("p%02d", i+1)},
			Labels: map[string]string{"app": "db"},
			Record: revision.SetState{Revision: "mysql-sidecars-old", Hash: "old", ImagelessHash: "shape",
				Containers: []revision.ContainerState{{Name: "exporter", Image: "exporter:v1"}}},
			Containers: []rollout.Container{{Name: "exporter", Runs: true, Image: "exporter:v1", Complete: true,
				Recorded: revision.ContainerState{Name: "exporter", Image: "exporter:v1"}}},
			Upgradable: true, PodReady: true, Ready: true,
		}
		switch n := i; {
		case n < m.UpdatedReady:
			p.Updated = true
		case n < m.UpdatedReady+m.Updating:
			// Written while ready, like every pod the rollout wrote here.
			p.Updated, p.Updating, p.Disrupting, p.Ready = true, true, true, false
		case n < m.UpdatedReady+m.Updating+m.UpdatedNotReady:
			p.Updated, p.PodReady, p.Ready, p.Disrupting = true, false, false, true
		case n < m.UpdatedReady+m.Updating+m.UpdatedNotReady+m.NotReady:
			p.PodReady, p.Ready = false, false
		case n < m.UpdatedReady+m.Updating+m.UpdatedNotReady+m.NotReady+m.NotUpgradable:
			p.Upgradable = false
		}
		if i >= total-m.Drifted-m.WrittenNotReady && i < total-m.Drifted {
			p.Updated, p.PodReady, p.Ready = true, false, false
		}
		if p.Updated {
			// As the update wrote and recorded it.
			p.Containers[0].Image, p.Containers[0].Recorded.Image = "exporter:v2", "exporter:v2"
		}
		if i >= total-m.Drifted {
			p.Drifted = []string{"exporter"}
		}
		p.Available = p.Ready
		pods = append(pods, p)
	}
	return pods
}

func intOrString(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}

func rolling(partition string) v1alpha1.UpdateStrategy {
	return v1alpha1.UpdateStrategy{Type: v1alpha1.RollingUpdateStrategy, Partition: intOrString(partition),
		MaxUnavailable: intOrString("1"), ProgressDeadlineSeconds: ptr.To[int32](600)}
}

// cond is a condition's status, reason, message and transition time.
type cond struct {
	status  metav1.ConditionStatus
	reason  string
	message string
	since   metav1.Time
}

// conds returns Progressing, Complete and Stalled as given, and
// Reconciling as Progressing.
func conds(progressing, complete, stalled cond) []metav1.Condition {
	var out []metav1.Condition
	for _, x := range []struct {
		t string
		c cond
	}{{v1alpha1.ConditionProgressing, progressing}, {v1alpha1.ConditionComplete, complete}, {v1alpha1.ConditionStalled, stalled},
		{v1alpha1.ConditionReconciling, progressing}} {
		out = append(out, metav1.Condition{Type: x.t, Status: x.c.status, Reason: x.c.reason, Message: x.c.message,
			LastTransitionTime: x.c.since, ObservedGeneration: generation})
	}
	return out
}

const (
	yes = metav1.ConditionTrue
	no  = metav1.ConditionFalse
)

// statusOf returns a status with these counts and conditions.
func statusOf(matched, updated, ready, updatedReady int32, conditions []metav1.Condition) v1alpha1.SidecarSetStatus {
	return v1alpha1.SidecarSetStatus{ObservedGeneration: generation, LatestRevision: latest.Name,
		MatchedPods: matched, UpdatedPods: updated, ReadyPods: ready, UpdatedReadyPods: updatedReady, Conditions: conditions}
}

// updatingConds are Progressing True, Complete and Stalled False, all with
// reason PodsUpdating and message msg, since an hour ago.
func updatingConds(msg string) []metav1.Condition {
	return conds(cond{yes, ReasonUpdating, msg, hourAgo}, cond{no, ReasonUpdating, msg, hourAgo}, cond{no, ReasonUpdating, msg, hourAgo})
}

// budgetOverTwo is one budget, db/one, over p01 and p02.
func budgetOverTwo(allowed, spent int32) map[types.NamespacedName][]rollout.Budget {
	b := []rollout.Budget{{Name: "db/one", DisruptionsAllowed: allowed, Spent: spent}}
	return map[types.NamespacedName][]rollout.Budget{{Namespace: "db", Name: "p01"}: b, {Namespace: "db", Name: "p02"}: b}
}

// owesResize makes p's write in flight one that lacks only its resize.
func owesResize(p *rollout.Pod) {
	p.Updating, p.Ready, p.Available = true, false, false
	p.Containers[0].ResizeOwed = true
	p.ResizeOwed = []rollout.ContainerResources{{Name: "exporter"}}
}

// TestCompute mirrors the worked cases in Compute's doc comment, then more.
// leftConds are the conditions of a rollout with nothing left to write or
// wait for that is not complete, for reason, after an hour of
// progressing: Progressing turns False now, Complete and Stalled stay
// False.
func leftConds(reason, msg string) []metav1.Condition {
	return conds(cond{no, reason, msg, nowSec}, cond{no, reason, msg, hourAgo}, cond{no, reason, msg, hourAgo})
}

func TestCompute(t *testing.T) {
	const (
		start    = "0 of 12 pods updated and ready; partition keeps 6"
		halfway  = "3 of 12 pods updated and ready; partition keeps 6; 1 updating"
		stallMsg = "no progress within progressDeadlineSeconds (600s): " + halfway
	)
	const rewritten = "12 of 12 pods updated and ready; 2 run sidecar images admission rewrote from the declared ones"
	progressing := conds(cond{yes, ReasonUpdating, halfway, hourAgo}, cond{no, ReasonUpdating, halfway, hourAgo}, cond{no, ReasonUpdating, halfway, hourAgo})
	stalledConds := conds(cond{no, ReasonProgressDeadlineExceeded, stallMsg, hourAgo}, cond{no, ReasonProgressDeadlineExceeded, stallMsg, hourAgo}, cond{yes, ReasonProgressDeadlineExceeded, stallMsg, hourAgo})
	paused := rolling("50%")
	paused.Paused = true
	notUpdate := rolling("50%")
	notUpdate.Type = v1alpha1.NotUpdateStrategy

	tests := []struct {
		name         string
		pods         []rollout.Pod
		strategy     v1alpha1.UpdateStrategy
		unmanaged    int32
		skipped      int32
		budgets      map[types.NamespacedName][]rollout.Budget
		previous     v1alpha1.SidecarSetStatus
		lastProgress metav1.Time
		// progress is the lastProgressTime wanted, zero for none.
		progress metav1.Time
		want     Result
	}{
		{
			name:     "partition 50%, 6 updated and ready: complete",
			pods:     fleet(12, mix{UpdatedReady: 6}),
			strategy: rolling("50%"),
			previous: statusOf(12, 6, 12, 5, progressing),
			want: Result{
				Status: statusOf(12, 6, 12, 6, conds(
					cond{no, ReasonPartitionReached, "6 of 12 pods updated and ready; partition keeps 6", nowSec},
					cond{yes, ReasonPartitionReached, "6 of 12 pods updated and ready; partition keeps 6", nowSec},
					cond{no, ReasonPartitionReached, "6 of 12 pods updated and ready; partition keeps 6", hourAgo})),
			},
		},
		{
			name:         "3 updated and ready, 1 updating, nothing to write, last progress 599s ago",
			pods:         fleet(12, mix{UpdatedReady: 3, Updating: 1}),
			strategy:     rolling("50%"),
			previous:     statusOf(12, 4, 11, 3, progressing),
			lastProgress: ago(599 * time.Second),
			want: Result{
				Status:       statusOf(12, 4, 11, 3, progressing),
				RecheckAfter: time.Second,
			},
			progress: ago(599 * time.Second),
		},
		{
			name:         "same, last progress 600s ago: stalled",
			pods:         fleet(12, mix{UpdatedReady: 3, Updating: 1}),
			strategy:     rolling("50%"),
			previous:     statusOf(12, 4, 11, 3, progressing),
			lastProgress: ago(600 * time.Second),
			want: Result{
				Status: statusOf(12, 4, 11, 3, conds(
					cond{no, ReasonProgressDeadlineExceeded, stallMsg, nowSec},
					cond{no, ReasonProgressDeadlineExceeded, stallMsg, hourAgo},
					cond{yes, ReasonProgressDeadlineExceeded, stallMsg, nowSec})),
				PauseRollout: true,
			},
			progress: ago(600 * time.Second),
		},
		{
			name:         "same, but updatedReadyPods grew from 2 to 3: progress",
			pods:         fleet(12, mix{UpdatedReady: 3, Updating: 1}),
			strategy:     rolling("50%"),
			previous:     statusOf(12, 4, 11, 2, progressing),
			lastProgress: ago(600 * time.Second),
			want: Result{
				Status:       statusOf(12, 4, 11, 3, progressing),
				RecheckAfter: 600 * time.Second,
			},
			progress: nowSec,
		},
		{
			name:         "stalled, then paused by the controller: Stalled stays",
			pods:         fleet(12, mix{UpdatedReady: 3, Updating: 1}),
			strategy:     paused,
			previous:     statusOf(12, 4, 11, 3, stalledConds),
			lastProgress: ago(2 * time.Hour),
			want: Result{
				Status: statusOf(12, 4, 11, 3, conds(
					cond{no, ReasonPaused, "updateStrategy.paused is true: " + halfway, hourAgo},
					cond{no, ReasonPaused, "updateStrategy.paused is true: " + halfway, hourAgo},
					cond{yes, ReasonProgressDeadlineExceeded, stallMsg, hourAgo})),
			},
		},
		{
			name:     "paused after a stall, then resumed: the clock restarts",
			pods:     fleet(12, mix{UpdatedReady: 3, Updating: 1}),
			strategy: rolling("50%"),
			previous: statusOf(12, 4, 11, 3, conds(
				cond{no, ReasonPaused, "updateStrategy.paused is true: " + halfway, hourAgo},
				cond{no, ReasonPaused, "updateStrategy.paused is true: " + halfway, hourAgo},
				cond{yes, ReasonProgressDeadlineExceeded, stallMsg, hourAgo})),
			lastProgress: ago(2 * time.Hour),
			want: Result{
				Status: statusOf(12, 4, 11, 3, conds(
					cond{yes, ReasonUpdating, halfway, nowSec},
					cond{no, ReasonUpdating, halfway, hourAgo},
					cond{no, ReasonUpdating, halfway, nowSec})),
				RecheckAfter: 600 * time.Second,
			},
			progress: nowSec,
		},
		{
			name:     "a stall survives a manager restart that lost LastProgress",
			pods:     fleet(12, mix{UpdatedReady: 3, Updating: 1}),
			strategy: rolling("50%"),
			previous: statusOf(12, 4, 11, 3, stalledConds),
			want: Result{
				Status:       statusOf(12, 4, 11, 3, stalledConds),
				PauseRollout: true,
			},
			progress: nowSec,
		},
		{
			name:     "a new revision while paused after a stall clears Stalled",
			pods:     fleet(12, mix{}),
			strategy: paused,
			previous: func() v1alpha1.SidecarSetStatus {
				s := statusOf(12, 4, 11, 3, stalledConds)
				s.LatestRevision = "mysql-sidecars-old"
				return s
			}(),
			want: Result{
				Status: statusOf(12, 0, 12, 0, conds(
					cond{no, ReasonPaused, "updateStrategy.paused is true: " + start, hourAgo},
					cond{no, ReasonPaused, "updateStrategy.paused is true: " + start, hourAgo},
					cond{no, ReasonPaused, "updateStrategy.paused is true: " + start, nowSec})),
			},
		},
		{
			name:     "first status: the rollout starts and writes p01",
			pods:     fleet(12, mix{}),
			strategy: rolling("50%"),
			want: Result{
				Status: statusOf(12, 0, 12, 0, conds(
					cond{yes, ReasonUpdating, start, nowSec},
					cond{no, ReasonUpdating, start, nowSec},
					cond{no, ReasonUpdating, start, nowSec})),
				RecheckAfter: 600 * time.Second,
			},
			progress: nowSec,
		},
		{
			name:     "a write is progress even when no count moved",
			pods:     fleet(12, mix{UpdatedReady: 3}),
			strategy: rolling("50%"),
			previous: statusOf(12, 3, 12, 3, progressing),
			// Nothing grew, but Next writes p04.
			lastProgress: ago(700 * time.Second),
			want: Result{
				Status: statusOf(12, 3, 12, 3, conds(
					cond{yes, ReasonUpdating, "3 of 12 pods updated and ready; partition keeps 6", hourAgo},
					cond{no, ReasonUpdating, "3 of 12 pods updated and ready; partition keeps 6", hourAgo},
					cond{no, ReasonUpdating, "3 of 12 pods updated and ready; partition keeps 6", hourAgo})),
				RecheckAfter: 600 * time.Second,
			},
			progress: nowSec,
		},
		{
			name: "progressDeadlineSeconds 60",
			pods: fleet(12, mix{UpdatedReady: 3, Updating: 1}),
			strategy: func() v1alpha1.UpdateStrategy {
				s := rolling("50%")
				s.ProgressDeadlineSeconds = ptr.To[int32](60)
				return s
			}(),
			previous: statusOf(12, 4, 11, 3, progressing),
			// Unset: the default 600s would not have passed.
			lastProgress: ago(61 * time.Second),
			want: Result{
				Status: statusOf(12, 4, 11, 3, conds(
					cond{no, ReasonProgressDeadlineExceeded, "no progress within progressDeadlineSeconds (60s): " + halfway, nowSec},
					cond{no, ReasonProgressDeadlineExceeded, "no progress within progressDeadlineSeconds (60s): " + halfway, hourAgo},
					cond{yes, ReasonProgressDeadlineExceeded, "no progress within progressDeadlineSeconds (60s): " + halfway, nowSec})),
				PauseRollout: true,
			},
			progress: ago(61 * time.Second),
		},
		{
			name:     "NotUpdate, nothing updating: complete",
			pods:     fleet(12, mix{UpdatedReady: 4}),
			strategy: notUpdate,
			want: Result{
				Status: statusOf(12, 4, 12, 4, conds(
					cond{no, ReasonComplete, "updateStrategy.type is NotUpdate, running pods keep their revision: 4 of 12 pods updated and ready", nowSec},
					cond{yes, ReasonComplete, "updateStrategy.type is NotUpdate, running pods keep their revision: 4 of 12 pods updated and ready", nowSec},
					cond{no, ReasonComplete, "updateStrategy.type is NotUpdate, running pods keep their revision: 4 of 12 pods updated and ready", nowSec})),
			},
		},
		{
			name:     "NotUpdate, a pod still finishing an earlier write",
			pods:     fleet(4, mix{Updating: 1}),
			strategy: notUpdate,
			want: Result{
				Status: statusOf(4, 1, 3, 0, conds(
					cond{no, ReasonNotUpdate, "updateStrategy.type is NotUpdate, running pods keep their revision: 0 of 4 pods updated and ready; 1 updating", nowSec},
					cond{no, ReasonNotUpdate, "updateStrategy.type is NotUpdate, running pods keep their revision: 0 of 4 pods updated and ready; 1 updating", nowSec},
					cond{no, ReasonNotUpdate, "updateStrategy.type is NotUpdate, running pods keep their revision: 0 of 4 pods updated and ready; 1 updating", nowSec})),
			},
		},
		{
			name:      "every count, and the message names what holds the rollout",
			pods:      fleet(12, mix{UpdatedReady: 2, UpdatedNotReady: 1, NotUpgradable: 2, Drifted: 1}),
			strategy:  func() v1alpha1.UpdateStrategy { s := rolling("0"); s.MaxUnavailable = intOrString("3"); return s }(),
			unmanaged: 3,
			skipped:   2,
			budgets: map[types.NamespacedName][]rollout.Budget{
				{Namespace: "db", Name: "p06"}: {{Name: "db/web", DisruptionsAllowed: 0}},
				{Namespace: "db", Name: "p07"}: {{Name: "db/web", DisruptionsAllowed: 0}},
			},
			want: Result{
				Status: v1alpha1.SidecarSetStatus{ObservedGeneration: generation, LatestRevision: latest.Name,
					MatchedPods: 12, UpdatedPods: 3, ReadyPods: 11, UpdatedReadyPods: 2, NotUpgradablePods: 2,
					DriftedPods: 1, UnmanagedPods: 3, SkippedPods: 2,
					Conditions: conds(
						cond{yes, ReasonUpdating, "2 of 12 pods updated and ready; 1 updated but not ready; 2 not upgradable (need a recreate); 2 held by a PodDisruptionBudget; 1 drifted", nowSec},
						cond{no, ReasonUpdating, "2 of 12 pods updated and ready; 1 updated but not ready; 2 not upgradable (need a recreate); 2 held by a PodDisruptionBudget; 1 drifted", nowSec},
						cond{no, ReasonUpdating, "2 of 12 pods updated and ready; 1 updated but not ready; 2 not upgradable (need a recreate); 2 held by a PodDisruptionBudget; 1 drifted", nowSec}),
				},
				RecheckAfter: 600 * time.Second,
			},
			progress: nowSec,
		},
		{
			name: "selector: counted within the selected pods",
			pods: func() []rollout.Pod {
				pods := fleet(12, mix{UpdatedReady: 2})
				for i := range 4 {
					pods[i].Labels = map[string]string{"app": "db", "zone": "a"}
				}
				return pods
			}(),
			strategy: func() v1alpha1.UpdateStrategy {
				s := rolling("50%")
				s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}
				return s
			}(),
			want: Result{
				Status: statusOf(12, 2, 12, 2, conds(
					cond{no, ReasonPartitionReached, "2 of 4 selected pods updated and ready; partition keeps 2", nowSec},
					cond{yes, ReasonPartitionReached, "2 of 4 selected pods updated and ready; partition keeps 2", nowSec},
					cond{no, ReasonPartitionReached, "2 of 4 selected pods updated and ready; partition keeps 2", nowSec})),
			},
		},
		{
			name:     "not upgradable pods are reported, not waited on, and keep it from completing",
			pods:     fleet(4, mix{UpdatedReady: 3, NotUpgradable: 1}),
			strategy: rolling("0"),
			previous: statusOf(4, 3, 4, 3, conds(
				cond{yes, ReasonUpdating, "", hourAgo}, cond{no, ReasonUpdating, "", hourAgo}, cond{no, ReasonUpdating, "", hourAgo})),
			lastProgress: ago(time.Minute),
			want: Result{
				Status: func() v1alpha1.SidecarSetStatus {
					s := statusOf(4, 3, 4, 3, leftConds(ReasonPodsNeedRecreate, "3 of 4 pods updated and ready; 1 not upgradable (need a recreate)"))
					s.NotUpgradablePods = 1
					return s
				}(),
			},
		},
		{
			// Defect: pods written while not ready held the rollout for
			// ever; they are reported, not waited on.
			name:         "pods written while not ready and still so are not waited on, and keep it from completing",
			pods:         fleet(12, mix{UpdatedReady: 10, WrittenNotReady: 2}),
			strategy:     rolling("0"),
			previous:     statusOf(12, 12, 10, 10, progressing),
			lastProgress: ago(time.Hour),
			want: Result{
				Status: statusOf(12, 12, 10, 10, leftConds(ReasonPodsNotReady, "10 of 12 pods updated and ready; 2 updated but not ready")),
			},
		},
		{
			// Defect: a stall outside a rollout. A new pod that is not
			// ready (injected, never written) is no rollout work: no clock,
			// no stall, however long ago the last progress was.
			name:         "a complete set with a new pod that is not ready does not stall, and is not complete",
			pods:         append(fleet(3, mix{UpdatedReady: 3}), rollout.Pod{Key: types.NamespacedName{Namespace: "db", Name: "p04"}, Updated: true, Upgradable: true}),
			strategy:     rolling("0"),
			previous:     statusOf(4, 4, 3, 3, conds(cond{no, ReasonComplete, "", hourAgo}, cond{yes, ReasonComplete, "", hourAgo}, cond{no, ReasonComplete, "", hourAgo})),
			lastProgress: ago(2 * time.Hour),
			want: Result{
				Status: statusOf(4, 4, 3, 3, conds(
					cond{no, ReasonPodsNotReady, "3 of 4 pods updated and ready; 1 updated but not ready", hourAgo},
					cond{no, ReasonPodsNotReady, "3 of 4 pods updated and ready; 1 updated but not ready", nowSec},
					cond{no, ReasonPodsNotReady, "3 of 4 pods updated and ready; 1 updated but not ready", hourAgo})),
			},
		},
		{
			// Found by review: a pod written while not ready, ready now for
			// less than minReadySeconds, was neither waited for nor kept
			// the set from saying Complete.
			name: "a pod ready for less than minReadySeconds keeps it from completing",
			pods: func() []rollout.Pod {
				ps := fleet(3, mix{UpdatedReady: 3})
				ps[2].Available = false
				return ps
			}(),
			strategy:     rolling("0"),
			previous:     statusOf(3, 3, 3, 2, progressing),
			lastProgress: ago(time.Hour),
			want: Result{
				Status: statusOf(3, 3, 3, 2, leftConds(ReasonPodsNotReady, "2 of 3 pods updated and ready; 1 ready for less than minReadySeconds")),
			},
		},
		{
			// Defect: a pod written while not ready that turned ready and
			// waits out minReadySeconds said PodsNotReady, and status -w
			// exited seconds before the set said Complete. It comes back
			// by itself: the rollout is progressing.
			name: "a pod back from its write within minReadySeconds is progress",
			pods: func() []rollout.Pod {
				ps := fleet(3, mix{UpdatedReady: 3})
				ps[2].Available, ps[2].ReleaseAt = false, now.Add(3*time.Second)
				ps[2].Record.Write = &revision.Write{At: new(metav1.NewMicroTime(now.Add(-time.Minute))), MinReadySeconds: 10}
				return ps
			}(),
			strategy:     rolling("0"),
			previous:     statusOf(3, 3, 3, 2, progressing),
			lastProgress: ago(time.Hour),
			want: Result{
				Status: statusOf(3, 3, 3, 2, updatingConds("2 of 3 pods updated and ready; 1 ready for less than minReadySeconds")),
			},
		},
		{
			// Defect: a pod on a lost node was written, never acted on,
			// and the rollout stalled and paused itself.
			name: "a due pod on a lost node is not waited on, and keeps it from completing",
			pods: func() []rollout.Pod {
				ps := fleet(3, mix{UpdatedReady: 2})
				ps[2].NodeLost, ps[2].PodReady, ps[2].Ready, ps[2].Available = true, false, false, false
				return ps
			}(),
			strategy:     rolling("0"),
			previous:     statusOf(3, 2, 2, 2, progressing),
			lastProgress: ago(time.Hour),
			want: Result{
				Status: statusOf(3, 2, 2, 2, leftConds(ReasonPodsOnLostNodes, "2 of 3 pods updated and ready; 1 on nodes that are not Ready")),
			},
		},
		{
			// The rollout's own pod, down on a lost node, keeps its slot;
			// the pods it holds back are not stall work.
			name: "due pods held for a slot that a pod on a lost node keeps do not stall",
			pods: func() []rollout.Pod {
				ps := fleet(3, mix{UpdatedNotReady: 1})
				ps[0].NodeLost = true
				return ps
			}(),
			strategy:     rolling("0"),
			previous:     statusOf(3, 1, 2, 0, progressing),
			lastProgress: ago(time.Hour),
			want: Result{
				Status: statusOf(3, 1, 2, 0, updatingConds("0 of 3 pods updated and ready; 1 updated but not ready; 1 keeps a maxUnavailable slot on a node that is not Ready")),
			},
		},
		{
			// A budget that allows nothing is not the rollout's failure: it
			// waits, says so, and does not stall and pause itself.
			name:         "due pods held by a budget alone do not stall",
			pods:         fleet(2, mix{}),
			strategy:     rolling("0"),
			budgets:      budgetOverTwo(0, 0),
			previous:     statusOf(2, 0, 2, 0, updatingConds("")),
			lastProgress: ago(2 * time.Hour),
			want: Result{
				Status: statusOf(2, 0, 2, 0, updatingConds("0 of 2 pods updated and ready; 2 held by a PodDisruptionBudget")),
			},
		},
		{
			// Defect: a pod on the latest revision, ready, with a write
			// still owed of its update (here a resize that did not land;
			// the handoff of a hot upgrade alike) counted as a write in
			// flight, though only a budget spent by other sets' rollouts
			// held it: the rollout stalled and paused itself (TestModel
			// seed 10434408931668961224).
			name: "an owed write held by a budget alone does not stall",
			pods: func() []rollout.Pod {
				ps := fleet(2, mix{UpdatedReady: 1})
				owesResize(&ps[0])
				return ps
			}(),
			strategy:     rolling("0"),
			budgets:      budgetOverTwo(1, 1),
			previous:     statusOf(2, 1, 1, 0, updatingConds("")),
			lastProgress: ago(2 * time.Hour),
			want: Result{
				Status: statusOf(2, 1, 1, 0, updatingConds("0 of 2 pods updated and ready; 1 updating; 2 held by a PodDisruptionBudget")),
			},
		},
		{
			// Defect: a due pod with an earlier write still in flight, held
			// by a budget alone, was excused as a write in flight but still
			// counted as a due pod that nothing excused: the rollout stalled.
			name: "a due pod with a write in flight held by a budget alone does not stall",
			pods: func() []rollout.Pod {
				ps := fleet(2, mix{})
				owesResize(&ps[0])
				ps[0].Containers[0].InFlight = true
				return ps
			}(),
			strategy:     rolling("0"),
			budgets:      budgetOverTwo(0, 0),
			previous:     statusOf(2, 0, 1, 0, updatingConds("")),
			lastProgress: ago(2 * time.Hour),
			want: Result{
				Status: statusOf(2, 0, 1, 0, updatingConds("0 of 2 pods updated and ready; 1 updating; 2 held by a PodDisruptionBudget")),
			},
		},
		{
			// Pods another set's rollout has down wait for it; that is not
			// this rollout's failure either.
			name: "due pods held by another set's rollout alone do not stall",
			pods: func() []rollout.Pod {
				ps := fleet(2, mix{})
				for i := range ps {
					ps[i].PodReady, ps[i].Ready, ps[i].DisruptedBy = false, false, []string{"other"}
					// Their sidecars serve: the pods are down for the
					// other set alone.
					for j := range ps[i].Containers {
						ps[i].Containers[j].Running, ps[i].Containers[j].Ready = true, true
					}
				}
				return ps
			}(),
			strategy:     rolling("0"),
			previous:     statusOf(2, 0, 2, 0, conds(cond{yes, ReasonUpdating, "", hourAgo}, cond{no, ReasonUpdating, "", hourAgo}, cond{no, ReasonUpdating, "", hourAgo})),
			lastProgress: ago(2 * time.Hour),
			want: Result{
				Status: statusOf(2, 0, 0, 0, conds(
					cond{yes, ReasonUpdating, "0 of 2 pods updated and ready; 2 held for the rollout of SidecarSet other", hourAgo},
					cond{no, ReasonUpdating, "0 of 2 pods updated and ready; 2 held for the rollout of SidecarSet other", hourAgo},
					cond{no, ReasonUpdating, "0 of 2 pods updated and ready; 2 held for the rollout of SidecarSet other", hourAgo})),
			},
		},
		{
			// A due pod whose hand edit the kubelet has not acted on waits
			// for it and says so, but does not stall the rollout: the
			// kubelet may show the old tag of a content for as long as the
			// container runs.
			name: "due pods waiting for the kubelet to act on a hand edit do not stall",
			pods: func() []rollout.Pod {
				ps := fleet(2, mix{Drifted: 2})
				for i := range ps {
					ps[i].Containers[0].Image, ps[i].Containers[0].StatusImage, ps[i].Containers[0].Unacted = "exporter:debug", "exporter:v1", true
				}
				return ps
			}(),
			strategy:     rolling("0"),
			previous:     statusOf(2, 0, 2, 0, conds(cond{yes, ReasonUpdating, "", hourAgo}, cond{no, ReasonUpdating, "", hourAgo}, cond{no, ReasonUpdating, "", hourAgo})),
			lastProgress: ago(2 * time.Hour),
			want: Result{
				Status: func() v1alpha1.SidecarSetStatus {
					msg := "0 of 2 pods updated and ready; 2 wait for the kubelet to act on an image changed by someone else; 2 drifted"
					s := statusOf(2, 0, 2, 0, conds(cond{yes, ReasonUpdating, msg, hourAgo}, cond{no, ReasonUpdating, msg, hourAgo}, cond{no, ReasonUpdating, msg, hourAgo}))
					s.DriftedPods = 2
					return s
				}(),
			},
		},
		{
			// Defect: progress time lived in memory. A restarted manager
			// reads it from the status and stalls on time.
			name:         "the deadline runs from lastProgressTime in the status",
			pods:         fleet(12, mix{UpdatedReady: 3, Updating: 1}),
			strategy:     rolling("50%"),
			previous:     statusOf(12, 4, 11, 3, progressing),
			lastProgress: ago(601 * time.Second),
			progress:     ago(601 * time.Second),
			want: Result{
				Status: statusOf(12, 4, 11, 3, conds(
					cond{no, ReasonProgressDeadlineExceeded, stallMsg, nowSec},
					cond{no, ReasonProgressDeadlineExceeded, stallMsg, hourAgo},
					cond{yes, ReasonProgressDeadlineExceeded, stallMsg, nowSec})),
				PauseRollout: true,
			},
		},
		{
			name: "all updated and ready, 2 on an image admission moved to a mirror: complete, and told",
			pods: func() []rollout.Pod {
				pods := fleet(12, mix{UpdatedReady: 12})
				for _, p := range pods[:2] {
					p.Containers[0].Image, p.Containers[0].Recorded.Image = "mirror.example/exporter:v2", "mirror.example/exporter:v2"
				}
				return pods
			}(),
			strategy: rolling("0"),
			previous: statusOf(12, 12, 12, 12, nil),
			want: Result{
				Status: statusOf(12, 12, 12, 12, conds(
					cond{no, ReasonComplete, rewritten, nowSec},
					cond{yes, ReasonComplete, rewritten, nowSec},
					cond{no, ReasonComplete, rewritten, nowSec})),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := rollout.Next(rollout.Input{Latest: latest, Pods: tt.pods, Strategy: tt.strategy, Budgets: tt.budgets})
			if err != nil {
				t.Fatal(err)
			}
			if !tt.lastProgress.IsZero() {
				tt.previous.LastProgressTime = &tt.lastProgress
			}
			if !tt.progress.IsZero() {
				tt.want.Status.LastProgressTime = &tt.progress
			}
			if meta.IsStatusConditionTrue(tt.want.Status.Conditions, v1alpha1.ConditionComplete) && tt.strategy.Type != v1alpha1.NotUpdateStrategy {
				tt.want.Status.CompletedRevision = latest.Name
			}
			previous := tt.previous.DeepCopy()
			got := Compute(Input{
				Generation: generation, Latest: latest, Pods: tt.pods, Plan: plan, Strategy: tt.strategy,
				Unmanaged: tt.unmanaged, Skipped: tt.skipped, Previous: tt.previous, Now: now,
			})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Compute (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(previous, &tt.previous); diff != "" {
				t.Errorf("Compute modified the previous status (-before +after):\n%s", diff)
			}
		})
	}
}

// Conditions of types Compute does not own are left alone.
func TestComputeKeepsOtherConditions(t *testing.T) {
	other := metav1.Condition{Type: "Example", Status: yes, Reason: "Because", LastTransitionTime: hourAgo}
	pods := fleet(2, mix{UpdatedReady: 2})
	plan, err := rollout.Next(rollout.Input{Latest: latest, Pods: pods, Strategy: rolling("0")})
	if err != nil {
		t.Fatal(err)
	}
	got := Compute(Input{Generation: generation, Latest: latest, Pods: pods, Plan: plan, Strategy: rolling("0"),
		Previous: v1alpha1.SidecarSetStatus{Conditions: []metav1.Condition{other}}, Now: now})
	if diff := cmp.Diff(other, got.Status.Conditions[0]); diff != "" {
		t.Errorf("first condition (-want +got):\n%s", diff)
	}
	if len(got.Status.Conditions) != 5 {
		t.Errorf("conditions = %d, want the other one and Compute's four", len(got.Status.Conditions))
	}
}

// Fed its own output a little later, with nothing moved, Compute returns a
// status Equal to it: the controller does not write again.
func TestComputeIsStable(t *testing.T) {
	pods := fleet(12, mix{UpdatedReady: 3, Updating: 1})
	s := rolling("50%")
	plan, err := rollout.Next(rollout.Input{Latest: latest, Pods: pods, Strategy: s})
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Generation: generation, Latest: latest, Pods: pods, Plan: plan, Strategy: s, Now: now}
	first := Compute(in)
	in.Previous, in.Now = first.Status, metav1.NewTime(now.Add(10*time.Second))
	second := Compute(in)
	if !Equal(first.Status, second.Status) {
		t.Errorf("second Compute differs:\n%s", cmp.Diff(first.Status, second.Status))
	}
	if first.Status.LastProgressTime == nil || second.RecheckAfter != 590*time.Second {
		t.Errorf("first lastProgressTime %v, second RecheckAfter %v, want a time and 590s", first.Status.LastProgressTime, second.RecheckAfter)
	}
}

func TestEqual(t *testing.T) {
	base := statusOf(12, 6, 12, 6, conds(
		cond{no, ReasonComplete, "done", hourAgo}, cond{yes, ReasonComplete, "done", hourAgo}, cond{no, ReasonComplete, "done", hourAgo}))
	tests := []struct {
		name   string
		change func(s *v1alpha1.SidecarSetStatus)
		want   bool
	}{
		{"identical", func(*v1alpha1.SidecarSetStatus) {}, true},
		{"lastTransitionTime only", func(s *v1alpha1.SidecarSetStatus) { s.Conditions[1].LastTransitionTime = now }, true},
		{"same instant in another location", func(s *v1alpha1.SidecarSetStatus) {
			s.Conditions[0].LastTransitionTime = metav1.NewTime(hourAgo.In(time.FixedZone("KST", 9*3600)))
		}, true},
		{"conditions in another order", func(s *v1alpha1.SidecarSetStatus) {
			s.Conditions[0], s.Conditions[2] = s.Conditions[2], s.Conditions[0]
		}, true},
		{"a count", func(s *v1alpha1.SidecarSetStatus) { s.ReadyPods = 11 }, false},
		{"observedGeneration", func(s *v1alpha1.SidecarSetStatus) { s.ObservedGeneration++ }, false},
		{"latestRevision", func(s *v1alpha1.SidecarSetStatus) { s.LatestRevision = "other" }, false},
		{"a condition's status", func(s *v1alpha1.SidecarSetStatus) { s.Conditions[1].Status = no }, false},
		{"a condition's reason", func(s *v1alpha1.SidecarSetStatus) { s.Conditions[1].Reason = ReasonUpdating }, false},
		{"a condition's message", func(s *v1alpha1.SidecarSetStatus) { s.Conditions[1].Message = "7 of 12" }, false},
		{"a condition's observedGeneration", func(s *v1alpha1.SidecarSetStatus) { s.Conditions[1].ObservedGeneration++ }, false},
		{"a condition fewer", func(s *v1alpha1.SidecarSetStatus) { s.Conditions = s.Conditions[:2] }, false},
		{"a condition replaced by another type", func(s *v1alpha1.SidecarSetStatus) { s.Conditions[2].Type = "Other" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed := base.DeepCopy()
			tt.change(changed)
			if got := Equal(base, *changed); got != tt.want {
				t.Errorf("Equal = %v, want %v", got, tt.want)
			}
			if got := Equal(*changed, base); got != tt.want {
				t.Errorf("Equal, swapped = %v, want %v", got, tt.want)
			}
		})
	}
}
