package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMerge(t *testing.T) {
	tests := []struct {
		name        string
		old, values map[string]any
		want        map[string]any
	}{
		{
			name:   "other benchmarks' keys stay, ours replace",
			old:    map[string]any{"scale": "full", "rollout_1000_ratio": 1.2, "admission_errors": 4.0},
			values: map[string]any{"scale": "small", "admission_errors": 0.0},
			want:   map[string]any{"scale": "small", "rollout_1000_ratio": 1.2, "admission_errors": 0.0},
		},
		{
			name:   "into nothing",
			old:    nil,
			values: map[string]any{"admission_policy_p99_ratio": "not available"},
			want:   map[string]any{"admission_policy_p99_ratio": "not available"},
		},
		{
			name:   "nothing to add",
			old:    map[string]any{"scale": "full"},
			values: nil,
			want:   map[string]any{"scale": "full"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := json.Marshal(tt.old)
			if diff := cmp.Diff(tt.want, Merge(tt.old, tt.values)); diff != "" {
				t.Errorf("Merge (-want +got):\n%s", diff)
			}
			after, _ := json.Marshal(tt.old)
			if string(before) != string(after) {
				t.Errorf("Merge changed old: %s became %s", before, after)
			}
		})
	}
}

func TestMergeSummary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results", "summary.json")
	if err := MergeSummary(path, map[string]any{"rollout_1000_ratio": 1.1, "scale": "full"}); err != nil {
		t.Fatal(err)
	}
	if err := MergeSummary(path, map[string]any{"admission_errors": 0, "scale": "small"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"rollout_1000_ratio": 1.1, "scale": "small", "admission_errors": 0.0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summary.json (-want +got):\n%s", diff)
	}
}

func TestMergeSummaryKeepsWhatItCannotRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "summary.json")
	if err := os.WriteFile(path, []byte("[1, 2]"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := MergeSummary(path, map[string]any{"admission_errors": 0})
	if err == nil || !strings.Contains(err.Error(), "not a JSON object") {
		t.Fatalf("MergeSummary() error = %v, want one saying the file is not a JSON object", err)
	}
	data, _ := os.ReadFile(path)
	if string(data) != "[1, 2]" {
		t.Errorf("the unreadable file was changed to %q", data)
	}
}
