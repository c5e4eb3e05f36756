// Package bench holds what the benchmarks compute without a cluster:
// latency percentiles and medians, a process's CPU time from /proc,
// counters from a Prometheus text exposition, the admission benchmark's
// ratios to its floor, the rollout benchmark's ratios to its baseline and
// its charts, the injection benchmark's medians, the goals they meet, and
// bench/results/summary.json, which every benchmark merges its figures
// into.
package bench
