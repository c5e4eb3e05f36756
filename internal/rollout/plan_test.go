package rollout

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/imageref"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// planLatest is the revision the plan tests move pods to: exporter:v1 →
// exporter:v2, nothing else changed.
// planNow is when TestNext's plans are made.
var planNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var planLatest = Latest{
	Name:          setName + "-new",
	Hash:          "new",
	ImagelessHash: "shape",
	Containers:    map[string]string{"exporter": "exporter:v2"},
}

type opt func(*Pod)

// mk returns a classified pod on the old revision, ready and upgradable,
// then applies opts.
func mk(name string, opts ...opt) Pod {
	rc := revision.ContainerState{Name: "exporter", Image: "exporter:v1"}
	p := Pod{
		Key:    key(name),
		Labels: map[string]string{"app": "db"},
		Record: revision.SetState{Revision: setName + "-old", Hash: "old", ImagelessHash: "shape", Containers: []revision.ContainerState{rc}},
		Containers: []Container{{Name: "exporter", Runs: true, ContainerID: containerID(name, 1), Image: "exporter:v1",
			ImageID: imageID("exporter:v1"), Recorded: rc, Complete: true}},
		Upgradable: true,
		PodReady:   true,
		Ready:      true,
	}
	for _, o := range opts {
		o(&p)
	}
	// As Classify derives them.
	switch w := p.Record.Write; {
	case w == nil && p.Record.Released != nil:
		p.Again = p.Record.Released.WasReady && p.Updated && !p.Ready
	case w == nil:
		p.Disrupting = p.Updating
	case w.WasReady:
		p.Disrupting, p.Back = !p.Ready, p.Ready
	default:
		p.Back = !p.Updating
		p.Disrupting = p.PodReady && p.Updating
	}
	p.Available = p.Ready
	return p
}

// containerID is the ID of a pod's n-th container instance.
func containerID(pod string, n int) string {
	return fmt.Sprintf("containerd://%s-%d", pod, n)
}

// updated: on the latest revision, swapped by the kubelet, ready, and its
// record settled since.
func updated(p *Pod) {
	rc := revision.ContainerState{Name: "exporter", Image: "exporter:v2"}
	p.Record = revision.SetState{Revision: planLatest.Name, Hash: planLatest.Hash, ImagelessHash: planLatest.ImagelessHash,
		Containers: []revision.ContainerState{rc}}
	p.Containers = []Container{{Name: "exporter", Runs: true, ContainerID: containerID(p.Key.Name, 2), Image: "exporter:v2",
		ImageID: imageID("exporter:v2"), Running: true, Recorded: rc, Complete: true}}
	p.Updated = true
}

// updating: written to the latest revision while ready, the kubelet has not
// swapped.
func updating(p *Pod) {
	rc := revision.ContainerState{Name: "exporter", Image: "exporter:v2", PreviousImageID: imageID("exporter:v1"),
		PreviousContainerID: containerID(p.Key.Name, 1), PreviousImage: "exporter:v1"}
	p.Record = revision.SetState{Revision: planLatest.Name, Hash: planLatest.Hash, ImagelessHash: planLatest.ImagelessHash,
		Write: &revision.Write{WasReady: true, Generation: 2}, Containers: []revision.ContainerState{rc}}
	p.Containers = []Container{{Name: "exporter", Runs: true, ContainerID: containerID(p.Key.Name, 1), Image: "exporter:v2",
		ImageID: imageID("exporter:v1"), Running: true, InFlight: true, Recorded: rc}}
	p.Updated, p.Updating, p.Ready = true, true, false
}

// notDisrupted: the pod's last write found it not ready.
func notDisrupted(p *Pod) {
	p.Record.Write.WasReady = false
}

// disrupted: the pod's last write, made 5s before planNow, found it ready,
// and the record has not been settled since.
func disrupted(p *Pod) {
	p.Record.Write = &revision.Write{WasReady: true, Generation: 2, At: &metav1.MicroTime{Time: planNow.Add(-5 * time.Second)}}
}

// wasReleased: the pod came back from its last write, made while ready,
// and the record says so.
func wasReleased(p *Pod) {
	p.Record.Released = &revision.Write{WasReady: true, Generation: 2, At: &metav1.MicroTime{Time: planNow.Add(-5 * time.Second)}}
}

// nodeLost: p's node is not Ready; not ready either.
func nodeLost(p *Pod) { p.NodeLost, p.PodReady, p.Ready = true, false, false }

// disruptedByOthers: another set's rollout disrupted p.
func disruptedByOthers(p *Pod) { p.DisruptedBy = []string{"other"} }

// notStarted: p's sidecar is a native one that runs, its startup probe
// not passed yet.
func notStarted(p *Pod) {
	c := &p.Containers[0]
	c.Init, c.Running, c.Ready, c.NotStarted = true, true, false, true
}

// serving: p's sidecar runs and is ready.
func serving(p *Pod) { p.Containers[0].Running, p.Containers[0].Ready = true, true }

// failingSibling: p has a second sidecar of the set, the latest revision's
// already, which runs and is not ready.
func failingSibling(p *Pod) {
	p.Containers = append(p.Containers, Container{Name: "logs", Runs: true, Running: true, Image: "logs:v1", ImageID: imageID("logs:v1"),
		ContainerID: containerID(p.Key.Name, 9), Complete: true, Recorded: revision.ContainerState{Name: "logs", Image: "logs:v1"}})
}

func notReady(p *Pod) {
	p.PodReady = false
	p.Ready = false
}

func drifted(p *Pod) {
	p.Containers[0].Image = "exporter:debug"
	p.Containers[0].ImageID = imageID("exporter:debug")
	p.Drifted = []string{"exporter"}
}

// onRevision: p runs another old revision than the others.
func onRevision(name string) opt {
	return func(p *Pod) { p.Record.Revision = setName + "-" + name }
}

// unacted: p's sidecar was edited by hand and the kubelet still runs the
// container from before the edit.
func unacted(p *Pod) {
	p.Containers[0].StatusImage = p.Record.Containers[0].Image
	p.Containers[0].Unacted = true
}

func notUpgradable(p *Pod) {
	p.Record.ImagelessHash = "old-shape"
	p.Upgradable = false
}

func label(k, v string) opt {
	return func(p *Pod) {
		p.Labels = map[string]string{"app": "db", k: v}
	}
}

// fleet returns pods p01..pNN, with opts applied to the named ones.
func fleet(n int, opts map[string][]opt) []Pod {
	var out []Pod
	for _, name := range names(n) {
		out = append(out, mk(name, opts[name]...))
	}
	return out
}

// each applies the same options to several pods.
func each(o []opt, pods ...string) map[string][]opt {
	m := map[string][]opt{}
	for _, p := range pods {
		m[p] = append(m[p], o...)
	}
	return m
}

func merge(ms ...map[string][]opt) map[string][]opt {
	out := map[string][]opt{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = append(out[k], v...)
		}
	}
	return out
}

func podRange(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("p%02d", i))
	}
	return out
}

func intOrPercent(s string) *intstr.IntOrString {
	if s == "" {
		return nil
	}
	if strings.HasSuffix(s, "%") {
		v := intstr.FromString(s)
		return &v
	}
	var n int32
	if _, err := fmt.Sscan(s, &n); err != nil {
		panic(err)
	}
	v := intstr.FromInt32(n)
	return &v
}

