package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/metrics"
	"github.com/sidecarset/sidecarset/internal/rollout"
	"github.com/sidecarset/sidecarset/internal/status"
)

// writeStatus computes the status, writes it when it changed, pauses a
// stalled rollout, and says when to look again.
func (r *Reconciler) writeStatus(ctx context.Context, set *v1alpha1.SidecarSet, latest rollout.Latest,
	pods []rollout.Pod, plan rollout.Plan, unmanaged unmanagedCounts, releasedBefore time.Time) (ctrl.Result, error) {
	r.mu.Lock()
	// prev is the set's status and judged the resourceVersion of the set as
	// judged here. A reconcile that follows our own status write closely
	// may read the set from a cache that has not seen it: judged against
	// that older status, the same transition would be found again, written
	// again and told again in events.
	prev, judged := set.Status, set.ResourceVersion
	if w := r.memoryOf(set.Name).status; w != nil && w.over == set.ResourceVersion {
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
		// The stored one, if this reconcile judged against an older one.
		ReleasedBefore: laterOf(releasedBefore, prev.ReleasedBefore),
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
		r.memoryOf(set.Name).status = &writtenStatus{over: set.ResourceVersion, rv: judged, status: res.Status}
		r.mu.Unlock()
	}
	// The status as it stands now, written or already there: the series
	// say what the status says.
	metrics.RecordStatus(set.Name, res.Status)
	// After the write: a failed one is retried, and would tell the same
	// transition twice. A rollout starts once per revision, however stale
	// the status a later reconcile reads (its own pause of the set is one
	// more version for the cache to lag on).
	for _, e := range status.Events(prev, res.Status) {
		if e.Reason == status.EventRolloutStarted {
			r.mu.Lock()
			m := r.memoryOf(set.Name)
			told := m.started == res.Status.LatestRevision
			m.started = res.Status.LatestRevision
			r.mu.Unlock()
			if told {
				continue
			}
		}
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
	// status.injection is the policy controller's to write: left out, the
	// merge patch leaves it as it is.
	delete(fields, "injection")
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
	// Counted once per stall: the paused rollout is no longer active, so
	// the next status asks for no pause until it is resumed.
	metrics.RolloutStalled(set.Name)
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

// laterOf returns the later of t and stored, nil being none.
func laterOf(t time.Time, stored *metav1.MicroTime) time.Time {
	if stored != nil && stored.After(t) {
		return stored.Time
	}
	return t
}
