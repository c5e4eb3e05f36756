// Package metrics defines the manager's Prometheus series and registers them
// on controller-runtime's registry, which the manager's metrics endpoint
// serves (with controller-runtime's own and the Go runtime's).
//
// Two kinds of series come from a replica. The webhook's (injections, their
// requests and latency) come from every replica, since every replica serves
// the webhooks: sum them over the replicas. The controller's (pods by state,
// info, stalls, update durations) come only from the leader, the one replica
// that reconciles; a replica that does not lead has none.
//
// The series are documented in docs/metrics.md, whose table the tests keep
// equal to the series defined here; the tests also check every expression
// of the chart's dashboards against what the registry holds.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
)

// Series names.
const (
	PodsName              = "sidecarset_pods"
	InfoName              = "sidecarset_info"
	RolloutStalledName    = "sidecarset_rollout_stalled"
	RolloutStallsName     = "sidecarset_rollout_stalls_total"
	PodUpdateDurationName = "sidecarset_pod_update_duration_seconds"
	InjectionsName        = "sidecarset_injections_total"
	InjectionRequestsName = "sidecarset_injection_requests_total"
	InjectionDurationName = "sidecarset_injection_duration_seconds"
)

// Label names.
const (
	labelSidecarSet = "sidecarset"
	labelState      = "state"
	labelRevision   = "revision"
	labelResult     = "result"
)

// Pod states of sidecarset_pods: each is a count of the SidecarSet's status.
const (
	StateMatched       = "matched"
	StateUpdated       = "updated"
	StateReady         = "ready"
	StateUpdatedReady  = "updated_ready"
	StateNotUpgradable = "not_upgradable"
	StateDrifted       = "drifted"
	StateUnmanaged     = "unmanaged"
	StateSkipped       = "skipped"
)

// Results of sidecarset_injections_total, per SidecarSet that matched a pod.
const (
	// ResultInjected: the set's sidecars went into the pod.
	ResultInjected = "injected"
	// ResultSkipped: a per-pod check left the set out (the pod counts in
	// the set's skippedPods).
	ResultSkipped = "skipped"
	// ResultNotInjected: the set was not injected for a reason of its own,
	// such as a container name the pod already uses (the pod counts as
	// unmanaged).
	ResultNotInjected = "not_injected"
)

// Results of sidecarset_injection_requests_total, per call of the pod
// webhook.
const (
	// RequestInjected: at least one SidecarSet was injected.
	RequestInjected = "injected"
	// RequestUnchanged: none was (none matched, the pod opted out, every
	// matching set was left out).
	RequestUnchanged = "unchanged"
	// RequestError: the webhook answered with an error; the apiserver then
	// applies the webhook's failurePolicy.
	RequestError = "error"
)

var (
	pods = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: PodsName,
		Help: "Pods of a SidecarSet by state, as its status counts them (matched, updated, ready, updated_ready, not_upgradable, drifted, unmanaged, skipped). Leader only.",
	}, []string{labelSidecarSet, labelState})
	info = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: InfoName,
		Help: "1 for each SidecarSet, labelled with its latest revision. Leader only.",
	}, []string{labelSidecarSet, labelRevision})
	stalled = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: RolloutStalledName,
		Help: "1 while a SidecarSet's condition Stalled is True, else 0. Leader only.",
	}, []string{labelSidecarSet})
	stalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: RolloutStallsName,
		Help: "Rollouts that stalled (no progress within progressDeadlineSeconds) and paused themselves. Leader only.",
	}, []string{labelSidecarSet})
	updateDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: PodUpdateDurationName,
		Help: "Time from the controller's in-place write of a pod's sidecar images to the pod being back: the new containers run the written images and, if the write took a ready pod down, the pod is Ready again. Leader only.",
		// 0.5s to about 68 minutes.
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 14),
	}, []string{labelSidecarSet})
	injections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: InjectionsName,
		Help: "Pods created (dry runs left out) that a SidecarSet matched, by what injection did with the set: injected, skipped, not_injected. Every replica.",
	}, []string{labelSidecarSet, labelResult})
	injectionRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: InjectionRequestsName,
		Help: "Calls of the pod webhook, dry runs included, by result: injected, unchanged, error. Every replica.",
	}, []string{labelResult})
	injectionDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: InjectionDurationName,
		Help: "Time the pod webhook's handler took per pod, from the decoded request to the answer. Every replica.",
		// 0.5ms to about 4.8s; the apiserver gives a call 5s by default.
		Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 11),
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(pods, info, stalled, stalls, updateDuration, injections, injectionRequests, injectionDuration)
	// Every request result is a series from the start: a rate over a
	// counter that appears only with its first increment misses it.
	for _, r := range []string{RequestInjected, RequestUnchanged, RequestError} {
		injectionRequests.WithLabelValues(r)
	}
}

