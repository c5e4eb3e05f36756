// Package bench measures what pod admission costs through a real
// kube-apiserver: pods created with no admission, through the manager's
// mutating webhook, and through MutatingAdmissionPolicies where the
// manager offers them, at fixed offered rates and in bulk; and the
// manager process's memory with unmanaged and managed pods. Its
// benchmarks run under `make bench` and write bench/results/admission.*
// and memory.*, and their keys of summary.json.
package bench
