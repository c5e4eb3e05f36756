package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/rollout"
)

// Reconcile brings one SidecarSet's pods a step closer to its latest
// revision and writes its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	// Before the status is written: a status that observed the set's
	// generation then says the pod webhook sees the pods it matches. A
	// failure does not hold the rollout (nor the stalled-rollout fallback,
	// which reads observedGeneration); it is logged, and the reconcile
	// comes back soon to try again.
	var scopeErr error
	if r.WebhookScope != nil {
		if _, scopeErr = r.WebhookScope.Sync(ctx); scopeErr != nil {
			log.Error(scopeErr, "write the pod webhook's scope; retrying", "after", scopeRetry)
		}
	}
	set := &v1alpha1.SidecarSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, set); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted: its revisions go with it (owner references); pods
			// keep the sidecars they run.
			r.forget(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get SidecarSet: %w", err)
	}
	if set.DeletionTimestamp != nil {
		// Being deleted: writing pods now would race the deletion.
		return ctrl.Result{}, nil
	}

	pods, err := r.matchedPods(ctx, set)
	if err != nil {
		return ctrl.Result{}, err
	}
	pods = r.expected(set.Name, pods)
	// The revisions pods run, and the last completed one, which new pods
	// get while a stalled rollout is paused (inject.FallbackRevision).
	inUse := sets.New[string]()
	for _, p := range pods {
		inUse.Insert(p.rec.Revision)
	}
	if set.Status.CompletedRevision != "" {
		inUse.Insert(set.Status.CompletedRevision)
	}
	history, err := r.syncRevisions(ctx, set, inUse)
	if err != nil {
		return ctrl.Result{}, err
	}

	latest := rollout.NewLatest(set)
	latest.ResizableFrom = history.resizable
	latest.Now = r.Clock.Now()
	r.leadingSince(latest.Now)
	classified := make([]rollout.Pod, len(pods))
	for i, p := range pods {
		classified[i] = rollout.Classify(p.pod, p.rec, latest)
	}
	if err := r.markNodeLost(ctx, pods, classified); err != nil {
		return ctrl.Result{}, err
	}
	r.noteBack(set.Name, classified)
	if err := r.markDisruptedBy(ctx, set.Name, pods, classified); err != nil {
		return ctrl.Result{}, err
	}
	rel, err := r.released(ctx, set, latest, classified)
	if err != nil {
		return ctrl.Result{}, err
	}
	release := r.holdBudgets()
	defer release()
	budgets, err := r.budgets(ctx, pods)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(budgets) == 0 {
		// No budget covers these pods: their writes spend nothing another
		// set could be counting on.
		release()
	}

	plan, err := rollout.Next(rollout.Input{
		Latest:      latest,
		Pods:        classified,
		Strategy:    set.Spec.UpdateStrategy,
		DriftPolicy: set.Spec.DriftPolicy,
		Budgets:     budgets,
		Withdrawn:   history.withdrawn,
		// Pods back whose writes releasedBefore cannot pass yet are
		// written released one by one.
		ReleasedBefore: rel.before,
		ReleaseMargin:  rel.margin,
	})
	if err != nil {
		// Validation refuses such a strategy; one stored before it cannot
		// be acted on until it is fixed.
		r.Recorder.Eventf(set, nil, corev1.EventTypeWarning, "InvalidStrategy", "Plan", "%v", err)
		return ctrl.Result{}, nil
	}

	byKey := make(map[types.NamespacedName]*corev1.Pod, len(pods))
	for _, p := range pods {
		byKey[types.NamespacedName{Namespace: p.pod.Namespace, Name: p.pod.Name}] = p.pod
	}
	// Status counts as progress only the writes that landed. Settles are
	// bookkeeping that neither the status nor other sets' budgets wait
	// for: they go after the status.
	writes, settles, moreSettles := splitSettles(plan.Updates, settlesPerReconcile)
	plan.Updates = r.apply(ctx, set, latest.Name, writes, byKey)
	release()
	// After the writes: a recount lists the matching pods from the
	// apiserver, which would delay the first step of a new revision.
	unmanaged, err := r.countUnmanaged(ctx, set)
	if err != nil {
		// The count is a report, not a gate: keep rolling out with the last one.
		log.Error(err, "count unmanaged pods")
	}
	res, err := r.writeStatus(ctx, set, latest, classified, plan, unmanaged, rel.before)
	settled := r.apply(ctx, set, latest.Name, settles, byKey)
	if err := r.markPods(ctx, set, classified, byKey); err != nil {
		return ctrl.Result{}, err
	}
	if err == nil && scopeErr != nil {
		res.RequeueAfter = sooner(res.RequeueAfter, scopeRetry)
	}
	if after := settlesAgain(moreSettles, len(settles), len(settled)); err == nil && after > 0 {
		res.RequeueAfter = sooner(res.RequeueAfter, after)
	}
	if err == nil && !rel.next.IsZero() {
		// A write back for releaseMargin is released then, which no event
		// tells.
		res.RequeueAfter = sooner(res.RequeueAfter, max(rel.next.Sub(r.Clock.Now()), time.Millisecond))
	}
	if err == nil && slices.ContainsFunc(plan.Held, func(h rollout.Held) bool { return h.Reason == rollout.HeldNodeLost }) {
		// A node coming back brings no event of the set's.
		res.RequeueAfter = sooner(res.RequeueAfter, nodeLostRecheck)
	}
	if err == nil && !plan.ReleaseAt.IsZero() {
		// A pod waiting out minReadySeconds is released then, which no
		// event tells.
		res.RequeueAfter = sooner(res.RequeueAfter, max(plan.ReleaseAt.Sub(r.Clock.Now()), time.Millisecond))
	}
	return res, err
}