func strategy(partition, maxUnavailable string) v1alpha1.UpdateStrategy {
	return v1alpha1.UpdateStrategy{Partition: intOrPercent(partition), MaxUnavailable: intOrPercent(maxUnavailable), MinReadySeconds: new(int32(0))}
}

// held builds the expected holds: reason → pods.
func held(groups ...any) map[string]HoldReason {
	out := map[string]HoldReason{}
	var reason HoldReason
	for _, g := range groups {
		switch g := g.(type) {
		case HoldReason:
			reason = g
		case string:
			out[g] = reason
		case []string:
			for _, n := range g {
				out[n] = reason
			}
		}
	}
	return out
}

// outcome is the part of a Plan the table looks at: the pods written, in
// order ("p12 RevertDrift" for a revert), and the pods held by reason.
type outcome struct {
	Updates []string
	Held    map[string]HoldReason
}

func outcomeOf(p Plan) outcome {
	o := outcome{Held: map[string]HoldReason{}}
	for _, u := range p.Updates {
		s := u.Pod.Name
		if u.Action != ActionUpdate {
			s += " " + string(u.Action)
		}
		o.Updates = append(o.Updates, s)
	}
	for _, h := range p.Held {
		o.Held[h.Pod.Name] = h.Reason
	}
	return o
}

