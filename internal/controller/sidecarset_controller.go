// Package controller reconciles SidecarSets: it keeps their revisions, rolls
// the latest sidecar images into running pods in place at the pace the
// update strategy sets, and reports how far it got. Every decision is made by
// internal/rollout and internal/status; this package reads the cache, calls
// them, and writes.
package controller

import (
	"cmp"
	"context"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	runtimecontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/metrics"
	"github.com/sidecarset/sidecarset/internal/rollout"
	"github.com/sidecarset/sidecarset/internal/status"
)

// Event reasons.
const (
	ReasonSidecarUpdateFailed = "SidecarUpdateFailed"
	ReasonDriftReverted       = "DriftReverted"
	ReasonDrifted             = "SidecarDrifted"
	ReasonImageRewritten      = "SidecarImageRewritten"
	ReasonNotUpgradable       = "PodsNotUpgradable"
	ReasonRolloutStarted      = status.EventRolloutStarted
	ReasonRolloutStep         = "RolloutStep"
	ReasonRolloutComplete     = status.EventRolloutComplete
	ReasonRolloutStalled      = "RolloutStalled"
	ReasonCorruptState        = "CorruptState"
	ReasonAdopted             = "Adopted"
)

// Pod condition types besides v1alpha1.PodConditionUpgradable.
const (
	// PodConditionDrifted is True while a managed sidecar's image differs
	// from what the controller wrote.
	PodConditionDrifted = status.PodConditionDrifted
)

// UnmanagedRecount is how often, at most, the pods that match a SidecarSet
// but carry no record are counted (and, with adoptionPolicy SameName,
// adopted). The count is a metadata-only list filtered by the set's selector
// on the apiserver, so unmanaged pods never sit in the manager's cache.
const UnmanagedRecount = 30 * time.Second

// concurrentPodWrites bounds the pod writes one reconcile has in flight.
const concurrentPodWrites = 16

// unmanagedPageSize is how many pods' metadata one list request of the
// unmanaged count brings.
const unmanagedPageSize = 500

// Reconciler reconciles SidecarSets.
type Reconciler struct {
	// Client reads from the manager's cache (pods only with the managed
	// label) and writes to the apiserver.
	Client client.Client
	// APIReader reads the apiserver directly: the unmanaged pods are not
	// cached.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Namespace is the manager's namespace, where revisions are kept.
	Namespace string
	Clock     clock.PassiveClock
	// Workers is how many SidecarSets are reconciled at once (one set is
	// never reconciled by two at a time); 0 means DefaultWorkers.
	Workers int
	// WebhookScope, when set, is synced before each reconcile writes.
	WebhookScope *WebhookScope
	// Fence, when set, keeps pod writes within the leader lease.
	Fence *Fence

	// injectCache keeps parsed selectors between reconciles.
	injectCache inject.Cache

	// spending is held from reading the budgets until the writes landed:
	// sets whose pods share a PodDisruptionBudget are reconciled at once by
	// different workers, and each would otherwise spend its last
	// disruption.
	spending sync.Mutex

	mu sync.Mutex
	// memory is what the controller keeps of each SidecarSet between
	// reconciles, by name, under mu.
	memory map[string]*memory
	// leading is when this manager began to reconcile (leadingSince),
	// under mu.
	leading time.Time
}

// memory is what the controller keeps of one SidecarSet between reconciles.
// A restarted manager has none and judges the set from the cluster alone:
// nothing here decides a rollout, it only saves requests or covers for a
// cache that lags the controller's own writes.
type memory struct {
	// unmanaged is the last count of the set's unmanaged pods
	// (countUnmanaged); its zero value, before the first, is stale.
	unmanaged    unmanagedCount
	hasUnmanaged bool
	// status is the status last written, with the resourceVersions it was
	// written over and made (writeStatus); nil before the first.
	status *writtenStatus
	// writes are the pods written whose writes the cache has not shown
	// since (rollout.Fresher).
	writes map[types.NamespacedName]podWrite
	// started is the revision a RolloutStarted event was last told for.
	started string
	// back holds, by pod, the time of the write the pod was last seen
	// back from, whose duration is observed (noteBack).
	back map[types.NamespacedName]time.Time
}

