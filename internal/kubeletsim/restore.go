package kubeletsim

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// restore rebuilds the runtime of a pod whose status a simulator wrote
// before it restarted (the playground may restart): running containers keep
// running with the same ID, start time and restart count; exited ones stay
// exited or restart as their policy says; anything in between starts over.
// The node's image store learns the images the pod runs.
//
// Runtime state that a status does not show (back-offs, older instances)
// starts afresh. A container whose running image no longer matches its spec
// counts as changed and is restarted, as the kubelet would have done.
func (m *machine) restore(pod *corev1.Pod) *podRuntime {
	rt := newPodRuntime(pod.UID)
	rt.podIP = pod.Status.PodIP
	if pod.Status.StartTime != nil {
		rt.startTime = pod.Status.StartTime.Time
	}
	if c := findCondition(pod.Status.Conditions, corev1.PodInitialized); c != nil && c.Status == corev1.ConditionTrue {
		rt.initialized = true
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		rt.phase = pod.Status.Phase
	}
	restoreAll := func(specs []corev1.Container, statuses []corev1.ContainerStatus, init bool) {
		for i := range specs {
			for j := range statuses {
				if statuses[j].Name == specs[i].Name {
					m.restoreContainer(pod, rt.container(&specs[i], init), &specs[i], &statuses[j])
				}
			}
		}
	}
	restoreAll(pod.Spec.InitContainers, pod.Status.InitContainerStatuses, true)
	restoreAll(pod.Spec.Containers, pod.Status.ContainerStatuses, false)
	return rt
}

func (m *machine) restoreContainer(pod *corev1.Pod, c *container, spec *corev1.Container, cs *corev1.ContainerStatus) {
	ref, err := parseImage(cs.Image)
	if i := strings.LastIndexByte(cs.ImageID, '@'); err == nil && i >= 0 && digestRegexp.MatchString(cs.ImageID[i+1:]) {
		c.ref, c.digest = ref, cs.ImageID[i+1:]
		m.images.record(ref, c.digest)
	}
	if !m.runsSpecImage(spec, cs) {
		c.image = ""
	}
	if cs.ContainerID != "" {
		c.created = cs.RestartCount + 1
	}
	if t := cs.LastTerminationState.Terminated; t != nil {
		c.last = fromTerminated(t)
	}
	switch {
	case cs.State.Running != nil:
		inst := &instance{id: cs.ContainerID, image: cs.Image, imageID: cs.ImageID, startedAt: cs.State.Running.StartedAt.Time,
			resources: cpuMemory(spec.Resources)}
		if cs.Resources != nil {
			inst.resources = cpuMemory(*cs.Resources)
		}
		plan(inst, c.kind, behaviourOf(c.ref), spec, m.timing)
		if cs.Ready {
			inst.readyAt = inst.startedAt
		}
		c.cur, c.stage = inst, stageRunning
	case cs.State.Terminated != nil:
		c.cur = fromTerminated(cs.State.Terminated)
		c.cur.image, c.cur.imageID = cs.Image, cs.ImageID
		c.stage = stageExited
		if restarts(pod, c, c.cur.exitCode) {
			c.stage = stageWaiting
		}
	case c.last != nil:
		// Waiting to start again (a back-off, a pull): what ran last is
		// the current instance until the next one is created.
		c.cur, c.last = c.last, nil
		c.cur.image, c.cur.imageID = cs.Image, cs.ImageID
	}
}

// runsSpecImage tells whether the container in cs runs spec's image: the
// same normalized reference, or the digest the spec's image resolves to
// (a second tag of a digest shows the first one).
func (m *machine) runsSpecImage(spec *corev1.Container, cs *corev1.ContainerStatus) bool {
	ref, err := parseImage(spec.Image)
	if err != nil || cs.ImageID == "" {
		return err == nil
	}
	return ref.String() == cs.Image || strings.HasSuffix(cs.ImageID, "@"+m.reg.resolve(ref))
}

func fromTerminated(t *corev1.ContainerStateTerminated) *instance {
	return &instance{
		id:         t.ContainerID,
		startedAt:  t.StartedAt.Time,
		finishedAt: t.FinishedAt.Time,
		exitCode:   t.ExitCode,
	}
}