// TestNext mirrors the worked cases in Next's doc comment, line by line,
// then a few more.
func TestNext(t *testing.T) {
	dbWeb := []Budget{{Name: "db/web", DisruptionsAllowed: 1}}
	// db/web as the controller passes it while p01 is disrupted.
	dbWebSpent := []Budget{{Name: "db/web", DisruptionsAllowed: 1, Spent: 1}}
	tests := []struct {
		name      string
		pods      []Pod
		strategy  v1alpha1.UpdateStrategy
		drift     v1alpha1.DriftPolicy
		budgets   map[types.NamespacedName][]Budget
		withdrawn map[string]bool
		want      outcome
		wantScope *Scope
	}{
		{
			name:     "partition 50% maxUnavailable 1",
			pods:     fleet(12, nil),
			strategy: strategy("50%", "1"),
			want: outcome{[]string{"p01"}, held(
				HeldByMaxUnavailable, podRange(2, 6), HeldByPartition, podRange(7, 12))},
			wantScope: &Scope{Matched: 12, Selected: 12, Partition: 6, Target: 6, MaxUnavailable: 1},
		},
		{
			name:     "same, p01 updating",
			pods:     fleet(12, each([]opt{updating}, "p01")),
			strategy: strategy("50%", "1"),
			want: outcome{nil, held(
				HeldByMaxUnavailable, podRange(2, 6), HeldByPartition, podRange(7, 12))},
			wantScope: &Scope{Matched: 12, Selected: 12, Partition: 6, Target: 6, Updated: 1, MaxUnavailable: 1, Unavailable: 1},
		},
		{
			name:     "same, p01 updated and ready",
			pods:     fleet(12, each([]opt{updated}, "p01")),
			strategy: strategy("50%", "1"),
			want: outcome{[]string{"p02"}, held(
				HeldByMaxUnavailable, podRange(3, 6), HeldByPartition, podRange(7, 12))},
			wantScope: &Scope{Matched: 12, Selected: 12, Partition: 6, Target: 6, Updated: 1, UpdatedReady: 1, MaxUnavailable: 1},
		},
		{
			name:     "same, p01..p06 updated and ready",
			pods:     fleet(12, each([]opt{updated}, podRange(1, 6)...)),
			strategy: strategy("50%", "1"),
			want:     outcome{nil, held(HeldByPartition, podRange(7, 12))},
		},
		{
			name:     "partition 50% maxUnavailable 1, p03 p09 p11 not ready",
			pods:     fleet(12, each([]opt{notReady}, "p03", "p09", "p11")),
			strategy: strategy("50%", "1"),
			want: outcome{[]string{"p03", "p09", "p11", "p01"}, held(
				HeldByMaxUnavailable, "p02", "p04",
				HeldByPartition, []string{"p05", "p06", "p07", "p08", "p10", "p12"})},
		},
		{
			name:     "partition 0 maxUnavailable 25%",
			pods:     fleet(12, nil),
			strategy: strategy("0", "25%"),
			want:     outcome{[]string{"p01", "p02", "p03"}, held(HeldByMaxUnavailable, podRange(4, 12))},
		},
		{
			name:      "partition 0 maxUnavailable 10% rounds up to 2",
			pods:      fleet(12, nil),
			strategy:  strategy("0", "10%"),
			want:      outcome{[]string{"p01", "p02"}, held(HeldByMaxUnavailable, podRange(3, 12))},
			wantScope: &Scope{Matched: 12, Selected: 12, Target: 12, MaxUnavailable: 2},
		},
		{
			name:     "partition 5",
			pods:     fleet(12, nil),
			strategy: strategy("5", ""),
			want: outcome{[]string{"p01"}, held(
				HeldByMaxUnavailable, podRange(2, 7), HeldByPartition, podRange(8, 12))},
			wantScope: &Scope{Matched: 12, Selected: 12, Partition: 5, Target: 7, MaxUnavailable: 1},
		},
		{
			name:     "partition 33% of 10 rounds up to 4",
			pods:     fleet(10, nil),
			strategy: strategy("33%", "1"),
			want: outcome{[]string{"p01"}, held(
				HeldByMaxUnavailable, podRange(2, 6), HeldByPartition, podRange(7, 10))},
			wantScope: &Scope{Matched: 10, Selected: 10, Partition: 4, Target: 6, MaxUnavailable: 1},
		},
		{
			name:     "partition 100%",
			pods:     fleet(12, nil),
			strategy: strategy("100%", "1"),
			want:     outcome{nil, held(HeldByPartition, podRange(1, 12))},
		},
		{
			name:      "partition larger than the pods",
			pods:      fleet(3, nil),
			strategy:  strategy("7", "1"),
			want:      outcome{nil, held(HeldByPartition, podRange(1, 3))},
			wantScope: &Scope{Matched: 3, Selected: 3, Partition: 3, Target: 0, MaxUnavailable: 1},
		},
		{
			name: "selector zone=a picks 8, partition 50%",
			pods: fleet(12, each([]opt{label("zone", "a")}, podRange(1, 8)...)),
			strategy: func() v1alpha1.UpdateStrategy {
				s := strategy("50%", "1")
				s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}
				return s
			}(),
			want: outcome{[]string{"p01"}, held(
				HeldByMaxUnavailable, podRange(2, 4), HeldByPartition, podRange(5, 8))},
			wantScope: &Scope{Matched: 12, Selected: 8, Partition: 4, Target: 4, MaxUnavailable: 1},
		},
		{
			name:     "partition raised to 50% after 8 updated: never rolls back",
			pods:     fleet(12, each([]opt{updated}, podRange(1, 8)...)),
			strategy: strategy("50%", "1"),
			want:     outcome{nil, held(HeldByPartition, podRange(9, 12))},
		},
		{
			name: "maxUnavailable 1, p01 p02 updated but not ready again yet: a not-ready candidate still goes",
			pods: fleet(12, merge(
				each([]opt{updated, disrupted, notReady}, "p01", "p02"),
				each([]opt{notReady}, "p05"))),
			strategy:  strategy("0", "1"),
			want:      outcome{[]string{"p05"}, held(HeldByMaxUnavailable, "p03", "p04", podRange(6, 12))},
			wantScope: &Scope{Matched: 12, Selected: 12, Target: 12, Updated: 2, MaxUnavailable: 1, Unavailable: 2},
		},
		{
			// Defect: a pod back and settled that went unready for reasons
			// of its own held maxUnavailable for ever.
			name:     "maxUnavailable 1, p01 updated and settled, now not ready: it holds nothing",
			pods:     fleet(12, each([]opt{updated, notReady}, "p01")),
			strategy: strategy("0", "1"),
			want:     outcome{[]string{"p02"}, held(HeldByMaxUnavailable, podRange(3, 12))},
		},
		{
			// A pod back needs no write of its own: the set's
			// releasedBefore passes its write (ReleasedBefore).
			name:     "maxUnavailable 1, p01 back: p02 goes, and p01 is not written",
			pods:     fleet(12, each([]opt{updated, disrupted}, "p01")),
			strategy: strategy("0", "1"),
			want:     outcome{[]string{"p02"}, held(HeldByMaxUnavailable, podRange(3, 12))},
		},
		{
			// A resize the write owes (its call was lost) is part of the
			// write: the pod keeps its slot until it lands, and the resize
			// goes within it, whatever waits.
			name: "maxUnavailable 1, p01 ready, owing its resize: the resize goes within p01's slot",
			pods: fleet(12, each([]opt{updated, disrupted, func(p *Pod) {
				p.ResizeOwed, p.Ready = []ContainerResources{{Name: "exporter"}}, false
			}}, "p01")),
			strategy: strategy("0", "1"),
			want:     outcome{[]string{"p01 Resize"}, held(HeldByMaxUnavailable, podRange(2, 12))},
		},
		{
			// Found by TestModel (-rapid.seed=17611449304458224493): a
			// drifted sidecar is complete as it runs; the resize it owes
			// still goes.
			name: "partition 0, every pod updated, p01 drifted and owing its resize: the resize goes",
			pods: fleet(3, merge(each([]opt{updated, disrupted, func(p *Pod) {
				p.ResizeOwed, p.Drifted = []ContainerResources{{Name: "exporter"}}, []string{"exporter"}
			}}, "p01"), each([]opt{updated}, "p02", "p03"))),
			strategy: strategy("0", "1"),
			want:     outcome{[]string{"p01 Resize"}, held()},
		},
		{
			// A canary that fails after its step is done holds the next.
			name:     "partition 10, p01 released and failed since: it counts, and p02 waits",
			pods:     fleet(12, each([]opt{updated, wasReleased, notReady}, "p01")),
			strategy: strategy("10", "1"),
			want:     outcome{nil, held(HeldByMaxUnavailable, "p02", HeldByPartition, podRange(3, 12))},
		},
		{
			name:     "maxUnavailable 1, p01 back while another set's write into it is in flight: not released yet",
			pods:     fleet(12, each([]opt{updated, disrupted, func(p *Pod) { p.OthersWriting = true }}, "p01")),
			strategy: strategy("0", "1"),
			want:     outcome{[]string{"p02"}, held(HeldByMaxUnavailable, podRange(3, 12))},
		},
		{
			// Review: its node is lost; it can be written nothing.
			name:     "partition 10, p01 released and on a lost node: p02 goes",
			pods:     fleet(12, each([]opt{updated, wasReleased, nodeLost}, "p01")),
			strategy: strategy("10", "1"),
			want:     outcome{[]string{"p02"}, held(HeldByPartition, podRange(3, 12))},
		},
		{
			// Review: a failure of a pod released by an older revision is
			// not this rollout's, which may never write it.
			name:     "p01 released on an older revision, not upgradable, and failed since: p02 goes",
			pods:     fleet(3, each([]opt{wasReleased, notReady, notUpgradable}, "p01")),
			strategy: strategy("0", "1"),
			want:     outcome{[]string{"p02"}, held(HeldNotUpgradable, "p01", HeldByMaxUnavailable, "p03")},
		},
		{
			// Another set's rollout has it down: that set counts it.
			name:     "partition 10, p01 released, and another set's rollout has it down: p02 goes",
			pods:     fleet(12, each([]opt{updated, wasReleased, notReady, disruptedByOthers}, "p01")),
			strategy: strategy("10", "1"),
			want:     outcome{[]string{"p02"}, held(HeldByPartition, podRange(3, 12))},
		},
		{
			// Defect: a pod on a lost node was written for free, no
			// kubelet acted on it, and the rollout stalled waiting.
			name:     "maxUnavailable 1, p02 on a lost node: held, and p01 goes",
			pods:     fleet(3, each([]opt{nodeLost}, "p02")),
			strategy: strategy("0", "1"),
			want:     outcome{[]string{"p01"}, held(HeldNodeLost, "p02", HeldByMaxUnavailable, "p03")},
		},
		{
			// Written while ready, then its node was lost: not the
			// rollout's to count any more.
			// Found by review: its kubelet restarts the sidecar when the
			// node is back, beside whatever pod took the slot.
			name:     "maxUnavailable 1, p01 written while ready, then its node lost before the kubelet acted: it keeps its slot",
			pods:     fleet(3, each([]opt{updating, nodeLost}, "p01")),
			strategy: strategy("0", "1"),
			want:     outcome{nil, held(HeldByMaxUnavailable, podRange(2, 3))},
		},
		{
			// Its node may be NotReady while its kubelet runs on (PLEG, the
			// network plugin): a sidecar the write broke is down still.
			name:     "maxUnavailable 1, p01 updated while ready, not released, then its node lost: it keeps its slot",
			pods:     fleet(3, each([]opt{updated, disrupted, nodeLost}, "p01")),
			strategy: strategy("0", "1"),
			want:     outcome{nil, held(HeldByMaxUnavailable, podRange(2, 3))},
		},
		{
			// Found by review: the lost pod, not ready, went first and took
			// the one place the partition left.
			name:     "partition 2 of 3, p01 on a lost node: p02 takes the place",
			pods:     fleet(3, each([]opt{nodeLost}, "p01")),
			strategy: strategy("2", "1"),
			want:     outcome{[]string{"p02"}, held(HeldByPartition, "p01", HeldByPartition, "p03")},
		},
		{
			// Defect: pods written while not ready held maxUnavailable
			// afterwards.
			name:     "maxUnavailable 1, p01 written while not ready, still updating: it holds nothing",
			pods:     fleet(12, each([]opt{updating, notDisrupted, notReady}, "p01")),
			strategy: strategy("0", "1"),
			want:     outcome{[]string{"p02"}, held(HeldByMaxUnavailable, podRange(3, 12))},
		},
		{
			name:     "paused: a pod back is not written",
			pods:     fleet(3, each([]opt{updated, disrupted}, "p01")),
			strategy: func() v1alpha1.UpdateStrategy { s := strategy("0", "1"); s.Paused = true; return s }(),
			want:     outcome{nil, held(HeldPaused, "p02", "p03")},
		},
		{
			name:     "NotUpdate: a pod back is not written",
			pods:     fleet(3, each([]opt{updated, disrupted}, "p01")),
			strategy: func() v1alpha1.UpdateStrategy { s := strategy("0", "1"); s.Type = v1alpha1.NotUpdateStrategy; return s }(),
			want:     outcome{nil, held(HeldNotUpdate, "p02", "p03")},
		},
		{
			name:     "maxUnavailable 3, budget db/web over p01..p03 allows 1",
			pods:     fleet(12, nil),
			strategy: strategy("0", "3"),
			budgets:  map[types.NamespacedName][]Budget{key("p01"): dbWeb, key("p02"): dbWeb, key("p03"): dbWeb},
			want: outcome{[]string{"p01", "p04", "p05"}, held(
				HeldByDisruptionBudget, "p02", "p03", HeldByMaxUnavailable, podRange(6, 12))},
		},
		{
			name:     "same, p01 updating, db/web still allows 1",
			pods:     fleet(12, each([]opt{updating}, "p01")),
			strategy: strategy("0", "3"),
			budgets:  map[types.NamespacedName][]Budget{key("p01"): dbWebSpent, key("p02"): dbWebSpent, key("p03"): dbWebSpent},
			want: outcome{[]string{"p04", "p05"}, held(
				HeldByDisruptionBudget, "p02", "p03", HeldByMaxUnavailable, podRange(6, 12))},
		},
		{
			name:     "same, p01 updated and ready again",
			pods:     fleet(12, each([]opt{updated}, "p01")),
			strategy: strategy("0", "3"),
			budgets:  map[types.NamespacedName][]Budget{key("p01"): dbWeb, key("p02"): dbWeb, key("p03"): dbWeb},
			want: outcome{[]string{"p02", "p04", "p05"}, held(
				HeldByDisruptionBudget, "p03", HeldByMaxUnavailable, podRange(6, 12))},
		},
		{
			// Review finding: p01, written while not ready, is ready again
			// before the kubelet restarted its exporter; the restart will
			// take it down. It counts from now on, and its record says so.
			name:     "p01 written while not ready, ready now with the write to come: recorded, holds the slot",
			pods:     fleet(3, each([]opt{updating, notDisrupted}, "p01")),
			strategy: strategy("0", "1"),
			want:     outcome{[]string{"p01 RecordDisruption"}, held(HeldByMaxUnavailable, "p02", "p03")},
		},
		{
			name:     "same, paused: recorded all the same",
			pods:     fleet(3, each([]opt{updating, notDisrupted}, "p01")),
			strategy: func() v1alpha1.UpdateStrategy { s := strategy("0", "1"); s.Paused = true; return s }(),
			want:     outcome{[]string{"p01 RecordDisruption"}, held(HeldPaused, "p02", "p03")},
		},
		{
			// Found on a real node: two sets on the same pods, one budget
			// allowing one disruption. p01 is down for the other set's
			// write, which the budget counts; writing p01 now would keep it
			// down unseen, and writing p02 would take a second pod down.
			name:     "maxUnavailable 3, budget allows 1 spent on p01 by another set: p01 waits, no other goes",
			pods:     fleet(12, each([]opt{notReady, disruptedByOthers, serving}, "p01")),
			strategy: strategy("0", "3"),
			budgets:  map[types.NamespacedName][]Budget{key("p01"): dbWebSpent, key("p02"): dbWebSpent, key("p03"): dbWebSpent},
			want: outcome{[]string{"p04", "p05", "p06"}, held(
				HeldByOtherRollout, "p01", HeldByDisruptionBudget, "p02", "p03", HeldByMaxUnavailable, podRange(7, 12))},
		},
		{
			// Still Ready, but the other set's write is in flight: the
			// kubelet is about to take it down, and that set would release
			// it on the Ready it still shows (-rapid.seed=1591172309375597795).
			name:     "maxUnavailable 1, p01 ready, another set's write into it in flight: it waits",
			pods:     fleet(3, each([]opt{disruptedByOthers, serving}, "p01")),
			strategy: strategy("0", "1"),
			want:     outcome{[]string{"p02"}, held(HeldByOtherRollout, "p01", HeldByMaxUnavailable, "p03")},
		},
		{
			name:     "maxUnavailable 1, p01 down for another set: it waits, the others go as usual",
			pods:     fleet(3, each([]opt{notReady, disruptedByOthers, serving}, "p01")),
			strategy: strategy("0", "1"),
			want:     outcome{[]string{"p02"}, held(HeldByOtherRollout, "p01", HeldByMaxUnavailable, "p03")},
		},
		{
			// Found by TestModel: the pod was down for this set's own
			// sidecar, which crashed, while another set waited for the pod
			// to turn ready to settle; held, the fix never went.
			name:     "maxUnavailable 1, p01 down for another set, its sidecar not serving: the fix goes, taking no slot",
			pods:     fleet(3, each([]opt{notReady, disruptedByOthers}, "p01")),
			strategy: strategy("0", "1"),
			want:     outcome{[]string{"p01", "p02"}, held(HeldByMaxUnavailable, "p03")},
		},
		{
			// Found by TestModel (-rapid.seed=20261211, case 2011): the
			// pod was down for another sidecar of this set, failing, not
			// the one written; the other set waited for the pod to turn
			// ready, and this set's write, which could end it, waited for
			// the other set.
			name:     "maxUnavailable 1, p01 down for another set and for its other failing sidecar: the write goes",
			pods:     fleet(3, each([]opt{notReady, disruptedByOthers, serving, failingSibling}, "p01")),
			strategy: strategy("0", "1"),
			want:     outcome{[]string{"p01", "p02"}, held(HeldByMaxUnavailable, "p03")},
		},
		{
			// The kubelet restarts a native sidecar whose startup probe
			// has not passed only once it passes: the pod could turn
			// ready before the write is acted on, uncounted.
			name:     "maxUnavailable 1, p01 down for another set, its native sidecar not started yet: it waits",
			pods:     fleet(3, each([]opt{notReady, disruptedByOthers, notStarted}, "p01")),
			strategy: strategy("0", "1"),
			want:     outcome{[]string{"p02"}, held(HeldByOtherRollout, "p01", HeldByMaxUnavailable, "p03")},
		},
		{
			name:     "a budget that allows nothing does not hold a pod that is not ready",
			pods:     fleet(3, each([]opt{notReady}, "p01")),
			strategy: strategy("0", "1"),
			budgets: map[types.NamespacedName][]Budget{
				key("p01"): {{Name: "db/web", DisruptionsAllowed: 0}},
				key("p02"): {{Name: "db/web", DisruptionsAllowed: 0}},
			},
			want: outcome{[]string{"p01", "p03"}, held(HeldByDisruptionBudget, "p02")},
		},
		{
			name:     "a pod under two budgets needs both",
			pods:     fleet(2, nil),
			strategy: strategy("0", "2"),
			budgets: map[types.NamespacedName][]Budget{
				key("p01"): {{Name: "db/a", DisruptionsAllowed: 1}, {Name: "db/b", DisruptionsAllowed: 1}},
				key("p02"): {{Name: "db/b", DisruptionsAllowed: 1}},
			},
			want: outcome{[]string{"p01"}, held(HeldByDisruptionBudget, "p02")},
		},
		{
			name:     "partition 50%, p12 drifted, Revert, maxUnavailable 1",
			pods:     fleet(12, each([]opt{drifted}, "p12")),
			strategy: strategy("50%", "1"),
			drift:    v1alpha1.DriftRevert,
			want: outcome{[]string{"p12 RevertDrift"}, held(
				HeldByMaxUnavailable, podRange(1, 6), HeldByPartition, podRange(7, 11))},
		},
		{
			name: "every pod updated, p01 released and failed since, p02 drifted, Revert: the rollout has no work, p02 goes",
			pods: fleet(3, merge(each([]opt{updated}, "p01", "p02", "p03"), each([]opt{wasReleased, notReady}, "p01"),
				each([]opt{drifted}, "p02"))),
			strategy: strategy("0", "1"),
			drift:    v1alpha1.DriftRevert,
			want:     outcome{[]string{"p02 RevertDrift"}, map[string]HoldReason{}},
		},
		{
			name: "partition 1, p01 released and failed since, p02 drifted, Revert: p01 counts, p02 waits",
			pods: fleet(3, merge(each([]opt{updated}, "p01", "p02"), each([]opt{wasReleased, notReady}, "p01"),
				each([]opt{drifted}, "p02"))),
			strategy: strategy("1", "1"),
			drift:    v1alpha1.DriftRevert,
			want:     outcome{nil, held(HeldByMaxUnavailable, "p02", HeldByPartition, "p03")},
		},
		{
			name:     "drift with policy Report is left alone",
			pods:     fleet(12, each([]opt{drifted}, "p12")),
			strategy: strategy("50%", "1"),
			drift:    v1alpha1.DriftReport,
			want: outcome{[]string{"p01"}, held(
				HeldByMaxUnavailable, podRange(2, 6), HeldByPartition, podRange(7, 12))},
		},
		{
			name:     "a drifted pod due for an update gets one write, the update",
			pods:     fleet(3, each([]opt{drifted}, "p01")),
			strategy: strategy("0", "1"),
			drift:    v1alpha1.DriftRevert,
			want:     outcome{[]string{"p01"}, held(HeldByMaxUnavailable, "p02", "p03")},
		},
		{
			name: "drift on an updated pod outside the selector is reverted too",
			pods: fleet(2, each([]opt{updated, drifted, label("zone", "b")}, "p02")),
			strategy: func() v1alpha1.UpdateStrategy {
				s := strategy("0", "2")
				s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}
				return s
			}(),
			drift: v1alpha1.DriftRevert,
			want:  outcome{[]string{"p02 RevertDrift"}, map[string]HoldReason{}},
		},
		{
			name:     "drifted, the kubelet not done with the edit: the revert waits",
			pods:     fleet(3, merge(each([]opt{updated}, podRange(1, 3)...), each([]opt{drifted, unacted}, "p02"))),
			strategy: strategy("0", "1"),
			drift:    v1alpha1.DriftRevert,
			want:     outcome{nil, held(HeldChangeInFlight, "p02")},
		},
		{
			name:     "due update of a pod the kubelet has not caught up with waits; the next goes",
			pods:     fleet(3, each([]opt{drifted, unacted}, "p01")),
			strategy: strategy("0", "1"),
			drift:    v1alpha1.DriftReport,
			want:     outcome{[]string{"p02"}, held(HeldChangeInFlight, "p01", HeldByMaxUnavailable, "p03")},
		},
		{
			name:     "drifted and not ready: reverted without taking maxUnavailable",
			pods:     fleet(3, merge(each([]opt{updated}, podRange(1, 3)...), each([]opt{drifted, notReady}, "p02", "p03"))),
			strategy: strategy("0", "1"),
			drift:    v1alpha1.DriftRevert,
			want:     outcome{[]string{"p02 RevertDrift", "p03 RevertDrift"}, map[string]HoldReason{}},
		},
		{
			name:      "partition 0, p05 not upgradable",
			pods:      fleet(12, each([]opt{notUpgradable}, "p05")),
			strategy:  strategy("0", "1"),
			want:      outcome{[]string{"p01"}, held(HeldByMaxUnavailable, podRange(2, 4), podRange(6, 12), HeldNotUpgradable, "p05")},
			wantScope: &Scope{Matched: 12, Selected: 12, Target: 12, MaxUnavailable: 1},
		},
		{
			// Defect: after an undo the pods that never moved are on the
			// latest revision, and partition 8 kept the two canaries on
			// the withdrawn one.
			name:      "back to an older revision with partition 8: the canaries on the withdrawn one go back",
			pods:      fleet(10, each([]opt{updated}, podRange(1, 8)...)),
			strategy:  strategy("8", "1"),
			withdrawn: map[string]bool{setName + "-old": true},
			want:      outcome{[]string{"p09"}, held(HeldByMaxUnavailable, "p10")},
			wantScope: &Scope{Matched: 10, Selected: 10, Partition: 8, Target: 2, Updated: 8, UpdatedReady: 8, MaxUnavailable: 1},
		},
		{
			name:     "without the withdrawn revision known the partition keeps them",
			pods:     fleet(10, each([]opt{updated}, podRange(1, 8)...)),
			strategy: strategy("8", "1"),
			want:     outcome{nil, held(HeldByPartition, "p09", "p10")},
		},
		{
			name:      "going back, the partition still keeps as many pods of older revisions",
			pods:      fleet(10, merge(each([]opt{updated}, podRange(1, 3)...), each([]opt{onRevision("older")}, podRange(4, 8)...))),
			strategy:  strategy("5", "2"),
			withdrawn: map[string]bool{setName + "-old": true},
			want:      outcome{[]string{"p09", "p10"}, held(HeldByPartition, podRange(4, 8))},
		},
		{
			name:      "going back with room in the partition: the withdrawn revision's pods take it first",
			pods:      fleet(10, merge(each([]opt{updated}, podRange(1, 3)...), each([]opt{onRevision("older")}, podRange(4, 8)...))),
			strategy:  strategy("3", "3"),
			withdrawn: map[string]bool{setName + "-old": true},
			want:      outcome{[]string{"p09", "p10", "p04"}, held(HeldByMaxUnavailable, "p05", HeldByPartition, podRange(6, 8))},
		},
		{
			name: "paused",
			pods: fleet(12, each([]opt{drifted}, "p12")),
			strategy: func() v1alpha1.UpdateStrategy {
				s := strategy("50%", "1")
				s.Paused = true
				return s
			}(),
			drift: v1alpha1.DriftRevert,
			want:  outcome{nil, held(HeldPaused, podRange(1, 6), "p12", HeldByPartition, podRange(7, 11))},
		},
		{
			name: "NotUpdate",
			pods: fleet(4, nil),
			strategy: func() v1alpha1.UpdateStrategy {
				s := strategy("50%", "1")
				s.Type = v1alpha1.NotUpdateStrategy
				return s
			}(),
			want: outcome{nil, held(HeldNotUpdate, "p01", "p02", HeldByPartition, "p03", "p04")},
		},
		{
			name:      "defaults: partition 0, maxUnavailable 1",
			pods:      fleet(3, nil),
			want:      outcome{[]string{"p01"}, held(HeldByMaxUnavailable, "p02", "p03")},
			wantScope: &Scope{Matched: 3, Selected: 3, Target: 3, MaxUnavailable: 1},
		},
		{
			name:      "no pods",
			strategy:  strategy("50%", "25%"),
			want:      outcome{nil, map[string]HoldReason{}},
			wantScope: &Scope{MaxUnavailable: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Reversed, to show the input order does not matter.
			pods := make([]Pod, len(tt.pods))
			for i, p := range tt.pods {
				pods[len(pods)-1-i] = p
			}
			before := fmt.Sprintf("%+v", pods)
			got, err := Next(Input{Latest: planLatest, Pods: pods, Strategy: tt.strategy, DriftPolicy: tt.drift, Budgets: tt.budgets,
				Withdrawn: tt.withdrawn})
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if diff := cmp.Diff(tt.want, outcomeOf(got)); diff != "" {
				t.Errorf("Next (-want +got):\n%s", diff)
			}
			if tt.wantScope != nil {
				if diff := cmp.Diff(*tt.wantScope, got.Scope); diff != "" {
					t.Errorf("Scope (-want +got):\n%s", diff)
				}
			}
			if after := fmt.Sprintf("%+v", pods); after != before {
				t.Errorf("Next modified its input")
			}
		})
	}
}

