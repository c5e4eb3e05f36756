package rollout

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// TestKeptBack: what keeps a pod off the latest revision, whatever the
// count of pods, in the order Next and `kubectl sidecarset restart` tell
// it.
func TestKeptBack(t *testing.T) {
	zoneA := &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}
	for _, tc := range []struct {
		name     string
		strategy v1alpha1.UpdateStrategy
		labels   map[string]string
		want     string
	}{
		{"nothing", v1alpha1.UpdateStrategy{}, nil, ""},
		{"partition 0", v1alpha1.UpdateStrategy{Partition: ptr.To(intstr.FromInt32(0))}, nil, ""},
		{"partition 0%", v1alpha1.UpdateStrategy{Partition: ptr.To(intstr.FromString("0%"))}, nil, ""},
		{"partition 1%, rounded up", v1alpha1.UpdateStrategy{Partition: ptr.To(intstr.FromString("1%"))}, nil,
			"updateStrategy.partition 1% keeps pods on older revisions"},
		{"partition 2", v1alpha1.UpdateStrategy{Partition: ptr.To(intstr.FromInt32(2))}, nil,
			"updateStrategy.partition 2 keeps pods on older revisions"},
		{"paused before the partition", v1alpha1.UpdateStrategy{Paused: true, Partition: ptr.To(intstr.FromInt32(2))}, nil,
			"updateStrategy.paused is true"},
		{"NotUpdate", v1alpha1.UpdateStrategy{Type: v1alpha1.NotUpdateStrategy}, nil, "updateStrategy.type is NotUpdate"},
		{"selector selects the pod", v1alpha1.UpdateStrategy{Selector: zoneA}, map[string]string{"zone": "a"}, ""},
		{"selector leaves the pod out", v1alpha1.UpdateStrategy{Selector: zoneA}, map[string]string{"zone": "b"},
			"updateStrategy.selector leaves the pod out"},
	} {
		got, partition := KeptBack(tc.strategy, tc.labels)
		if got != tc.want || partition != strings.HasPrefix(tc.want, "updateStrategy.partition") {
			t.Errorf("%s: KeptBack = %q, %v; want %q", tc.name, got, partition, tc.want)
		}
	}
}

// TestHoldChain: a write that several holds would keep is told by the
// first in holdChain: the node before the kubelet, the kubelet before
// another set, and maxUnavailable before a budget.
func TestHoldChain(t *testing.T) {
	inFlight := Pod{Containers: []Container{{Name: "exporter", Runs: true, Running: true, InFlight: true}}}
	ready := Pod{PodReady: true, Containers: []Container{{Name: "exporter", Runs: true, Running: true}}}
	restart := PodUpdate{Disrupts: true, Containers: []ContainerImage{{Name: "exporter", Image: "exporter:v2"}}}
	owed := Pod{PodReady: true, Disrupting: true, Containers: ready.Containers}
	handoff := PodUpdate{Action: ActionHandoff, Containers: []ContainerImage{{Name: "exporter", Image: "empty:v1"}}}
	for _, tc := range []struct {
		name string
		j    job
		t    tally
		want HoldReason
	}{
		{"nothing holds", job{}, tally{room: 1}, ""},
		{"node lost and in flight", job{pod: Pod{NodeLost: true, Containers: inFlight.Containers}}, tally{room: 1}, HeldNodeLost},
		{"in flight and another set's", job{pod: Pod{DisruptedBy: []string{"other"}, Containers: inFlight.Containers}}, tally{room: 1}, HeldInFlight},
		{"no room and no budget", job{pod: ready, u: restart}, tally{}, HeldByMaxUnavailable},
		{"room, budget spent", job{pod: ready, u: restart},
			tally{room: 1, budgets: map[types.NamespacedName][]Budget{{}: {{Name: "ns/b"}}}}, HeldByDisruptionBudget},
		{"no room, but the pod counts already", job{pod: owed, u: restart}, tally{}, ""},
		{"a handoff within the pod's slot, no room", job{pod: owed, u: handoff}, tally{}, ""},
		{"a handoff within the pod's slot, pods counted in no slot over maxUnavailable", job{pod: owed, u: handoff},
			tally{room: -1, slotless: 1}, HeldByMaxUnavailable},
		// maxUnavailable lowered under the pods in slots: held, each
		// would wait for the others' handoffs for ever.
		{"a handoff within the pod's slot, pods in slots over maxUnavailable", job{pod: owed, u: handoff}, tally{room: -2}, ""},
	} {
		if got, _, _ := tc.t.holds(tc.j); got != tc.want {
			t.Errorf("%s: held %q, want %q", tc.name, got, tc.want)
		}
	}
}
