package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
)

// MergeSummary writes values into the JSON object in path (bench/results/
// summary.json), keeping the keys other benchmarks wrote there and
// replacing those in values. A missing file starts empty; one that is not
// a JSON object is an error rather than lost.
func MergeSummary(path string, values map[string]any) error {
	old := map[string]any{}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read %s: %w", path, err)
	default:
		if err := json.Unmarshal(data, &old); err != nil {
			return fmt.Errorf("read %s: not a JSON object (move it away to start a new one): %w", path, err)
		}
	}
	out, err := json.MarshalIndent(Merge(old, values), "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// Written beside it and renamed: a run stopped half-way leaves the old
	// summary whole.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(out, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	return os.Rename(tmp, path)
}

// Merge returns old with the keys of values set to theirs; neither map is
// changed. Worked case: {"scale":"full","rollout_1000_ratio":1.2} merged
// with {"scale":"small","admission_errors":0} gives {"scale":"small",
// "rollout_1000_ratio":1.2,"admission_errors":0}.
func Merge(old, values map[string]any) map[string]any {
	merged := maps.Clone(old)
	if merged == nil {
		merged = map[string]any{}
	}
	maps.Copy(merged, values)
	return merged
}