func TestNextHeldMessages(t *testing.T) {
	pods := fleet(4, merge(each([]opt{notUpgradable}, "p04")))
	budgets := map[types.NamespacedName][]Budget{key("p02"): {{Name: "db/web", DisruptionsAllowed: 0}}}
	got, err := Next(Input{Latest: planLatest, Pods: pods, Strategy: strategy("2", "2"), Budgets: budgets})
	if err != nil {
		t.Fatal(err)
	}
	want := []Held{
		{key("p02"), HeldByDisruptionBudget, "PodDisruptionBudget db/web allows no further disruption now"},
		{key("p03"), HeldByPartition, "partition keeps 2 pods of 4 on their revision"},
		{key("p04"), HeldNotUpgradable, "something other than an image changed (imageless hash old-shape, latest shape): the pod needs a recreate"},
	}
	if diff := cmp.Diff(want, got.Held); diff != "" {
		t.Errorf("Held (-want +got):\n%s", diff)
	}

	got, err = Next(Input{Latest: planLatest, Pods: fleet(3, nil), Strategy: strategy("0", "1")})
	if err != nil {
		t.Fatal(err)
	}
	if want := "maxUnavailable 1 reached: 1 pod updating or updated but not ready"; got.Held[0].Message != want {
		t.Errorf("Held[0].Message = %q, want %q", got.Held[0].Message, want)
	}
}

