package bench

import (
	"math"
	"slices"
	"time"
)

// Latencies are the percentiles of a set of request latencies, in
// milliseconds.
type Latencies struct {
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
}

// Summarize returns the 50th, 90th and 99th percentiles of ds (Percentile);
// all zero when ds is empty. It does not change ds.
func Summarize(ds []time.Duration) Latencies {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return Latencies{
		P50: ms(Percentile(sorted, 0.50)),
		P90: ms(Percentile(sorted, 0.90)),
		P99: ms(Percentile(sorted, 0.99)),
	}
}

// Percentile returns the q-quantile (0 < q <= 1) of sorted, by nearest
// rank: the smallest value that at least q of the values do not exceed,
// the ⌈q·n⌉-th smallest. No value is interpolated, so a percentile is
// always a latency some request had. Worked cases:
//
//	[1 2 3 4 5 6 7 8 9 10], q 0.5  -> 5 (the 5th of 10)
//	[1 2 3 4 5 6 7 8 9 10], q 0.9  -> 9
//	[1 2 3 4 5 6 7 8 9 10], q 0.99 -> 10 (⌈9.9⌉ = 10th)
//	[7], any q                     -> 7
//	[], any q                      -> 0
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func ms(d time.Duration) float64 {
	return float64(d) / float64(time.Millisecond)
}
