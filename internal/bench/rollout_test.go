package bench

import (
	"bytes"
	"image/png"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gonum.org/v1/plot/plotter"
	"pgregory.net/rapid"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{7}, 7},
		{nil, 0},
	}
	for _, tt := range tests {
		if got := Median(tt.in); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestMedianProperties: the median lies between the smallest and the
// largest value, does not depend on their order, and leaves its input as
// it was.
func TestMedianProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		vs := rapid.SliceOfN(rapid.Float64Range(-1e6, 1e6), 1, 20).Draw(t, "values")
		before := slices.Clone(vs)
		m := Median(vs)
		if !slices.Equal(vs, before) {
			t.Fatalf("Median changed its input: %v, was %v", vs, before)
		}
		if m < slices.Min(vs) || m > slices.Max(vs) {
			t.Fatalf("Median(%v) = %v, outside [%v, %v]", vs, m, slices.Min(vs), slices.Max(vs))
		}
		shuffled := rapid.Permutation(vs).Draw(t, "shuffled")
		if got := Median(shuffled); got != m {
			t.Fatalf("Median(%v) = %v, but %v of the same values in order %v", shuffled, got, m, vs)
		}
	})
}

func phase(pods int, mu string, round int, kind string, seconds float64) RolloutPhase {
	return RolloutPhase{Pods: pods, MaxUnavailable: mu, Round: round, Kind: kind, Seconds: seconds}
}