func TestNextInvalidStrategy(t *testing.T) {
	str := func(s string) *intstr.IntOrString {
		v := intstr.FromString(s)
		return &v
	}
	tests := []struct {
		name     string
		strategy v1alpha1.UpdateStrategy
		want     string
	}{
		{"partition", v1alpha1.UpdateStrategy{Partition: str("half")}, "updateStrategy.partition"},
		{"maxUnavailable", strategy("0", "x%"), "updateStrategy.maxUnavailable"},
		{"selector", v1alpha1.UpdateStrategy{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "zone", Operator: "Near"}}}}, "updateStrategy.selector"},
	}
	for _, tt := range tests {
		_, err := Next(Input{Latest: planLatest, Pods: fleet(2, nil), Strategy: tt.strategy})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want one naming %s", tt.name, err, tt.want)
		}
	}
}

// TestPodUpdates checks what a write carries, on pods built as the webhook
// builds them: only changed images are written, and the record says what
// was written and what ran before.
func TestPodUpdates(t *testing.T) {
	v1, v2 := testSet("exporter:v1"), testSet("exporter:v2")
	latest := NewLatest(v2)
	revert := Input{Latest: latest, DriftPolicy: v1alpha1.DriftRevert, Strategy: strategy("100%", "1")}

	tests := []struct {
		name  string
		input Input
		want  PodUpdate
	}{
		{
			name:  "update writes the changed image only and records the imageID before",
			input: Input{Latest: latest},
			want: PodUpdate{
				Pod: key("p01"), Action: ActionUpdate, Disrupts: true,
				Containers: []ContainerImage{{Name: "exporter", Image: "exporter:v2"}},
				State: revision.SetState{Revision: latest.Name, Hash: latest.Hash, ImagelessHash: latest.ImagelessHash,
					Write: &revision.Write{WasReady: true, Generation: 1},
					Containers: []revision.ContainerState{
						{Name: "exporter", Image: "exporter:v2", PreviousImageID: imageID("exporter:v1"),
							PreviousContainerID: "containerd://exporter-0", PreviousImage: "exporter:v1"},
						{Name: "shipper", Init: true, Image: "fluent-bit:3.1"},
					}},
			},
		},
		{
			name:  "revert writes the recorded image back and keeps the revision",
			input: revert,
			want: PodUpdate{
				Pod: key("p01"), Action: ActionRevertDrift, Disrupts: true,
				Containers: []ContainerImage{{Name: "shipper", Init: true, Image: "fluent-bit:3.1"}},
				State: revision.SetState{Revision: revision.Name(setName, &v1.Spec), Hash: revision.Hash(&v1.Spec), ImagelessHash: latest.ImagelessHash,
					Write: &revision.Write{WasReady: true, Generation: 1},
					Containers: []revision.ContainerState{
						{Name: "exporter", Image: "exporter:v1"},
						{Name: "shipper", Init: true, Image: "fluent-bit:3.1", PreviousImageID: imageID("fluent-bit:debug"),
							PreviousContainerID: "containerd://shipper-1"},
					}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := injectedPod("p01", v1)
			if tt.input.DriftPolicy == v1alpha1.DriftRevert {
				pod.Spec.InitContainers[0].Image = "fluent-bit:debug"
				swap(pod)
			}
			in := tt.input
			in.Pods = []Pod{Classify(pod, record(pod), latest)}
			plan, err := Next(in)
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Updates) != 1 {
				t.Fatalf("Updates = %+v, want one", plan.Updates)
			}
			if diff := cmp.Diff(tt.want, plan.Updates[0]); diff != "" {
				t.Errorf("PodUpdate (-want +got):\n%s", diff)
			}
		})
	}
}

