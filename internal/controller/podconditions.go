package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/rollout"
	"github.com/sidecarset/sidecarset/internal/status"
)

// markPods keeps the pod conditions that show, on the pod itself, that it
// cannot be updated in place or that a sidecar was edited by hand
// (status.PodConditions decides, merging this set's verdict with the other
// sets'), writes the pods whose conditions changed a few at a time, and
// emits one event on the set naming the pods whose verdict from this set
// became so.
func (r *Reconciler) markPods(ctx context.Context, set *v1alpha1.SidecarSet, pods []rollout.Pod, byKey map[types.NamespacedName]*corev1.Pod) error {
	now := metav1.NewTime(r.Clock.Now())
	type mark struct {
		pod     *corev1.Pod
		drifted []string
		update  status.PodConditionsUpdate
	}
	var marks []mark
	for _, p := range pods {
		pod := byKey[p.Key]
		u := status.PodConditions(pod.Status.Conditions, set.Name,
			status.PodVerdict{NotUpgradable: !p.Upgradable, Drifted: p.Drifted}, now)
		if u.Changed {
			marks = append(marks, mark{pod: pod, drifted: p.Drifted, update: u})
		}
	}

	landed := make([]bool, len(marks))
	errs := make([]error, len(marks))
	var wg sync.WaitGroup
	slots := make(chan struct{}, concurrentPodWrites)
	for i, m := range marks {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			landed[i], errs[i] = r.writeConditions(ctx, m.pod, m.update.Conditions)
		})
	}
	wg.Wait()

	// The events name only the pods whose condition landed: one that did
	// not is judged again, and told then.
	var newlyStuck, newlyDrifted []string
	for i, m := range marks {
		if !landed[i] {
			continue
		}
		key := klog.KObj(m.pod).String()
		if m.update.NewlyNotUpgradable {
			newlyStuck = append(newlyStuck, key)
		}
		if m.update.NewlyDrifted {
			newlyDrifted = append(newlyDrifted, key)
			r.Recorder.Eventf(m.pod, set, corev1.EventTypeWarning, ReasonDrifted, "Detect",
				"SidecarSet %s: image of %s differs from what the controller wrote", set.Name, strings.Join(m.drifted, ", "))
		}
	}
	if len(newlyStuck) > 0 {
		r.Recorder.Eventf(set, nil, corev1.EventTypeWarning, ReasonNotUpgradable, "Classify",
			"%d pod(s) cannot take this revision in place (it changes more than images and resizable cpu and memory, or the kubelet holds a resize) and need a recreate: %s",
			len(newlyStuck), podList(newlyStuck))
	}
	if len(newlyDrifted) > 0 {
		r.Recorder.Eventf(set, nil, corev1.EventTypeWarning, ReasonDrifted, "Detect",
			"%d pod(s) run a sidecar image changed by hand (driftPolicy %s): %s",
			len(newlyDrifted), set.Spec.DriftPolicy, podList(newlyDrifted))
	}
	return errors.Join(errs...)
}

// writeConditions writes conditions as cached's conditions and reports
// whether the write landed.
//
// A strategic merge patch sends only the changed conditions, merged by
// type; a JSON merge patch would send the whole list from the cache and
// could write back a Ready the kubelet has changed since. The patch is
// locked to the cached resourceVersion: the conditions merge every set's
// verdict, and one judged on a stale pod would drop another set's verdict
// written since, or tell this set's again.
func (r *Reconciler) writeConditions(ctx context.Context, cached *corev1.Pod, conditions []corev1.PodCondition) (bool, error) {
	pod := cached.DeepCopy()
	pod.Status.Conditions = conditions
	err := r.Client.Status().Patch(ctx, pod, client.StrategicMergeFrom(cached, client.MergeFromWithOptimisticLock{}))
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		// The pod changed or went away since the cache saw it; its watch
		// event brings the set back with the new pod.
		ctrl.LoggerFrom(ctx).V(1).Info("pod changed before its conditions were written; will judge it again",
			"pod", klog.KObj(cached), "err", err.Error())
		return false, nil
	default:
		return false, fmt.Errorf("patch conditions of %s: %w", klog.KObj(cached), err)
	}
}
