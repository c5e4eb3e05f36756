// Package bench measures what pod admission costs through a real
// kube-apiserver: pods created with no admission, through the manager's
// mutating webhook, and through MutatingAdmissionPolicies where the
// manager offers them, at fixed offered rates and in bulk. Its benchmark
// runs under `make bench` and writes bench/results/admission.json,
// admission.md and its keys of summary.json.
package bench