// A hand edit that already set the latest image needs no spec write: only
// the record moves, and the edit's restart counts as the swap.
func TestUpdateAfterHandEditToLatestImage(t *testing.T) {
	v1, v2 := testSet("exporter:v1"), testSet("exporter:v2")
	latest := NewLatest(v2)
	pod := injectedPod("p01", v1)
	pod.Spec.Containers[1].Image = "exporter:v2"
	swap(pod)

	plan, err := Next(Input{Latest: latest, Pods: []Pod{Classify(pod, record(pod), latest)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Updates) != 1 || len(plan.Updates[0].Containers) != 0 {
		t.Fatalf("Updates = %+v, want one with no container", plan.Updates)
	}
	applyUpdate(pod, plan.Updates[0])
	got := verdictOf(Classify(pod, record(pod), latest))
	want := verdict{Updated: true, Upgradable: true, PodReady: true, Ready: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after the write (-want +got):\n%s", diff)
	}
}

// Cases the model test (TestModel) once found.
func TestDisruptionKept(t *testing.T) {
	t.Run("a write over an update that never came up keeps its disruption", func(t *testing.T) {
		// p01 was written while ready, its new image never pulled; the
		// set declares another image and p01, not ready, is written again
		// for free. It must still hold its maxUnavailable slot, or p02
		// goes beside it.
		p := mk("p01", updating, notReady)
		p.Record.Hash, p.Updated = "older", false
		p.Containers[0].Running = false
		plan, err := Next(Input{Latest: planLatest, Pods: []Pod{p, mk("p02")}, Strategy: strategy("0", "1")})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"p01"}, outcomeOf(plan).Updates); diff != "" {
			t.Fatalf("Updates (-want +got):\n%s", diff)
		}
		if u := plan.Updates[0]; u.Disrupts || u.State.Write == nil || !u.State.Write.WasReady {
			t.Errorf("rewrite of p01: Disrupts %v, Write %+v; want no new disruption and the old one kept", u.Disrupts, u.State.Write)
		}
	})
	t.Run("a write over one in flight says so, and keeps the container before both", func(t *testing.T) {
		// The kubelet may start the container of the image in between
		// before the one written now (-rapid.seed=12650358155861014381).
		p := mk("p01", updating, notReady)
		p.Updated = false
		p.Containers[0].Running = false
		before := p.Record.Containers[0].PreviousContainerID
		v3 := NewLatest(testSet("exporter:v3"))
		plan, err := Next(Input{Latest: v3, Pods: []Pod{p}, Strategy: strategy("0", "1")})
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Updates) != 1 {
			t.Fatalf("Updates = %+v, want p01's", plan.Updates)
		}
		if rc := plan.Updates[0].State.Containers[0]; !slices.Equal(rc.Between, []string{"exporter:v2"}) || rc.PreviousContainerID != before {
			t.Errorf("record %+v; want Between [exporter:v2] and PreviousContainerID %q", rc, before)
		}
	})
	t.Run("a write in flight whose container runs is not written over", func(t *testing.T) {
		// Written over now, the kubelet's first status of the new spec
		// could show the container of the write in flight running and
		// ready, taken for the new one just before it is replaced.
		p := mk("p01", updating)
		p.Record.Hash, p.Updated = "older", false
		plan, err := Next(Input{Latest: planLatest, Pods: []Pod{p}, Strategy: strategy("0", "1")})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(outcome{Held: map[string]HoldReason{"p01": HeldInFlight}}, outcomeOf(plan)); diff != "" {
			t.Errorf("Next (-want +got):\n%s", diff)
		}
	})
	t.Run("a write someone wrote over by hand is not waited for", func(t *testing.T) {
		// Found by TestModel: exporter:v2 written over v1, and before the
		// kubelet acted the image was set back to v1 by hand. The kubelet
		// keeps the v1 container: the write never completes, and holding
		// the pod for it (HeldInFlight) held the revert and every later
		// update for ever. The write is over; the pod is drifted, and the
		// revert goes at once, recording the container that runs.
		v1, latest := testSet("exporter:v1"), NewLatest(testSet("exporter:v2"))
		p := setBackByHand(t, v1, latest)
		if c := p.Containers[0]; c.InFlight || c.Unacted || !slices.Equal(p.Drifted, []string{"exporter"}) {
			t.Fatalf("InFlight %v, Unacted %v, Drifted %v; want a drifted container, neither in flight nor unacted", c.InFlight, c.Unacted, p.Drifted)
		}
		plan, err := Next(Input{Latest: latest, Pods: []Pod{p}, Strategy: strategy("0", "1"), DriftPolicy: v1alpha1.DriftRevert})
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Updates) != 1 || plan.Updates[0].Action != ActionRevertDrift {
			t.Fatalf("plan %+v, want the revert", outcomeOf(plan))
		}
		if rc := plan.Updates[0].State.Containers[0]; rc.PreviousContainerID != p.Containers[0].ContainerID || rc.Image != "exporter:v2" {
			t.Errorf("revert records %+v; want exporter:v2 over the running container %s", rc, p.Containers[0].ContainerID)
		}
	})
	t.Run("under Report, a write someone wrote over by hand frees its slot once the kubelet runs the spec", func(t *testing.T) {
		// Found by review: the write set back by hand never completes, and
		// the pod held its maxUnavailable slot for ever. The kubelet runs
		// what the spec says: the pod is drifted and back.
		v1, latest := testSet("exporter:v1"), NewLatest(testSet("exporter:v2"))
		p := setBackByHand(t, v1, latest)
		if p.Disrupting || !p.Ready {
			t.Fatalf("Disrupting %v, Ready %v; want the pod back", p.Disrupting, p.Ready)
		}
		other := Classify(injectedPod("p02", v1), record(injectedPod("p02", v1)), latest)
		plan, err := Next(Input{Latest: latest, Pods: []Pod{p, other}, Strategy: strategy("0", "1"), DriftPolicy: v1alpha1.DriftReport})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"p02"}, outcomeOf(plan).Updates); diff != "" {
			t.Errorf("Updates (-want +got):\n%s", diff)
		}
	})
	t.Run("a write set back by hand holds its slot until the kubelet reports the edit", func(t *testing.T) {
		// Found by TestModel: the status, from before the edit, shows the
		// old container running and ready, the image the spec now names.
		// The kubelet may have acted on the write in between and be
		// restarting the container: the pod stays the rollout's disruption
		// until a status of the edited spec shows it back.
		v1, latest := testSet("exporter:v1"), NewLatest(testSet("exporter:v2"))
		pod := writtenPod(t, v1, latest)
		// The kubelet's last status is of the spec before the write.
		pod.Generation += 2
		pod.Status.ObservedGeneration = pod.Generation - 1
		pod.Spec.Containers[1].Image = "exporter:v1"
		pod.Generation++
		if p := Classify(pod, record(pod), latest); !p.Disrupting || p.Ready {
			t.Fatalf("before the kubelet reports the edit: Disrupting %v, Ready %v; want the pod still disrupted", p.Disrupting, p.Ready)
		}
		pod.Status.ObservedGeneration = pod.Generation
		if p := Classify(pod, record(pod), latest); p.Disrupting || !p.Ready {
			t.Errorf("once the kubelet reports the edit: Disrupting %v, Ready %v; want the pod back", p.Disrupting, p.Ready)
		}
	})
	t.Run("a revert over a hand-made digest pin of the running content completes when the kubelet never restarts", func(t *testing.T) {
		// Found by review: the status already shows the pinned digest, so
		// the revert is written at once; the kubelet, seeing only the spec
		// written back, has nothing to restart. The running container was
		// started from the recorded image, so it is the revert's.
		set := testSet("exporter:v1")
		latest := NewLatest(set)
		pod := injectedPod("p01", set)
		pod.Spec.Containers[1].Image = "exporter@" + imageref.IDDigest(imageID("exporter:v1"))
		pod.Generation++
		p := Classify(pod, record(pod), latest)
		if c := p.Containers[0]; c.Unacted || !slices.Equal(p.Drifted, []string{"exporter"}) {
			t.Fatalf("Unacted %v, Drifted %v; want drifted, not unacted (the status shows the pinned digest)", c.Unacted, p.Drifted)
		}
		plan, err := Next(Input{Latest: latest, Pods: []Pod{p}, Strategy: strategy("0", "1"), DriftPolicy: v1alpha1.DriftRevert})
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Updates) != 1 || plan.Updates[0].Action != ActionRevertDrift {
			t.Fatalf("plan %+v, want the revert", outcomeOf(plan))
		}
		applyUpdate(pod, plan.Updates[0])
		pod.Status.ObservedGeneration = pod.Generation
		if p := Classify(pod, record(pod), latest); !p.Ready || p.Updating || len(p.Drifted) > 0 {
			t.Errorf("after the revert, the kubelet keeping the container: Ready %v, Updating %v, Drifted %v; want complete and ready", p.Ready, p.Updating, p.Drifted)
		}
	})
	t.Run("a pod disrupted by one set stays so while another set keeps it unready", func(t *testing.T) {
		// s0 restarted its sidecar and the new one runs; the pod is not
		// ready because another set's sidecar does not start. s0 cannot
		// tell that from its own doing: the pod is still its disruption.
		set := testSet("exporter:v1")
		pod := injectedPod("p01", set)
		rec := record(pod)
		rec.Write = &revision.Write{WasReady: true, Generation: 1}
		setReady(pod, false)
		if p := Classify(pod, rec, NewLatest(testSet("exporter:v2"))); !p.Disrupting {
			t.Errorf("Disrupting = false for a pod written while ready and not ready since")
		}
	})
}