// nodeLostRecheck is how often a set with pods on nodes that are not Ready
// looks whether they are back.
const nodeLostRecheck = 30 * time.Second

// markNodeLost sets rollout.Pod.NodeLost on the pods whose node is not
// Ready (its Ready condition is not True, or it is gone): their kubelet
// acts on nothing, and would act on every write at once when back. A pod
// may still show Ready until the node controller marks it.
func (r *Reconciler) markNodeLost(ctx context.Context, pods []matched, classified []rollout.Pod) error {
	lost := map[string]bool{}
	for i, p := range pods {
		name := p.pod.Spec.NodeName
		if name == "" {
			continue
		}
		l, ok := lost[name]
		if !ok {
			node := &corev1.Node{}
			err := r.Client.Get(ctx, client.ObjectKey{Name: name}, node)
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("get node %s: %w", name, err)
			}
			l = err != nil || !nodeReady(node)
			lost[name] = l
		}
		classified[i].NodeLost = l
	}
	return nil
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// sooner returns the sooner of two requeue delays, zero being none.
func sooner(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}

// settlesAgain returns how soon a reconcile that tried settles, landed
// some of them, and left more out (splitSettles) comes back for the rest:
// at once when it left some out and landed some; after settleRetry when
// some failed, or it landed none of a batch cut short (a policy refuses
// them, the apiserver is unwell): once the rollout is over no event may
// bring the set back for them, and at once they would fail again. Zero
// when every settle landed.
func settlesAgain(more bool, tried, landed int) time.Duration {
	switch {
	case more && landed > 0:
		return time.Millisecond
	case more || landed < tried:
		return settleRetry
	}
	return 0
}

// settleRetry is how soon a reconcile whose settles failed tries them again.
const settleRetry = 30 * time.Second

// releaseMargin is how much older than now the controller's view of pods
// may be when the set's status.releasedBefore moves (rollout.ReleasedBefore):
// as long as it trusts its own writes over the cache (expectationTTL). The
// clocks of the managers, and of the nodes, must agree within it too.
const releaseMargin = expectationTTL

// release is what a reconcile makes of the set's status.releasedBefore.
type release struct {
	// before is status.releasedBefore after this reconcile, and next when
	// a write not passed yet may be (rollout.ReleasedBefore).
	before, next time.Time
	// margin is releaseMargin once the manager has led that long, zero
	// before: no pod is written released on its own meanwhile
	// (rollout.Input.ReleaseMargin).
	margin time.Duration
}

// released returns what this reconcile of pods makes of the set's
// status.releasedBefore. It moves only once this manager has led for
// releaseMargin (its cache ran before it led, and may not show the last
// writes of the manager before it yet), and pods that carry
// the set's record but left its selector (strays) hold it as its pods do:
// other sets and budgets still read that record.
func (r *Reconciler) released(ctx context.Context, set *v1alpha1.SidecarSet, latest rollout.Latest, pods []rollout.Pod) (release, error) {
	was, now := latest.ReleasedBefore, latest.Now
	if led := r.leadingSince(now).Add(releaseMargin); now.Before(led) {
		return release{before: was, next: led}, nil
	}
	at, next := rollout.ReleasedBefore(pods, was, now, releaseMargin)
	if at.After(was) {
		strays, err := r.strays(ctx, set.Name, pods, latest)
		if err != nil {
			return release{}, err
		}
		if len(strays) > 0 {
			at, next = rollout.ReleasedBefore(slices.Concat(pods, strays), was, now, releaseMargin)
		}
	}
	return release{before: at, next: next, margin: releaseMargin}, nil
}

// strays classifies the active pods that carry setName's record and are not
// among pods: they left the set's selector.
func (r *Reconciler) strays(ctx context.Context, setName string, pods []rollout.Pod, latest rollout.Latest) ([]rollout.Pod, error) {
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, client.MatchingLabels{v1alpha1.LabelManaged: "true"}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list managed pods: %w", err)
	}
	members := make(map[types.NamespacedName]bool, len(pods))
	for _, p := range pods {
		members[p.Key] = true
	}
	var out []rollout.Pod
	for i := range list.Items {
		pod := &list.Items[i]
		key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
		if members[key] || !rollout.Active(pod) || !strings.Contains(pod.Annotations[v1alpha1.AnnotationState], setName) {
			continue
		}
		pod = r.freshest(pod)
		state, _ := revision.Decode(pod.Annotations)
		if rec, ok := state[setName]; ok {
			out = append(out, rollout.Classify(pod, rec, latest))
		}
	}
	return out, nil
}

// leadingSince returns when this manager began to reconcile: its first
// reconcile, which now is if none came before.
func (r *Reconciler) leadingSince(now time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leading.IsZero() {
		r.leading = now
	}
	return r.leading
}

// scopeRetry is how soon a reconcile whose write of the pod webhook's scope
// failed comes back: an error would hand the set to the controller's
// per-item back-off, which grows to minutes and would delay the rollout's
// own deadline checks with it.
const scopeRetry = 5 * time.Second
