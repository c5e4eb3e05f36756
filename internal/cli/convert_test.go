package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestPartitionCounts: how many of the selected pods, none updated, each
// side updates in all, the arithmetic convert's partition warning quotes.
func TestPartitionCounts(t *testing.T) {
	tests := []struct {
		partition         intstr.IntOrString
		matched, selected int
		kruise, ours      int
	}{
		// OpenKruise updates at least one pod under 100%.
		{intstr.FromString("90%"), 5, 5, 1, 0},
		{intstr.FromString("90%"), 9, 9, 1, 0},
		{intstr.FromString("90%"), 10, 10, 1, 1},
		{intstr.FromString("99%"), 2, 2, 1, 0},
		{intstr.FromString("100%"), 5, 5, 0, 0},
		{intstr.FromString("90%"), 1, 1, 0, 0},
		{intstr.FromString("50%"), 12, 12, 6, 6},
		// With a selector OpenKruise counts the percentage over all matched.
		{intstr.FromString("50%"), 10, 2, 0, 1},
		{intstr.FromString("50%"), 10, 8, 3, 4},
		{intstr.FromString("10%"), 20, 2, 0, 1},
		// An integer partition is a count in both.
		{intstr.FromInt32(3), 10, 5, 2, 2},
	}
	for _, tt := range tests {
		if got := kruiseUpdates(tt.partition, tt.matched, tt.selected); got != tt.kruise {
			t.Errorf("partition %s, %d matched, %d selected: OpenKruise updates %d, want %d", tt.partition.String(), tt.matched, tt.selected, got, tt.kruise)
		}
		if got := oursUpdates(tt.partition, tt.selected); got != tt.ours {
			t.Errorf("partition %s, %d selected: sidecarset updates %d, want %d", tt.partition.String(), tt.selected, got, tt.ours)
		}
	}
}

// TestPartitionWarning: convert warns exactly where a partition keeps other
// pods than in OpenKruise, with the numbers of an example.
func TestPartitionWarning(t *testing.T) {
	tests := []struct {
		name     string
		strategy map[string]any
		want     []string // substrings of the one warning; nil: no warning
	}{
		{"90% alone", map[string]any{"partition": "90%"}, []string{"with 2 to 9 pods", "(5 pods: OpenKruise updates 1, sidecarset 0"}},
		{"75% alone", map[string]any{"partition": "75%"}, []string{"with 2 to 3 pods", "(3 pods: OpenKruise updates 1, sidecarset 0"}},
		{"51% alone", map[string]any{"partition": "51%"}, []string{"with 2 to 2 pods", "(2 pods: OpenKruise updates 1, sidecarset 0"}},
		{"99% alone", map[string]any{"partition": "99%"}, []string{"with 2 to 99 pods", "(5 pods: OpenKruise updates 1, sidecarset 0"}},
		{"50% alone rounds alike", map[string]any{"partition": "50%"}, nil},
		{"0%", map[string]any{"partition": "0%"}, nil},
		{"100%", map[string]any{"partition": "100%"}, nil},
		{"an integer", map[string]any{"partition": int64(3)}, nil},
		{"an integer with a selector", map[string]any{"partition": int64(3), "selector": map[string]any{}}, nil},
		{"no partition", map[string]any{"maxUnavailable": int64(2)}, nil},
		{"50% with a selector", map[string]any{"partition": "50%", "selector": map[string]any{}},
			[]string{"with updateStrategy.selector", "of 10 matched pods with 2 selected, OpenKruise updates 0, sidecarset 1"}},
		{"10% with a selector", map[string]any{"partition": "10%", "selector": map[string]any{}},
			[]string{"of 20 matched pods with 2 selected, OpenKruise updates 0, sidecarset 1"}},
		{"100% with a selector", map[string]any{"partition": "100%", "selector": map[string]any{}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &converter{what: "SidecarSet s"}
			c.partition(tt.strategy)
			if tt.want == nil {
				if diff := cmp.Diff([]string(nil), c.notes); diff != "" {
					t.Errorf("warnings (-want +got):\n%s", diff)
				}
				return
			}
			if len(c.notes) != 1 {
				t.Fatalf("warnings %q, want one", c.notes)
			}
			for _, w := range tt.want {
				if !strings.Contains(c.notes[0], w) {
					t.Errorf("warning %q does not say %q", c.notes[0], w)
				}
			}
		})
	}
}