// setBackByHand classifies a pod written from v1 to latest whose image was
// set back to exporter:v1 by hand before the kubelet acted: the kubelet
// keeps the v1 container and has seen the edit.
func setBackByHand(t *testing.T, v1 *v1alpha1.SidecarSet, latest Latest) Pod {
	t.Helper()
	pod := writtenPod(t, v1, latest)
	pod.Spec.Containers[1].Image = "exporter:v1"
	pod.Generation++
	pod.Status.ObservedGeneration = pod.Generation
	return Classify(pod, record(pod), latest)
}

// TestRecordDisruption: the record of a pod written while not ready that
// is ready now, the write still to come, is rewritten as a disruption of
// the same write; nothing else in it changes.
func TestRecordDisruption(t *testing.T) {
	pods := fleet(1, each([]opt{updating, notDisrupted}, "p01"))
	at := metav1.NewMicroTime(time.Date(2026, 5, 4, 10, 11, 12, 345678000, time.UTC))
	pods[0].Record.Write.At = &at
	plan, err := Next(Input{Latest: planLatest, Pods: pods, Strategy: strategy("0", "1")})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Updates) != 1 || plan.Updates[0].Action != ActionRecordDisruption || len(plan.Updates[0].Containers) != 0 {
		t.Fatalf("updates %+v, want one record-only RecordDisruption", plan.Updates)
	}
	want := pods[0].Record
	want.Write = &revision.Write{WasReady: true, TurnedReady: true, Generation: pods[0].Record.Write.Generation, At: &at}
	if diff := cmp.Diff(want, plan.Updates[0].State); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	if pods[0].Record.Write.WasReady {
		t.Error("Next changed the pod's record in place")
	}
}

