// Package bench holds what the benchmarks under test/bench compute without
// a cluster: latency percentiles, a process's CPU time from /proc, counters
// from a Prometheus text exposition, the admission benchmark's ratios to
// its floor and the goals they meet, and bench/results/summary.json, which
// every benchmark merges its figures into.
package bench
