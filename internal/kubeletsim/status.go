package kubeletsim

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// This file turns a pod's runtime into the status the kubelet reports
// (generateAPIPodStatus and its helpers in pkg/kubelet), as a pure function.

// The waiting reasons the kubelet shows for a container it has not created.
const (
	reasonContainerCreating = "ContainerCreating"
	reasonPodInitializing   = "PodInitializing"
)

// apiTime is t as the API stores it: whole seconds. Comparing a computed
// status with the stored one only works at that precision.
func apiTime(t time.Time) metav1.Time {
	return metav1.NewTime(t.Truncate(time.Second))
}

// podStatus returns pod's status as the kubelet would write it now: every
// field the kubelet owns recomputed from rt, the rest (conditions of other
// writers, qosClass, resize) kept from pod.
func podStatus(pod *corev1.Pod, rt *podRuntime, hostIP string, now time.Time) corev1.PodStatus {
	st := *pod.Status.DeepCopy()
	st.ObservedGeneration = pod.Generation
	st.HostIP, st.HostIPs = hostIP, []corev1.HostIP{{IP: hostIP}}
	st.PodIP, st.PodIPs = rt.podIP, []corev1.PodIP{{IP: rt.podIP}}
	start := apiTime(rt.startTime)
	st.StartTime = &start
	hasInit := len(pod.Spec.InitContainers) > 0
	st.InitContainerStatuses = containerStatuses(pod.Spec.InitContainers, rt, hasInit, now)
	st.ContainerStatuses = containerStatuses(pod.Spec.Containers, rt, hasInit, now)
	st.Phase = phaseOf(pod, rt, st.InitContainerStatuses, st.ContainerStatuses)
	st.Conditions = conditions(pod, &st, now)
	if resizing(pod, &st) {
		st.Conditions = append(st.Conditions, corev1.PodCondition{
			Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue, ObservedGeneration: pod.Generation,
			LastTransitionTime: apiTime(now),
		})
		if old := findCondition(pod.Status.Conditions, corev1.PodResizeInProgress); old != nil {
			st.Conditions[len(st.Conditions)-1].LastTransitionTime = old.LastTransitionTime
		}
	}
	return st
}

// resizing reports whether a running container of pod shows cpu or memory
// other than its spec's: the kubelet has admitted the resize the spec asks
// for and not finished it (PodResizeInProgress). It shows while a sync with
// SyncDelay is due to act on a resized spec.
func resizing(pod *corev1.Pod, st *corev1.PodStatus) bool {
	for _, l := range []struct {
		spec []corev1.Container
		st   []corev1.ContainerStatus
	}{{pod.Spec.InitContainers, st.InitContainerStatuses}, {pod.Spec.Containers, st.ContainerStatuses}} {
		for i := range l.spec {
			if r := l.st[i].Resources; r != nil && !apiequality.Semantic.DeepEqual(*r, cpuMemory(l.spec[i].Resources)) {
				return true
			}
		}
	}
	return false
}

func containerStatuses(specs []corev1.Container, rt *podRuntime, hasInit bool, now time.Time) []corev1.ContainerStatus {
	if len(specs) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, 0, len(specs))
	for i := range specs {
		out = append(out, containerStatus(&specs[i], rt.containers[specs[i].Name], hasInit, now))
	}
	return out
}

func containerStatus(spec *corev1.Container, c *container, hasInit bool, now time.Time) corev1.ContainerStatus {
	// Until a container is created the kubelet shows the spec's image as
	// written and a default waiting reason.
	cs := corev1.ContainerStatus{Name: spec.Name, Image: spec.Image, Started: ptr.To(false)}
	cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reasonContainerCreating}
	if hasInit {
		cs.State.Waiting.Reason = reasonPodInitializing
	}
	if c == nil {
		return cs
	}
	if c.cur != nil {
		cs.ContainerID, cs.Image, cs.ImageID = c.cur.id, c.cur.image, c.cur.imageID
		cs.RestartCount = c.created - 1
	}
	if c.last != nil {
		cs.LastTerminationState.Terminated = terminated(c.last)
	}
	switch {
	case c.stage == stageRunning:
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: apiTime(c.cur.startedAt)}}
		cs.Started = ptr.To(c.started(now))
		cs.Ready = c.ready(now)
		applied := *c.cur.resources.DeepCopy()
		cs.Resources = &applied
		cs.AllocatedResources = cpuMemory(spec.Resources).Requests
	case c.reason != "":
		// The last sync failed: the kubelet shows why, and moves what ran
		// before into lastState.
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: c.reason, Message: c.message}}
		if c.cur != nil {
			cs.LastTerminationState.Terminated = terminated(c.cur)
		}
	case c.cur != nil:
		// Exited, or killed and not yet started again: the kubelet keeps
		// showing the terminated container until the next one runs.
		cs.State = corev1.ContainerState{Terminated: terminated(c.cur)}
		cs.Ready = c.ready(now)
	}
	return cs
}

func terminated(inst *instance) *corev1.ContainerStateTerminated {
	reason := "Completed"
	if inst.exitCode != 0 {
		reason = "Error"
	}
	return &corev1.ContainerStateTerminated{
		ExitCode:    inst.exitCode,
		Reason:      reason,
		StartedAt:   apiTime(inst.startedAt),
		FinishedAt:  apiTime(inst.finishedAt),
		ContainerID: inst.id,
	}
}

