package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// InjectGoalSets and InjectGoalNsPerOp are the injection's goal: with 20
// SidecarSets in the webhook's cache, 30 µs per pod.
const (
	InjectGoalSets    = 20
	InjectGoalNsPerOp = 30_000
)

// InjectRun is one repetition of the injection benchmark at one size.
type InjectRun struct {
	NsPerOp     float64 `json:"ns_per_op"`
	AllocsPerOp int64   `json:"allocs_per_op"`
	BytesPerOp  int64   `json:"bytes_per_op"`
}

// InjectSize is the injection benchmark's repetitions with Sets SidecarSets
// in the cache, and their medians.
type InjectSize struct {
	Sets              int         `json:"sets"`
	MedianNsPerOp     float64     `json:"median_ns_per_op"`
	MedianAllocsPerOp float64     `json:"median_allocs_per_op"`
	MedianBytesPerOp  float64     `json:"median_bytes_per_op"`
	Runs              []InjectRun `json:"runs"`
	// Goal is set for InjectGoalSets only.
	Goal *Goal `json:"goal,omitempty"`
}

// NewInjectSize returns the medians of runs with sets SidecarSets, judged
// against the goal when sets is InjectGoalSets. Worked case: 20 sets, runs
// of 31, 29 and 28 µs: median 29 µs, goal met.
func NewInjectSize(sets int, runs []InjectRun) InjectSize {
	ns, allocs, bytes := make([]float64, len(runs)), make([]float64, len(runs)), make([]float64, len(runs))
	for i, r := range runs {
		ns[i], allocs[i], bytes[i] = r.NsPerOp, float64(r.AllocsPerOp), float64(r.BytesPerOp)
	}
	s := InjectSize{Sets: sets, MedianNsPerOp: Median(ns), MedianAllocsPerOp: Median(allocs), MedianBytesPerOp: Median(bytes), Runs: runs}
	if sets == InjectGoalSets && len(runs) > 0 {
		s.Goal = &Goal{Name: "ns per injection", Target: fmt.Sprintf("≤ %d", InjectGoalNsPerOp), Value: s.MedianNsPerOp,
			Met: s.MedianNsPerOp <= InjectGoalNsPerOp}
	}
	return s
}

// InjectReport is what the injection benchmark writes to
// bench/results/inject.json.
type InjectReport struct {
	Date        string `json:"date"`
	Machine     string `json:"machine"`
	Repetitions int    `json:"repetitions"`
	// Matching is how many of the sets select the pod, at most.
	Matching int          `json:"matching"`
	Sizes    []InjectSize `json:"sizes"`
}

// Summary returns the report's keys of bench/results/summary.json:
// inject_ns_per_op_N_sets, the median, for each size N.
func (r InjectReport) Summary() map[string]any {
	s := map[string]any{}
	for _, size := range r.Sizes {
		s[fmt.Sprintf("inject_ns_per_op_%d_sets", size.Sets)] = round(size.MedianNsPerOp, 0)
	}
	return s
}

// WriteMarkdown writes the report as bench/results/inject.md.
func (r InjectReport) WriteMarkdown(w *bytes.Buffer) {
	fmt.Fprintf(w, "# Injection benchmark\n\n")
	fmt.Fprintf(w, "%s, %s. BenchmarkInjectPod: a 5-container pod injected against N SidecarSets held in the webhook's cache, ", r.Date, r.Machine)
	fmt.Fprintf(w, "of which at most %d select it; each size run %d times, one after the other. Medians of the repetitions.\n\n", r.Matching, r.Repetitions)
	fmt.Fprintf(w, "| sets | median ns/op | median allocs/op | median B/op | each run, ns/op | goal | met |\n|---|---|---|---|---|---|---|\n")
	for _, s := range r.Sizes {
		runs := make([]string, len(s.Runs))
		for i, run := range s.Runs {
			runs[i] = fmt.Sprintf("%.0f", run.NsPerOp)
		}
		goal, verdict := "", ""
		if s.Goal != nil {
			goal, verdict = s.Goal.Target, met(s.Goal.Met)
		}
		fmt.Fprintf(w, "| %d | %.0f | %.0f | %.0f | %s | %s | %s |\n", s.Sets, s.MedianNsPerOp, s.MedianAllocsPerOp, s.MedianBytesPerOp,
			strings.Join(runs, ", "), goal, verdict)
	}
}

// Write writes inject.json and inject.md into dir and merges the report's
// keys into dir's summary.json.
func (r InjectReport) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	var md bytes.Buffer
	r.WriteMarkdown(&md)
	return errors.Join(
		os.WriteFile(filepath.Join(dir, "inject.json"), append(data, '\n'), 0o644),
		os.WriteFile(filepath.Join(dir, "inject.md"), md.Bytes(), 0o644),
		MergeSummary(filepath.Join(dir, "summary.json"), r.Summary()),
	)
}
