package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/rollout"
	"github.com/sidecarset/sidecarset/internal/status"
)

// Reconcile brings one SidecarSet's pods a step closer to its latest
// revision and writes its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
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
	if _, err := r.syncRevisions(ctx, set, inUse); err != nil {
		return ctrl.Result{}, err
	}

	latest := rollout.NewLatest(set)
	classified := make([]rollout.Pod, len(pods))
	for i, p := range pods {
		classified[i] = rollout.Classify(p.pod, p.rec, latest)
	}
	unmanaged, err := r.countUnmanaged(ctx, set)
	if err != nil {
		// The count is a report, not a gate: keep rolling out with the last one.
		log.Error(err, "count unmanaged pods")
	}
	release := r.holdBudgets()
	defer release()
	budgets, err := r.budgets(ctx, pods)
	if err != nil {
		return ctrl.Result{}, err
	}

	plan, err := rollout.Next(rollout.Input{
		Latest:      latest,
		Pods:        classified,
		Strategy:    set.Spec.UpdateStrategy,
		DriftPolicy: set.Spec.DriftPolicy,
		Budgets:     budgets,
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
	// Status counts as progress only the writes that landed.
	plan.Updates = r.apply(ctx, set, plan, byKey)
	release()
	if err := r.markPods(ctx, set, classified, byKey); err != nil {
		return ctrl.Result{}, err
	}

	return r.writeStatus(ctx, set, latest, classified, plan, unmanaged)
}

// budgets returns, per pod, the PodDisruptionBudgets that select it, each
// with the disruptions already spent on it: the pods it selects that any
// SidecarSet's rollout disrupted and that are not back yet
// (rollout.Disrupted). Two sets bumped in one commit share one budget; each
// counting only its own pods would let both take its one disruption.
func (r *Reconciler) budgets(ctx context.Context, pods []matched) (map[types.NamespacedName][]rollout.Budget, error) {
	out := map[types.NamespacedName][]rollout.Budget{}
	namespaces := sets.New[string]()
	for _, p := range pods {
		namespaces.Insert(p.pod.Namespace)
	}
	if namespaces.Len() == 0 {
		return out, nil
	}
	latest, err := r.latestHashes(ctx)
	if err != nil {
		return nil, err
	}
	for _, ns := range sets.List(namespaces) {
		var pdbs policyv1.PodDisruptionBudgetList
		if err := r.Client.List(ctx, &pdbs, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("list PodDisruptionBudgets in %s: %w", ns, err)
		}
		if len(pdbs.Items) == 0 {
			continue
		}
		var managed corev1.PodList
		if err := r.Client.List(ctx, &managed, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelManaged: "true"},
			client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list managed pods in %s: %w", ns, err)
		}
		var disrupted []labels.Set
		for i := range managed.Items {
			pod := r.freshest(&managed.Items[i])
			if !rollout.Active(pod) {
				continue
			}
			state, _ := revision.Decode(pod.Annotations)
			if rollout.Disrupted(pod, state, latest) {
				disrupted = append(disrupted, pod.Labels)
			}
		}
		for _, pdb := range pdbs.Items {
			sel, ok := rollout.BudgetSelector(pdb.Spec.Selector)
			if !ok {
				continue
			}
			b := rollout.Budget{Name: pdb.Namespace + "/" + pdb.Name, DisruptionsAllowed: pdb.Status.DisruptionsAllowed}
			for _, l := range disrupted {
				if sel.Matches(l) {
					b.Spent++
				}
			}
			for _, p := range pods {
				if p.pod.Namespace == ns && sel.Matches(labels.Set(p.pod.Labels)) {
					key := types.NamespacedName{Namespace: ns, Name: p.pod.Name}
					out[key] = append(out[key], b)
				}
			}
		}
	}
	return out, nil
}