// phaseOf follows the kubelet's getPhase for a pod that is not finished:
// Pending until initialized and while a regular container or sidecar waits
// for its first start, Running after.
func phaseOf(pod *corev1.Pod, rt *podRuntime, initStatuses, statuses []corev1.ContainerStatus) corev1.PodPhase {
	if rt.phase != "" {
		return rt.phase
	}
	if !rt.initialized {
		return corev1.PodPending
	}
	firstStartPending := func(cs *corev1.ContainerStatus) bool {
		return cs.State.Waiting != nil && cs.LastTerminationState.Terminated == nil
	}
	for i := range pod.Spec.InitContainers {
		if kindOf(&pod.Spec.InitContainers[i], true) == sidecar && firstStartPending(&initStatuses[i]) {
			return corev1.PodPending
		}
	}
	for i := range statuses {
		if firstStartPending(&statuses[i]) {
			return corev1.PodPending
		}
	}
	return corev1.PodRunning
}

// kubeletConditions are the condition types the kubelet owns; it keeps the
// others as they are (mergePodStatus).
var kubeletConditions = map[corev1.PodConditionType]bool{
	corev1.PodReadyToStartContainers: true,
	corev1.PodInitialized:            true,
	corev1.PodReady:                  true,
	corev1.ContainersReady:           true,
	corev1.PodScheduled:              true,
	corev1.PodResizeInProgress:       true,
	corev1.PodResizePending:          true,
}

// conditions returns the other writers' conditions followed by the
// kubelet's, in the kubelet's order, each keeping its transition time while
// its status stays.
func conditions(pod *corev1.Pod, st *corev1.PodStatus, now time.Time) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range pod.Status.Conditions {
		if !kubeletConditions[c.Type] {
			out = append(out, c)
		}
	}
	terminal := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed

	sandbox := corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue}
	if terminal {
		// The sandbox is torn down once the pod is done.
		sandbox.Status = corev1.ConditionFalse
	}

	initialized := initializedCondition(pod, st)
	containersReady := containersReadyCondition(pod, st)
	ready := containersReady
	ready.Type = corev1.PodReady
	if ready.Status == corev1.ConditionTrue {
		var msgs []string
		for _, g := range pod.Spec.ReadinessGates {
			c := findCondition(out, g.ConditionType)
			switch {
			case c == nil:
				msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType))
			case c.Status != corev1.ConditionTrue:
				msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", g.ConditionType, c.Status))
			}
		}
		if len(msgs) > 0 {
			ready = corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ReadinessGatesNotReady", Message: strings.Join(msgs, ", ")}
		}
	}
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}

	for _, c := range []corev1.PodCondition{sandbox, initialized, ready, containersReady, scheduled} {
		c.ObservedGeneration = pod.Generation
		c.LastTransitionTime = apiTime(now)
		if old := findCondition(pod.Status.Conditions, c.Type); old != nil && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		out = append(out, c)
	}
	return out
}

func initializedCondition(pod *corev1.Pod, st *corev1.PodStatus) corev1.PodCondition {
	c := corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}
	if st.Phase == corev1.PodSucceeded {
		c.Reason = "PodCompleted"
		return c
	}
	// Once a regular container has started the pod stays initialized.
	for _, cs := range st.ContainerStatuses {
		if cs.ContainerID != "" {
			return c
		}
	}
	var incomplete []string
	for i := range pod.Spec.InitContainers {
		spec, cs := &pod.Spec.InitContainers[i], &st.InitContainerStatuses[i]
		if kindOf(spec, true) == sidecar && !*cs.Started || kindOf(spec, true) == initOnce && !cs.Ready {
			incomplete = append(incomplete, spec.Name)
		}
	}
	if len(incomplete) > 0 {
		c.Status, c.Reason = corev1.ConditionFalse, "ContainersNotInitialized"
		c.Message = fmt.Sprintf("containers with incomplete status: %s", incomplete)
	}
	return c
}

func containersReadyCondition(pod *corev1.Pod, st *corev1.PodStatus) corev1.PodCondition {
	c := corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}
	switch st.Phase {
	case corev1.PodSucceeded:
		c.Status, c.Reason = corev1.ConditionFalse, "PodCompleted"
		return c
	case corev1.PodFailed:
		c.Status, c.Reason = corev1.ConditionFalse, "PodFailed"
		return c
	}
	var unready []string
	for i := range pod.Spec.InitContainers {
		if kindOf(&pod.Spec.InitContainers[i], true) == sidecar && !st.InitContainerStatuses[i].Ready {
			unready = append(unready, pod.Spec.InitContainers[i].Name)
		}
	}
	for i := range pod.Spec.Containers {
		if !st.ContainerStatuses[i].Ready {
			unready = append(unready, pod.Spec.Containers[i].Name)
		}
	}
	if len(unready) > 0 {
		c.Status, c.Reason = corev1.ConditionFalse, "ContainersNotReady"
		c.Message = fmt.Sprintf("containers with unready status: %s", unready)
	}
	return c
}

func findCondition(cs []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}
