// Package bench measures the manager through a real kube-apiserver. The
// admission benchmark creates pods with no admission, through the
// manager's mutating webhook, and through MutatingAdmissionPolicies where
// the manager offers them, at fixed offered rates and in bulk
// (admission.*); the memory benchmark measures the manager process's
// memory with unmanaged and managed pods (memory.*); the rollout benchmark
// rolls a sidecar image out over 1,000 and 10,000 pods on simulated nodes,
// by the controller and by a raw baseline with the same client settings,
// interleaved (rollout.* and charts). They run under `make bench`, write
// under bench/results and merge their keys into summary.json.
package bench
