package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestPool(t *testing.T) {
	phases := []Phase{
		{Sets: 20, Round: 1, Variant: "C", Load: "200/s", Pods: 100, Errors: 0, Seconds: 2, ManagerCPUSeconds: 0.01, Samples: durations(1, 2, 3)},
		{Sets: 20, Round: 1, Variant: "B", Load: "200/s", Pods: 100, Seconds: 1},
		{Sets: 20, Round: 1, Variant: "C", Load: "bulk", Clients: 64, Pods: 50, Seconds: 1},
		{Sets: 20, Round: 2, Variant: "C", Load: "200/s", Pods: 100, Errors: 10, Seconds: 3, ManagerCPUSeconds: 0.02, WebhookCalls: 100, Samples: durations(4, 5, 6, 7)},
	}
	want := []Phase{
		{Sets: 20, Variant: "B", Load: "200/s", Pods: 100, Seconds: 1, AchievedPerSecond: 100},
		{Sets: 20, Variant: "C", Load: "200/s", Pods: 200, Errors: 10, Seconds: 5, AchievedPerSecond: 38,
			ManagerCPUSeconds: 0.03, WebhookCalls: 100, Latencies: Latencies{P50: 4, P90: 7, P99: 7}},
		{Sets: 20, Variant: "C", Load: "bulk", Clients: 64, Pods: 50, Seconds: 1, AchievedPerSecond: 50},
	}
	got := Pool(phases)
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Phase{}, "Samples"), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("Pool (-want +got):\n%s", diff)
	}
	if n := len(got[1].Samples); n != 7 {
		t.Errorf("pooled C at 200/s holds %d samples, want the 7 of both rounds", n)
	}
}