// TestReleaseAt: a plan says when the first pod waiting out its write's
// minReadySeconds is released, so that the caller looks again then.
func TestReleaseAt(t *testing.T) {
	releaseIn := func(d time.Duration) opt {
		return func(p *Pod) { p.ReleaseAt = planNow.Add(d) }
	}
	for _, tt := range []struct {
		name string
		pods []Pod
		want time.Time
	}{
		{"none waits", fleet(3, each([]opt{updated, disrupted}, "p01")), time.Time{}},
		{"p01 in 5s, p02 in 3s", fleet(3, merge(each([]opt{updated, disrupted, releaseIn(5 * time.Second)}, "p01"),
			each([]opt{updated, disrupted, releaseIn(3 * time.Second)}, "p02"))), planNow.Add(3 * time.Second)},
	} {
		plan, err := Next(Input{Latest: planLatest, Pods: tt.pods, Strategy: strategy("0", "1")})
		if err != nil {
			t.Fatal(err)
		}
		if !plan.ReleaseAt.Equal(tt.want) {
			t.Errorf("%s: ReleaseAt %v, want %v", tt.name, plan.ReleaseAt, tt.want)
		}
	}
}

// TestRestartOfACountedPod covers pods the rollout counts that are written
// again: found by TestModel (-rapid.seed=16006549934711231655 and
// 28339159), where a pod that counted again after it came back, written
// again while down, was restarted once ready beside the pod that held the
// one slot. A write into a counted pod while it is down keeps its count;
// once it is Ready (waiting out minReadySeconds), a restart takes its own
// place, and only while the count is within maxUnavailable.
func TestRestartOfACountedPod(t *testing.T) {
	readyNotBack := func(p *Pod) { p.Ready = false }
	update := func(t *testing.T, plan Plan, name string) (PodUpdate, bool) {
		t.Helper()
		for _, u := range plan.Updates {
			if u.Pod.Name == name && u.Action == ActionUpdate {
				return u, true
			}
		}
		return PodUpdate{}, false
	}
	next := func(t *testing.T, pods []Pod, maxUnavailable string) Plan {
		t.Helper()
		plan, err := Next(Input{Latest: planLatest, Pods: pods, Strategy: strategy("0", maxUnavailable)})
		if err != nil {
			t.Fatal(err)
		}
		return plan
	}
	t.Run("written while down, it keeps its count, in no slot", func(t *testing.T) {
		// It may have been back in between and failed on its own: what
		// the new write owes (a handoff) disrupts it anew, and takes a
		// slot (found by TestModel, -rapid.seed=23975400: the handoff
		// went within a slot the pod no longer held in the world, beside
		// the one pod a budget allowed).
		plan := next(t, fleet(2, each([]opt{disrupted, notReady}, "p01")), "1")
		u, ok := update(t, plan, "p01")
		if !ok {
			t.Fatalf("p01 not updated: %+v", plan)
		}
		if w := u.State.Write; w == nil || !w.WasReady || !w.TurnedReady || u.Disrupts {
			t.Errorf("p01's write %+v (disrupts %v), want it counted, in no slot", w, u.Disrupts)
		}
	})
	t.Run("ready again and counted alone, a restart takes its own place", func(t *testing.T) {
		// Held, it would wait for itself: a sidecar that fails for good
		// would never get the fix.
		plan := next(t, fleet(2, each([]opt{disrupted, readyNotBack}, "p01")), "1")
		u, ok := update(t, plan, "p01")
		if !ok {
			t.Fatalf("p01 not updated (held %+v)", plan.Held)
		}
		if !u.Disrupts {
			t.Errorf("p01's restart took no slot")
		}
		if got := heldReason(plan, "p02"); got != HeldByMaxUnavailable {
			t.Errorf("p02 held for %q, want %q", got, HeldByMaxUnavailable)
		}
	})
	t.Run("released and failed since, an owed resize takes a slot: none left with p02 down", func(t *testing.T) {
		// Found by TestModel (-rapid.seed=1674583798857000453): a pod
		// counted again after it was released is not down for the
		// rollout's write; a write owed into it once it is Ready again
		// went as the continuation of that write, beside maxUnavailable
		// pods the rollout had down.
		owes := func(p *Pod) { p.ResizeOwed, p.Ready = []ContainerResources{{Name: "exporter"}}, false }
		pods := fleet(2, merge(each([]opt{updated, wasReleased, owes}, "p01"), each([]opt{disrupted, notReady}, "p02")))
		if !pods[0].Again || pods[0].Disrupting {
			t.Fatalf("setup: p01 Again %v, Disrupting %v", pods[0].Again, pods[0].Disrupting)
		}
		plan := next(t, pods, "1")
		if got := heldReason(plan, "p01"); got != HeldByMaxUnavailable {
			t.Errorf("p01 held for %q, want %q (updates %+v)", got, HeldByMaxUnavailable, plan.Updates)
		}
	})
	t.Run("ready again, a restart takes a slot: none left with p02 down", func(t *testing.T) {
		pods := fleet(2, merge(each([]opt{disrupted, readyNotBack}, "p01"), each([]opt{disrupted, notReady}, "p02")))
		plan := next(t, pods, "1")
		if _, ok := update(t, plan, "p01"); ok {
			t.Errorf("p01 restarted beside p02, maxUnavailable 1: %+v", plan.Updates)
		}
		if got := heldReason(plan, "p01"); got != HeldByMaxUnavailable {
			t.Errorf("p01 held for %q, want %q", got, HeldByMaxUnavailable)
		}
	})
}

func heldReason(plan Plan, name string) HoldReason {
	for _, h := range plan.Held {
		if h.Pod.Name == name {
			return h.Reason
		}
	}
	return ""
}