// latestHashes maps every SidecarSet's name to its latest revision's Hash.
func (r *Reconciler) latestHashes(ctx context.Context) (map[string]string, error) {
	var list v1alpha1.SidecarSetList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list SidecarSets: %w", err)
	}
	out := make(map[string]string, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = revision.Hash(&list.Items[i].Spec)
	}
	return out, nil
}

// apply writes the plan's pod updates, a few at a time, and returns the ones
// that landed, in plan order. The plan already decided that all of them may
// go now; writing them one after another would only make a wide rollout
// (maxUnavailable 100%) wait on round trips.
func (r *Reconciler) apply(ctx context.Context, set *v1alpha1.SidecarSet, plan rollout.Plan, pods map[types.NamespacedName]*corev1.Pod) []rollout.PodUpdate {
	landed := make([]bool, len(plan.Updates))
	var wg sync.WaitGroup
	slots := make(chan struct{}, concurrentPodWrites)
	for i, u := range plan.Updates {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			landed[i] = r.applyOne(ctx, set, pods[u.Pod], u)
		})
	}
	wg.Wait()
	var written []rollout.PodUpdate
	var names []string
	for i, u := range plan.Updates {
		if landed[i] {
			written = append(written, u)
			if u.Action != rollout.ActionSettle {
				names = append(names, u.Pod.String())
			}
		}
	}
	if len(names) > 0 {
		r.Recorder.Eventf(set, nil, corev1.EventTypeNormal, ReasonRolloutStep, "Update",
			"updating %d pod(s) in place: %s", len(names), podList(names))
	}
	return written
}

// applyOne writes one pod update and tells, on the pod, what was written.
func (r *Reconciler) applyOne(ctx context.Context, set *v1alpha1.SidecarSet, pod *corev1.Pod, u rollout.PodUpdate) bool {
	log := ctrl.LoggerFrom(ctx)
	if err := r.writePod(ctx, set, pod, u); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// The cache was behind: the pod changed or went away since.
			// Its watch event brings the set back with the new pod.
			log.V(1).Info("pod changed before the update; will retry", "pod", klog.KObj(pod), "err", err.Error())
			return false
		}
		log.Error(err, "update sidecar images", "pod", klog.KObj(pod))
		r.Recorder.Eventf(pod, set, corev1.EventTypeWarning, ReasonSidecarUpdateFailed, "Update",
			"update sidecars of %s: %v", set.Name, err)
		return false
	}
	images := make([]string, len(u.Containers))
	for i, c := range u.Containers {
		images[i] = c.Name + "=" + c.Image
	}
	switch u.Action {
	case rollout.ActionSettle:
		// Bookkeeping: nothing in the pod changed.
	case rollout.ActionRevertDrift:
		r.Recorder.Eventf(pod, set, corev1.EventTypeNormal, ReasonDriftReverted, "Update",
			"SidecarSet %s wrote back %s", set.Name, strings.Join(images, ", "))
	default:
		r.Recorder.Eventf(pod, set, corev1.EventTypeNormal, ReasonSidecarUpdated, "Update",
			"SidecarSet %s revision %s: %s", set.Name, u.State.Revision, strings.Join(images, ", "))
	}
	return true
}