func TestFiguresOf(t *testing.T) {
	pooled := []Phase{
		{Sets: 20, Variant: "C", Load: "50/s", Pods: 100, ManagerCPUSeconds: 0.01},
		{Sets: 20, Variant: "C", Load: "200/s", Pods: 400, Errors: 2, ManagerCPUSeconds: 0.04, Latencies: Latencies{P50: 6.5, P99: 40}},
		{Sets: 20, Variant: "C", Load: "bulk", Pods: 500, AchievedPerSecond: 460, ManagerCPUSeconds: 0.05},
		{Sets: 200, Variant: "C", Load: "200/s", Pods: 400, Latencies: Latencies{P50: 9}},
	}
	tests := []struct {
		name    string
		sets    int
		variant string
		want    Figures
		wantOK  bool
	}{
		{
			name: "every load of the variant counts towards CPU", sets: 20, variant: "C",
			// 0.1 s over 998 pods created.
			want:   Figures{P50MS: 6.5, P99MS: 40, Errors: 2, BulkPerSecond: 460, ManagerCPUMicrosPerCreate: 0.1e6 / 998},
			wantOK: true,
		},
		{name: "no bulk phase", sets: 200, variant: "C", want: Figures{P50MS: 9}, wantOK: false},
		{name: "a variant not measured", sets: 20, variant: "D", want: Figures{}, wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := FiguresOf(pooled, tt.sets, tt.variant)
			if ok != tt.wantOK {
				t.Errorf("FiguresOf ok = %v, want %v", ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("FiguresOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	floor := Figures{P50MS: 2, P99MS: 6, BulkPerSecond: 1200, ManagerCPUMicrosPerCreate: 100}
	tests := []struct {
		name  string
		floor Figures
		path  Figures
		want  Comparison
	}{
		{
			name:  "the webhook as measured before narrowing: only errors met",
			floor: floor,
			path:  Figures{P50MS: 6.7, P99MS: 50, BulkPerSecond: 460, ManagerCPUMicrosPerCreate: 400},
			want: Comparison{Sets: 20, Variant: "C", P50OverheadMS: 4.7, P99Ratio: 50.0 / 6, BulkRatio: 460.0 / 1200,
				ManagerCPUMicrosPerCreate: 300, FloorManagerCPUMicrosPerCreate: 100,
				Goals: goals(0, true, 4.7, false, 50.0/6, false, 460.0/1200, false, 300, false)},
		},
		{
			name:  "every goal met, at its bounds",
			floor: floor,
			path:  Figures{P50MS: 3, P99MS: 9, BulkPerSecond: 960, ManagerCPUMicrosPerCreate: 250},
			want: Comparison{Sets: 20, Variant: "C", P50OverheadMS: 1, P99Ratio: 1.5, BulkRatio: 0.8,
				ManagerCPUMicrosPerCreate: 150, FloorManagerCPUMicrosPerCreate: 100,
				Goals: goals(0, true, 1, true, 1.5, true, 0.8, true, 150, true)},
		},
		{
			name:  "errors fail their goal alone",
			floor: floor,
			path:  Figures{P50MS: 2, P99MS: 6, Errors: 3, BulkPerSecond: 1200, ManagerCPUMicrosPerCreate: 150},
			want: Comparison{Sets: 20, Variant: "C", P99Ratio: 1, BulkRatio: 1, Errors: 3,
				ManagerCPUMicrosPerCreate: 50, FloorManagerCPUMicrosPerCreate: 100,
				Goals: goals(3, false, 0, true, 1, true, 1, true, 50, true)},
		},
		{
			name:  "a floor that measured nothing meets no ratio goal",
			floor: Figures{},
			path:  Figures{P50MS: 2, P99MS: 6, BulkPerSecond: 1200},
			want: Comparison{Sets: 20, Variant: "C", P50OverheadMS: 2,
				Goals: goals(0, true, 2, false, 0, false, 0, false, 0, true)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compare(20, "C", tt.floor, tt.path)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-9), cmpopts.IgnoreFields(Goal{}, "Name", "Target")); diff != "" {
				t.Errorf("Compare (-want +got):\n%s", diff)
			}
		})
	}
}

// goals lists the five goals' values and verdicts in Compare's order.
func goals(errors float64, errorsMet bool, p50 float64, p50Met bool, p99 float64, p99Met bool, bulk float64, bulkMet bool, cpu float64, cpuMet bool) []Goal {
	return []Goal{
		{Value: errors, Met: errorsMet},
		{Value: p50, Met: p50Met},
		{Value: p99, Met: p99Met},
		{Value: bulk, Met: bulkMet},
		{Value: cpu, Met: cpuMet},
	}
}

func TestUnmatchedGoal(t *testing.T) {
	if g := UnmatchedGoal(0); !g.Met {
		t.Errorf("0 calls: goal not met")
	}
	if g := UnmatchedGoal(200); g.Met || g.Value != 200 {
		t.Errorf("200 calls: %+v, want not met with value 200", g)
	}
}

func TestSummary(t *testing.T) {
	report := AdmissionReport{
		Phases: []Phase{{Errors: 1}, {Errors: 2}, {}},
		Comparisons: []Comparison{
			{Sets: 20, Variant: "C", P50OverheadMS: 4.71234, P99Ratio: 8.3333, BulkRatio: 0.38333, ManagerCPUMicrosPerCreate: 301.26},
			{Sets: 200, Variant: "C", P50OverheadMS: 9},
		},
		Unmatched: []Unmatched{{Sets: 20, Variant: "C", Pods: 200, WebhookCalls: 200}},
	}
	tests := []struct {
		name   string
		report AdmissionReport
		want   map[string]any
	}{
		{
			name:   "webhook only: the policy keys say not available",
			report: report,
			want: map[string]any{
				"admission_errors":                    3,
				"admission_webhook_p50_overhead_ms":   4.712,
				"admission_webhook_p99_ratio":         8.333,
				"admission_webhook_bulk_ratio":        0.383,
				"admission_policy_p50_overhead_ms":    NotAvailable,
				"admission_policy_p99_ratio":          NotAvailable,
				"admission_policy_bulk_ratio":         NotAvailable,
				"admission_unmatched_webhook_calls":   200.0,
				"admission_manager_cpu_us_per_create": 301.3,
			},
		},
		{
			name: "both paths",
			report: AdmissionReport{
				Comparisons: []Comparison{
					{Sets: 20, Variant: "C", P50OverheadMS: 0.5, P99Ratio: 1.2, BulkRatio: 0.9, ManagerCPUMicrosPerCreate: 80},
					{Sets: 20, Variant: "D", P50OverheadMS: 0.2, P99Ratio: 1.1, BulkRatio: 0.45, ManagerCPUMicrosPerCreate: 1},
				},
				Unmatched: []Unmatched{{Sets: 20, Variant: "C", WebhookCalls: 0}, {Sets: 20, Variant: "D", WebhookCalls: 0}},
			},
			want: map[string]any{
				"admission_errors":                    0,
				"admission_webhook_p50_overhead_ms":   0.5,
				"admission_webhook_p99_ratio":         1.2,
				"admission_webhook_bulk_ratio":        0.9,
				"admission_policy_p50_overhead_ms":    0.2,
				"admission_policy_p99_ratio":          1.1,
				"admission_policy_bulk_ratio":         0.45,
				"admission_unmatched_webhook_calls":   0.0,
				"admission_manager_cpu_us_per_create": 80.0,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.report.Summary(20)); diff != "" {
				t.Errorf("Summary (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteMarkdownMarksGoals(t *testing.T) {
	report := AdmissionReport{
		Scale: "small", Rounds: 2, PolicyPath: NotAvailable,
		Comparisons: []Comparison{Compare(20, VariantWebhook, Figures{P50MS: 2, P99MS: 6, BulkPerSecond: 1000},
			Figures{P50MS: 2.5, P99MS: 20, BulkPerSecond: 900, ManagerCPUMicrosPerCreate: 100})},
		Unmatched: []Unmatched{{Sets: 20, Variant: VariantWebhook, Pods: 100, WebhookCalls: 100, Goal: UnmatchedGoal(100)}},
		Pooled:    []Phase{{Sets: 20, Variant: "C", Load: "200/s", Pods: 10, Seconds: 1, AchievedPerSecond: 10, Samples: []time.Duration{time.Millisecond}}},
	}
	var b strings.Builder
	if err := report.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"| 20 | C: webhook | p50 overhead (ms) | ≤ +1.0 | 0.5 | met |",
		"| 20 | C: webhook | p99 ratio | ≤ ×1.5 | 3.33 | **not met** |",
		"| 20 | C: webhook | webhook calls for pods no set matches (100 pods) | 0 | 100 | **not met** |",
		"| | D: policy | every goal | | not available | |",
		"| 20 | C | 200/s | 10 | 0 | 10 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("admission.md lacks %q:\n%s", want, md)
		}
	}
}