// TestUpgradeStrategy: HotUpgrade carries over on a container with a
// warning, every other upgradeStrategy is dropped with a note.
func TestUpgradeStrategy(t *testing.T) {
	tests := []struct {
		name     string
		key      string
		strategy map[string]any
		want     map[string]any
		notes    []string
	}{
		{"cold", "containers", map[string]any{"upgradeType": "ColdUpgrade"}, nil,
			[]string{"Note: SidecarSet s: p.upgradeType dropped: ColdUpgrade (restart the sidecar with the new image) is sidecarset's default"}},
		{"empty type", "containers", map[string]any{"upgradeType": ""}, nil,
			[]string{"Note: SidecarSet s: p.upgradeType dropped: ColdUpgrade (restart the sidecar with the new image) is sidecarset's default"}},
		{"nothing", "containers", map[string]any{}, nil, nil},
		{"hot", "containers", map[string]any{"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"},
			map[string]any{"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"},
			[]string{"Warning: SidecarSet s: p (HotUpgrade) carried over: the running pods OpenKruise injected for a hot upgrade (envoy-1 and envoy-2) are not adopted, as they carry OpenKruise's version annotations (version.sidecarset.kruise.io/envoy-1, ...), not sidecarset's (version.sidecarset.dev/envoy-1, ...): they keep running unmanaged until recreated, and pods created after step 3 below are sidecarset's; the sidecar reads the same SIDECARSET_VERSION and SIDECARSET_VERSION_ALT variables as with OpenKruise"}},
		// Validation says the empty image is missing.
		{"hot without empty image", "containers", map[string]any{"upgradeType": "HotUpgrade"},
			map[string]any{"upgradeType": "HotUpgrade"},
			[]string{"Warning: SidecarSet s: p (HotUpgrade) carried over"}},
		{"hot init container", "initContainers", map[string]any{"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"}, nil,
			[]string{"Note: SidecarSet s: p dropped: OpenKruise injects an init container as declared and upgrades only containers hot (NAME-1 and NAME-2); sidecarset's validation refuses upgradeType HotUpgrade on an init container"}},
		{"unknown type", "containers", map[string]any{"upgradeType": "hot"}, nil,
			[]string{"Note: SidecarSet s: p.upgradeType dropped: hot is not HotUpgrade, which OpenKruise reads as ColdUpgrade, sidecarset's default"}},
		{"empty image without hot", "containers", map[string]any{"hotUpgradeEmptyImage": "empty:1"}, nil,
			[]string{"Note: SidecarSet s: p.hotUpgradeEmptyImage dropped: only upgradeType HotUpgrade runs the empty image"}},
		{"unknown field", "containers", map[string]any{"upgradeType": "ColdUpgrade", "hotUpgradeImage": "x"}, nil,
			[]string{"Warning: SidecarSet s: p.hotUpgradeImage dropped: not a field of OpenKruise's apps.kruise.io/v1beta1 SidecarSet", "Note: SidecarSet s: p.upgradeType dropped"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &converter{what: "SidecarSet s", apiVersion: kruiseV1beta1}
			got := c.upgradeStrategy(tt.key, "p", "envoy", tt.strategy)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("upgradeStrategy (-want +got):\n%s", diff)
			}
			if len(c.notes) != len(tt.notes) {
				t.Fatalf("notes %q, want %d", c.notes, len(tt.notes))
			}
			for i, n := range tt.notes {
				if !strings.HasPrefix(c.notes[i], n) {
					t.Errorf("note %q does not start with %q", c.notes[i], n)
				}
			}
		})
	}
}
