package bench

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func durations(ms ...int) []time.Duration {
	ds := make([]time.Duration, len(ms))
	for i, m := range ms {
		ds[i] = time.Duration(m) * time.Millisecond
	}
	return ds
}

func TestPercentile(t *testing.T) {
	tests := []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"median of ten is the 5th", durations(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.5, 5 * time.Millisecond},
		{"p90 of ten is the 9th", durations(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.9, 9 * time.Millisecond},
		{"p99 of ten rounds up to the 10th", durations(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
		{"p99 of 200 is the 198th", durations(seq(200)...), 0.99, 198 * time.Millisecond},
		{"one value is every percentile", durations(7), 0.01, 7 * time.Millisecond},
		{"no values", nil, 0.5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.sorted, tt.q); got != tt.want {
				t.Errorf("Percentile(q=%v) = %v, want %v", tt.q, got, tt.want)
			}
		})
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i + 1
	}
	return s
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		name string
		ds   []time.Duration
		want Latencies
	}{
		{"unsorted input", durations(10, 1, 9, 2, 8, 3, 7, 4, 6, 5), Latencies{P50: 5, P90: 9, P99: 10}},
		{"one outlier in a hundred stays above p99", durations(append(seq(99), 500)...), Latencies{P50: 50, P90: 90, P99: 99}},
		{"empty", nil, Latencies{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]time.Duration(nil), tt.ds...)
			if diff := cmp.Diff(tt.want, Summarize(tt.ds)); diff != "" {
				t.Errorf("Summarize (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(in, tt.ds); diff != "" {
				t.Errorf("Summarize changed its input (-before +after):\n%s", diff)
			}
		})
	}
}