// revisions holds the revision each set's info series carries, so that a
// new revision replaces the old series rather than adding one.
var revisions = struct {
	sync.Mutex
	of map[string]string
}{of: map[string]string{}}

// RecordStatus makes the controller's series of the SidecarSet named set
// say what its status st says: the pods by state, its latest revision and
// whether it is stalled. The controller calls it with the status it wrote,
// or found already written, so that the series never disagree with it.
func RecordStatus(set string, st v1alpha1.SidecarSetStatus) {
	for state, n := range map[string]int32{
		StateMatched:       st.MatchedPods,
		StateUpdated:       st.UpdatedPods,
		StateReady:         st.ReadyPods,
		StateUpdatedReady:  st.UpdatedReadyPods,
		StateNotUpgradable: st.NotUpgradablePods,
		StateDrifted:       st.DriftedPods,
		StateUnmanaged:     st.UnmanagedPods,
		StateSkipped:       st.SkippedPods,
	} {
		pods.WithLabelValues(set, state).Set(float64(n))
	}
	stalled.WithLabelValues(set).Set(boolValue(meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionStalled)))

	revisions.Lock()
	defer revisions.Unlock()
	if old, ok := revisions.of[set]; ok && old != st.LatestRevision {
		info.DeleteLabelValues(set, old)
	}
	revisions.of[set] = st.LatestRevision
	info.WithLabelValues(set, st.LatestRevision).Set(1)
}

// RolloutStalled counts a stall of the SidecarSet named set: its rollout
// made no progress within progressDeadlineSeconds and paused itself.
func RolloutStalled(set string) {
	stalls.WithLabelValues(set).Inc()
}

// PodUpdated observes how long an in-place write of the SidecarSet named
// set took to complete.
func PodUpdated(set string, took time.Duration) {
	updateDuration.WithLabelValues(set).Observe(took.Seconds())
}

// ForgetSet deletes the controller's series of a deleted SidecarSet.
func ForgetSet(set string) {
	only := prometheus.Labels{labelSidecarSet: set}
	pods.DeletePartialMatch(only)
	info.DeletePartialMatch(only)
	stalled.DeletePartialMatch(only)
	stalls.DeletePartialMatch(only)
	updateDuration.DeletePartialMatch(only)
	revisions.Lock()
	defer revisions.Unlock()
	delete(revisions.of, set)
}

// ForgetInjections deletes the webhook's series of a deleted SidecarSet.
func ForgetInjections(set string) {
	injections.DeletePartialMatch(prometheus.Labels{labelSidecarSet: set})
}

// Admission records one call of the pod webhook: took is the handler's
// time, res the injection's result (nil when the call was answered before
// injecting), errored whether the answer was an error, dryRun whether the
// request was a dry run, which creates no pod.
func Admission(took time.Duration, res *inject.Result, errored, dryRun bool) {
	injectionDuration.Observe(took.Seconds())
	result := RequestUnchanged
	switch {
	case errored:
		result = RequestError
	case res != nil && len(res.Injected) > 0:
		result = RequestInjected
	}
	injectionRequests.WithLabelValues(result).Inc()
	if res == nil || errored || dryRun {
		return
	}
	for set, r := range InjectionResults(*res) {
		injections.WithLabelValues(set, r).Inc()
	}
}

// InjectionResults returns, by SidecarSet name, what injecting one pod did
// with each set that matched it: ResultInjected, ResultSkipped (a per-pod
// check left it out) or ResultNotInjected (it matched, or its selector could
// not be read, and it was not injected for a reason of its own). Sets that
// did not match, and sets of a pod that opted out, are not in it.
func InjectionResults(res inject.Result) map[string]string {
	out := map[string]string{}
	for _, ev := range res.Events {
		if ev.Reason == inject.ReasonNotInjected {
			out[ev.Set] = ResultNotInjected
		}
	}
	for _, s := range res.Skipped {
		out[s.Set] = ResultSkipped
	}
	for _, name := range res.Injected {
		out[name] = ResultInjected
	}
	return out
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