// memoryOf returns the memory of the set named name, made empty when there
// is none. The caller holds r.mu.
func (r *Reconciler) memoryOf(name string) *memory {
	m := r.memory[name]
	if m == nil {
		m = &memory{writes: map[types.NamespacedName]podWrite{}}
		r.memory[name] = m
	}
	return m
}

// forget drops the memory and the series of a deleted set.
func (r *Reconciler) forget(name string) {
	metrics.ForgetSet(name)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.memory, name)
}

// writtenStatus is a status the controller wrote over the set's
// resourceVersion over, making rv (over itself when the spec changed
// meanwhile). While the cache still shows over, the cached status is older
// than this one.
type writtenStatus struct {
	over, rv string
	status   v1alpha1.SidecarSetStatus
}

// DefaultWorkers is how many SidecarSets are reconciled at once by default:
// a set whose reconcile waits on many pod writes or a long unmanaged recount
// does not hold the others back.
const DefaultWorkers = 4

// SetupWithManager registers the controller: SidecarSets, and the managed
// pods and PodDisruptionBudgets that feed their rollouts.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.memory = map[string]*memory{}
	return ctrl.NewControllerManagedBy(mgr).
		// Status writes, this controller's own, need no reconcile.
		For(&v1alpha1.SidecarSet{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(setsOfPod)).
		// A budget's status.disruptionsAllowed is what held pods wait on.
		Watches(&policyv1.PodDisruptionBudget{}, handler.EnqueueRequestsFromMapFunc(r.setsOfBudget)).
		WithOptions(runtimecontroller.Options{MaxConcurrentReconciles: cmp.Or(r.Workers, DefaultWorkers), RateLimiter: rateLimiter()}).
		Named("sidecarset").
		Complete(r)
}

// maxBackoff bounds how long a set whose reconciles failed waits before the
// next try. The workqueue's default grows to 1000 s: after an apiserver
// outage of a few seconds, a rollout whose pods are all ready (no watch
// event wakes it) would sit idle for minutes, and its deadline checks with
// it.
const maxBackoff = 30 * time.Second

// rateLimiter is the workqueue's default but for maxBackoff: per set,
// 5 ms doubling on each failure; overall, 10 retries a second with a burst
// of 100.
func rateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxBackoff),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// setsOfPod maps a managed pod to the SidecarSets its records name.
func setsOfPod(_ context.Context, obj client.Object) []reconcile.Request {
	names := obj.GetAnnotations()[v1alpha1.AnnotationInjected]
	if names == "" {
		return nil
	}
	var reqs []reconcile.Request
	for _, name := range strings.Split(names, ",") {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	return reqs
}

// holdBudgets takes the budgets for one set's plan and writes; the release
// it returns may be called more than once.
func (r *Reconciler) holdBudgets() (release func()) {
	r.spending.Lock()
	return sync.OnceFunc(r.spending.Unlock)
}

// setsOfBudget maps a PodDisruptionBudget to the SidecarSets whose managed
// pods it selects (rollout.BudgetSelector), from the cache: a budget
// elsewhere, or over pods no set manages, wakes no set. An update brings the old budget and the new one
// here, so pods a changed selector let go of are covered too.
func (r *Reconciler) setsOfBudget(ctx context.Context, obj client.Object) []reconcile.Request {
	pdb, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok {
		return nil
	}
	selector, ok := rollout.BudgetSelector(pdb.Spec.Selector)
	if !ok {
		return nil
	}
	managed, err := labels.NewRequirement(v1alpha1.LabelManaged, selection.Equals, []string{"true"})
	if err != nil {
		return nil
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(pdb.Namespace),
		client.MatchingLabelsSelector{Selector: selector.Add(*managed)}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list managed pods for a PodDisruptionBudget change", "podDisruptionBudget", klog.KObj(pdb))
		return nil
	}
	names := sets.New[string]()
	for i := range pods.Items {
		if list := pods.Items[i].Annotations[v1alpha1.AnnotationInjected]; list != "" {
			names.Insert(strings.Split(list, ",")...)
		}
	}
	reqs := make([]reconcile.Request, 0, names.Len())
	for _, name := range sets.List(names) {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	return reqs
}