// writePod patches the images of u's containers and the set's record in one
// request. The patch carries the pod's resourceVersion: if the cache was
// stale the apiserver refuses it, so a pod is never written twice from one
// stale view.
func (r *Reconciler) writePod(ctx context.Context, set *v1alpha1.SidecarSet, cached *corev1.Pod, u rollout.PodUpdate) error {
	pod, err := rollout.Apply(cached, set.Name, u)
	if err != nil {
		return err
	}
	patch := client.StrategicMergeFrom(cached, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Patch(ctx, pod, patch); err != nil {
		return fmt.Errorf("patch sidecar images of %s: %w", klog.KObj(pod), err)
	}
	r.expect(set.Name, pod)
	return nil
}

// expect remembers pod, as the apiserver returned it from a write of
// setName's record, until the cache has caught up with it (expected).
func (r *Reconciler) expect(setName string, pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.writes[setName]
	if m == nil {
		m = map[types.NamespacedName]podWrite{}
		r.writes[setName] = m
	}
	m[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] = podWrite{pod: pod, at: r.Clock.Now()}
}

// podWrite is a pod as a write of the controller left it.
type podWrite struct {
	pod *corev1.Pod
	at  time.Time
}

// expectationTTL bounds how long a write is trusted over the cache. The
// cache shows a write within moments; one it never shows was overtaken by
// an edit rollout.Fresher cannot recognise (someone else rewrote the
// record), and the cache is then the truth.
const expectationTTL = time.Minute

// freshest returns the pod, or the version of it that any SidecarSet's
// last write made when the cache has not caught up with that write.
func (r *Reconciler) freshest(pod *corev1.Pod) *corev1.Pod {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	r.mu.Lock()
	defer r.mu.Unlock()
	for setName, writes := range r.writes {
		if written, ok := writes[key]; ok {
			if fresh, caughtUp := rollout.Fresher(pod, written.pod, setName); !caughtUp {
				pod = fresh
			}
		}
	}
	return pod
}

// expected replaces, in pods, every pod whose cached version has not caught
// up with this controller's last write of it by the pod written
// (rollout.Fresher), and forgets the writes the cache has caught up with or
// whose pods are gone.
func (r *Reconciler) expected(setName string, pods []matched) []matched {
	r.mu.Lock()
	defer r.mu.Unlock()
	writes := r.writes[setName]
	if len(writes) == 0 {
		return pods
	}
	seen := make(map[types.NamespacedName]bool, len(writes))
	now := r.Clock.Now()
	for i, p := range pods {
		key := types.NamespacedName{Namespace: p.pod.Namespace, Name: p.pod.Name}
		written, ok := writes[key]
		if !ok {
			continue
		}
		seen[key] = true
		fresh, caughtUp := rollout.Fresher(p.pod, written.pod, setName)
		if caughtUp || now.Sub(written.at) > expectationTTL {
			delete(writes, key)
			continue
		}
		state, err := revision.Decode(fresh.Annotations)
		if err != nil {
			continue
		}
		pods[i] = matched{pod: fresh, rec: state[setName]}
	}
	for key := range writes {
		if !seen[key] {
			delete(writes, key)
		}
	}
	return pods
}

// podListLimit bounds the pod names in one event message. The apiserver
// refuses an event whose message is over 1024 bytes, and the recorder then
// drops it: a rollout step over a thousand pods would tell nothing at all.
const podListLimit = 600

// podList names pods in an event message: as many as fit in podListLimit
// bytes, then how many more there are.
func podList(names []string) string {
	var b strings.Builder
	for i, name := range names {
		if i > 0 && b.Len()+len(name) > podListLimit {
			fmt.Fprintf(&b, " and %d more", len(names)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name)
	}
	return b.String()
}

// writeStatus computes the status, writes it when it changed, pauses a
// stalled rollout, and says when to look again.
func (r *Reconciler) writeStatus(ctx context.Context, set *v1alpha1.SidecarSet, latest rollout.Latest,
	pods []rollout.Pod, plan rollout.Plan, unmanaged unmanagedCounts) (ctrl.Result, error) {
	r.mu.Lock()
	// prev is the set's status and judged the resourceVersion of the set as
	// judged here. A reconcile that follows our own status write closely
	// may read the set from a cache that has not seen it: judged against
	// that older status, the same transition would be found again, written
	// again and told again in events.
	prev, judged := set.Status, set.ResourceVersion
	if w, ok := r.written[set.Name]; ok && w.over == set.ResourceVersion {
		prev, judged = w.status, w.rv
	}
	r.mu.Unlock()
	res := status.Compute(status.Input{
		Generation: set.Generation,
		Latest:     latest,
		Pods:       pods,
		Plan:       plan,
		Strategy:   set.Spec.UpdateStrategy,
		Unmanaged:  unmanaged.Unmanaged,
		Skipped:    unmanaged.Skipped,
		Previous:   prev,
		Now:        metav1.NewTime(r.Clock.Now()),
	})

	if !status.Equal(prev, res.Status) {
		// The whole status in a merge patch, not an update: it is computed
		// whole from the pods, so a newer resourceVersion of the set is no
		// reason to refuse it, and a conflict would only delay it.
		body, err := statusPatch(res.Status)
		if err != nil {
			return ctrl.Result{}, err
		}
		patched := set.DeepCopy()
		if err := r.Client.Status().Patch(ctx, patched, client.RawPatch(types.MergePatchType, body)); err != nil {
			return ctrl.Result{}, fmt.Errorf("write status: %w", err)
		}
		// The same generation: the spec judged here is still the set's,
		// and the version our write made is the one to judge it by.
		if patched.Generation == set.Generation {
			judged = patched.ResourceVersion
		}
		r.mu.Lock()
		r.written[set.Name] = writtenStatus{over: set.ResourceVersion, rv: judged, status: res.Status}
		r.mu.Unlock()
	}
	// After the write: a failed one is retried, and would tell the same
	// transition twice.
	for _, e := range status.Events(prev, res.Status) {
		r.Recorder.Eventf(set, nil, corev1.EventTypeNormal, e.Reason, "Rollout", "%s", e.Message)
	}
	if res.PauseRollout {
		paused, err := r.pause(ctx, set, judged, res.Status)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !paused {
			// The set changed since it was judged. A new generation brings
			// its own reconcile; anything else (our own writes are not
			// watched) needs a look soon, from a fresher cache.
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
	}
	after := UnmanagedRecount
	if res.RecheckAfter > 0 && res.RecheckAfter < after {
		after = res.RecheckAfter
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// statusPatch returns the JSON merge patch that sets the status to st. A
// merge patch leaves out what it omits, so the optional fields st leaves
// unset are sent as null, which removes them.
func statusPatch(st v1alpha1.SidecarSetStatus) ([]byte, error) {
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode status: %w", err)
	}
	fields := map[string]any{}
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("encode status: %w", err)
	}
	if st.LastProgressTime == nil {
		fields["lastProgressTime"] = nil
	}
	body, err := json.Marshal(map[string]any{"status": fields})
	if err != nil {
		return nil, fmt.Errorf("encode status: %w", err)
	}
	return body, nil
}

// pause sets updateStrategy.paused on a stalled rollout, so that it stays
// stopped until someone looks; resuming it is `kubectl sidecarset rollout
// resume`.
//
// The patch is locked to judged, the resourceVersion the stall was judged
// on: a set changed since (resumed, a new image, or already paused by an
// earlier reconcile on a stale cache) must be judged again, not paused over
// a user's resume. It reports false when that lock failed.
func (r *Reconciler) pause(ctx context.Context, set *v1alpha1.SidecarSet, judged string, st v1alpha1.SidecarSetStatus) (bool, error) {
	reason := "no progress within progressDeadlineSeconds"
	if c := meta(st, v1alpha1.ConditionStalled); c != nil {
		reason = c.Message
	}
	base := set.DeepCopy()
	base.ResourceVersion = judged
	paused := base.DeepCopy()
	paused.Spec.UpdateStrategy.Paused = true
	if err := r.Client.Patch(ctx, paused, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			ctrl.LoggerFrom(ctx).V(1).Info("SidecarSet changed before the stalled rollout was paused; judging it again", "err", err.Error())
			return false, nil
		}
		return false, fmt.Errorf("pause stalled rollout: %w", err)
	}
	r.Recorder.Eventf(set, nil, corev1.EventTypeWarning, ReasonRolloutStalled, "Pause",
		"rollout paused itself: %s", reason)
	return true, nil
}

func meta(st v1alpha1.SidecarSetStatus, t string) *metav1.Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

func (r *Reconciler) forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.unmanaged, name)
	delete(r.written, name)
	delete(r.writes, name)
}