func TestCompareRollouts(t *testing.T) {
	sizes := []int{1000, 10000}
	tests := []struct {
		name   string
		phases []RolloutPhase
		want   []RolloutComparison
	}{
		{
			name: "the doc comment's case: medians 13 s and 11 s, over 1.15",
			phases: []RolloutPhase{
				phase(1000, "100%", 1, KindController, 12), phase(1000, "100%", 1, KindBaseline, 10),
				phase(1000, "100%", 2, KindBaseline, 12), phase(1000, "100%", 2, KindController, 14),
			},
			want: []RolloutComparison{{Pods: 1000, MaxUnavailable: "100%", ControllerSeconds: 13, BaselineSeconds: 11,
				Ratio: 13.0 / 11, Goal: Goal{Name: "time to the last pod write / baseline, 1000 pods", Target: "≤ 1.15", Value: 13.0 / 11}}},
		},
		{
			name: "the larger size has the looser goal",
			phases: []RolloutPhase{
				phase(10000, "10%", 1, KindController, 120), phase(10000, "10%", 1, KindBaseline, 100),
			},
			want: []RolloutComparison{{Pods: 10000, MaxUnavailable: "10%", ControllerSeconds: 120, BaselineSeconds: 100,
				Ratio: 1.2, Goal: Goal{Name: "time to the last pod write / baseline, 10000 pods", Target: "≤ 1.30", Value: 1.2, Met: true}}},
		},
		{
			name:   "no baseline, no comparison",
			phases: []RolloutPhase{phase(1000, "10%", 1, KindController, 5)},
		},
		{
			name:   "a baseline that took no time meets no goal",
			phases: []RolloutPhase{phase(1000, "10%", 1, KindController, 5), phase(1000, "10%", 1, KindBaseline, 0)},
			want: []RolloutComparison{{Pods: 1000, MaxUnavailable: "10%", ControllerSeconds: 5,
				Goal: Goal{Name: "time to the last pod write / baseline, 1000 pods", Target: "≤ 1.15"}}},
		},
		{
			name:   "a size without a goal",
			phases: []RolloutPhase{phase(50, "10%", 1, KindController, 2), phase(50, "10%", 1, KindBaseline, 2)},
			want:   []RolloutComparison{{Pods: 50, MaxUnavailable: "10%", ControllerSeconds: 2, BaselineSeconds: 2, Ratio: 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, CompareRollouts(tt.phases, sizes)); diff != "" {
				t.Errorf("CompareRollouts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRolloutSummary(t *testing.T) {
	tests := []struct {
		name   string
		report RolloutReport
		want   map[string]any
	}{
		{
			name: "the worst of the two maxUnavailable values, and each",
			report: RolloutReport{Sizes: []int{1000, 10000}, Comparisons: []RolloutComparison{
				{Pods: 1000, MaxUnavailable: "100%", Ratio: 1.1},
				{Pods: 1000, MaxUnavailable: "10%", Ratio: 1.23456},
				{Pods: 10000, MaxUnavailable: "100%", Ratio: 1.4},
			}},
			want: map[string]any{
				"rollout_1000_ratio": 1.235, "rollout_1000_ratio_100pct": 1.1, "rollout_1000_ratio_10pct": 1.235, "rollout_1000_pods": 1000,
				"rollout_10000_ratio": 1.4, "rollout_10000_ratio_100pct": 1.4, "rollout_10000_pods": 10000,
			},
		},
		{
			name:   "a small run: its own sizes under the same keys",
			report: RolloutReport{Sizes: []int{200}, Comparisons: []RolloutComparison{{Pods: 200, MaxUnavailable: "100%", Ratio: 2}}},
			want: map[string]any{
				"rollout_1000_ratio": 2.0, "rollout_1000_ratio_100pct": 2.0, "rollout_1000_pods": 200,
				"rollout_10000_ratio": NotAvailable, "rollout_10000_pods": NotAvailable,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.report.Summary()); diff != "" {
				t.Errorf("Summary (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRolloutMarkdown(t *testing.T) {
	r := RolloutReport{Scale: "small", Sizes: []int{200, 1000}, Rounds: []int{5, 2},
		Phases: []RolloutPhase{phase(200, "10%", 1, KindController, 4), phase(200, "100%", 1, KindBaseline, 2), phase(200, "100%", 1, KindController, 3)}}
	r.Comparisons = CompareRollouts(r.Phases, []int{1000})
	var b bytes.Buffer
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"Scale small, , 5 rounds of 200 pods, 2 of 1000 with the controller",
		"| 200 | 100% | 3.0 | 2.0 | 1.500 |  |  |",
		"| 200 | 100% | 1 | controller | 3.0 | 67 |",
		"| 200 | 100% | 1 | baseline | 2.0 | 100 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// Phases by size, then 100% before 10%.
	if strings.Index(md, "| 200 | 100% | 1 | baseline") > strings.Index(md, "| 200 | 10% | 1 | controller") {
		t.Errorf("phases out of order:\n%s", md)
	}
}

func TestSteps(t *testing.T) {
	got := steps([]Progress{{Seconds: 1, Updated: 10}, {Seconds: 3, Updated: 40}}, func(p Progress) int { return p.Updated })
	want := plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 0}, {X: 1, Y: 10}, {X: 3, Y: 10}, {X: 3, Y: 40}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
}

func TestCharts(t *testing.T) {
	progress := []Progress{{Seconds: 1, Updated: 100, UpdatedReady: 20}, {Seconds: 2, Updated: 200, UpdatedReady: 200}}
	ctl, base := phase(200, "100%", 1, KindController, 2), phase(200, "100%", 1, KindBaseline, 2)
	ctl.Progress, base.Progress = progress, progress
	r := RolloutReport{Scale: "small", Sizes: []int{200, 1000}, Phases: []RolloutPhase{
		ctl, base,
		// Round 2, the larger size, and a pair without its baseline: no chart.
		phase(200, "100%", 2, KindController, 2), phase(1000, "100%", 1, KindController, 2), phase(200, "10%", 1, KindController, 2),
	}}
	charts := r.Charts()
	if len(charts) != 1 {
		t.Fatalf("got %d charts, want 1: %+v", len(charts), charts)
	}
	c := charts[0]
	if c.File != "rollout_1000_100pct.png" || !strings.Contains(c.Title, "200 pods") || len(c.Lines) != 4 {
		t.Errorf("chart %q titled %q with %d lines", c.File, c.Title, len(c.Lines))
	}
	var b bytes.Buffer
	if err := c.WritePNG(&b); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if img.Bounds().Dx() <= img.Bounds().Dy() {
		t.Errorf("chart is %v, want wider than tall", img.Bounds())
	}
}
