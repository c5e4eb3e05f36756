package kubeletsim

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// The test control plane has no scheduler, so the simulator binds the pods
// that name its scheduler, round-robin over the nodes that fit them. Fitting
// means the nodeSelector and the required node affinity (DaemonSet pods pin
// their node that way); the nodes are untainted and never full.

// schedules tells whether pod is the simulator's to bind.
func (s *Sim) schedules(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil &&
		pod.Spec.SchedulerName == s.opts.SchedulerName &&
		// Gated pods wait, as the scheduler keeps them out of its queue.
		len(pod.Spec.SchedulingGates) == 0
}

func (s *Sim) bind(ctx context.Context, key cache.ObjectName) error {
	pod, err := s.pending.Pods(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get unscheduled pod %s from cache: %w", key, err)
	}
	if !s.schedules(pod) {
		return nil
	}
	var fit []*simNode
	for _, n := range s.nodes {
		if fits(pod, n) {
			fit = append(fit, n)
		}
	}
	if len(fit) == 0 {
		// The scheduler tries again when the pod changes; so does this.
		s.scheduler.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling",
			"0/%d nodes are available: %d node(s) didn't match Pod's node affinity/selector.", len(s.nodes), len(s.nodes))
		return nil
	}
	n := fit[s.nextNode.Add(1)%uint64(len(fit))]
	binding := &corev1.Binding{
		// The UID makes the binding fail if the pod was replaced meanwhile.
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: n.name},
	}
	err = s.client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone, replaced or bound by someone else: nothing to do.
		return nil
	case err != nil:
		return fmt.Errorf("bind pod %s to %s: %w", key, n.name, err)
	}
	ctrllog.FromContext(ctx).V(4).Info("Bound pod", "pod", key, "node", n.name)
	s.scheduler.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, n.name)
	return nil
}

// fits tells whether pod may run on n by its nodeSelector and required node
// affinity.
func fits(pod *corev1.Pod, n *simNode) bool {
	for k, v := range pod.Spec.NodeSelector {
		if n.labels[k] != v {
			return false
		}
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	// Terms are ORed; within a term every requirement must hold.
	return slices.ContainsFunc(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, func(t corev1.NodeSelectorTerm) bool {
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			return false // an empty term matches no node
		}
		for _, r := range t.MatchExpressions {
			v, ok := n.labels[r.Key]
			if !matches(r, v, ok) {
				return false
			}
		}
		for _, r := range t.MatchFields {
			// metadata.name is the only field a node selector may name.
			if r.Key != metav1.ObjectNameField || !matches(r, n.name, true) {
				return false
			}
		}
		return true
	})
}

func matches(r corev1.NodeSelectorRequirement, value string, present bool) bool {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return present && slices.Contains(r.Values, value)
	case corev1.NodeSelectorOpNotIn:
		return !present || !slices.Contains(r.Values, value)
	case corev1.NodeSelectorOpExists:
		return present
	case corev1.NodeSelectorOpDoesNotExist:
		return !present
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !present || len(r.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(value, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		return r.Operator == corev1.NodeSelectorOpGt && have > want || r.Operator == corev1.NodeSelectorOpLt && have < want
	}
	return false
}
