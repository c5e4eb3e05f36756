package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNewInjectSize(t *testing.T) {
	runs := []InjectRun{{NsPerOp: 31_000, AllocsPerOp: 100}, {NsPerOp: 29_000, AllocsPerOp: 90}, {NsPerOp: 28_000, AllocsPerOp: 95}}
	tests := []struct {
		name string
		sets int
		want InjectSize
	}{
		{
			name: "the doc comment's case: 20 sets, median 29 µs, met",
			sets: 20,
			want: InjectSize{Sets: 20, MedianNsPerOp: 29_000, MedianAllocsPerOp: 95, Runs: runs,
				Goal: &Goal{Name: "ns per injection", Target: "≤ 30000", Value: 29_000, Met: true}},
		},
		{
			name: "no goal for other sizes",
			sets: 200,
			want: InjectSize{Sets: 200, MedianNsPerOp: 29_000, MedianAllocsPerOp: 95, Runs: runs},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, NewInjectSize(tt.sets, runs)); diff != "" {
				t.Errorf("NewInjectSize (-want +got):\n%s", diff)
			}
		})
	}
	if got := NewInjectSize(20, []InjectRun{{NsPerOp: 45_000}}); got.Goal == nil || got.Goal.Met {
		t.Errorf("45 µs with 20 sets: goal %+v, want not met", got.Goal)
	}
}

func TestInjectReportWrite(t *testing.T) {
	dir := t.TempDir()
	summary := filepath.Join(dir, "summary.json")
	if err := os.WriteFile(summary, []byte(`{"scale":"full","rollout_1000_ratio":1.2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := InjectReport{Repetitions: 1, Matching: 3, Sizes: []InjectSize{
		NewInjectSize(1, []InjectRun{{NsPerOp: 12_345.6}}), NewInjectSize(20, []InjectRun{{NsPerOp: 45_000}}),
	}}
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"scale": "full", "rollout_1000_ratio": 1.2, "inject_ns_per_op_1_sets": 12346.0, "inject_ns_per_op_20_sets": 45000.0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summary.json (-want +got):\n%s", diff)
	}
	md, err := os.ReadFile(filepath.Join(dir, "inject.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| 20 | 45000 | 0 | 0 | 45000 | ≤ 30000 | **not met** |") {
		t.Errorf("inject.md lacks the 20-set row:\n%s", md)
	}
	var back InjectReport
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "inject.json")), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, back); diff != "" {
		t.Errorf("inject.json read back (-want +got):\n%s", diff)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
