package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// Pod is a pod that carries a SidecarSet's record, judged against the latest
// revision. Classify builds it; Next and status.Compute read it.
type Pod struct {
	Key types.NamespacedName
	// Labels are the pod's labels, for updateStrategy.selector. Shared with
	// the pod, never modified.
	Labels map[string]string
	// Generation is the pod's metadata.generation: a write of images makes
	// it Generation+1.
	Generation int64
	// Record is the set's entry of the pod's state annotation.
	Record revision.SetState
	// Containers are the recorded sidecars found in the pod spec, in record
	// order.
	Containers []Container

	// Updated: the record's Hash is the latest one, i.e. the latest revision
	// is written into the pod spec (the kubelet may not have caught up).
	Updated bool
	// Updating: some running sidecar the controller wrote in place is not
	// complete yet (UpdateComplete). Holds for updates and drift reverts
	// alike, on any revision.
	Updating bool
	// Disrupting: the rollout disrupted this pod and it is not back yet:
	// the pod was ready when a write restarted one of its running sidecars
	// (Record.Write.WasReady), and it has not been ready since, with every
	// running sidecar complete, for the write's minReadySeconds
	// (ReleaseAt). Such pods count against maxUnavailable
	// and PodDisruptionBudgets. A pod written while not ready does not: it
	// lost nothing by the write, and it may stay not ready for reasons of
	// its own; unless it is seen ready while the sidecar the write restarts
	// still runs: the restart will take it down, so it counts from then on
	// (ActionRecordDisruption). A pod back but for a write that is a
	// disruption of its own stops counting once its record says so
	// (BackButOwed).
	Disrupting bool
	// BackButOwed: the write disrupted the pod, the pod is ready again,
	// and all that is left is a write that is a disruption of its own: a
	// resize still to write (ResizeOwed), or the handoff of a hot upgrade
	// counted only since the pod turned ready (Write.TurnedReady,
	// HandoffOwed). Next records that the pod is back (ActionRecordBack),
	// and from then on it does not count, and that write takes a slot as a
	// new one does. Until then it counts: should that record not land, and
	// another rollout take the pod down, it would count again, the slot
	// freed meanwhile gone to another pod.
	BackButOwed bool
	// Back: the last write into the pod is done: every running sidecar is
	// complete and, if the write disrupted the pod, the pod is ready again.
	// The set's status.releasedBefore passes the write once every write
	// before it is back too (ReleasedBefore), and the record reads as
	// released from then on, so that a sidecar or the pod failing later is
	// not taken for the write in flight or for a disruption the write
	// still holds (Again).
	Back bool
	// Again: the pod, on the latest revision, came back from a write that
	// disrupted it (Record.Released) and has failed since: it is not Ready,
	// or not yet for minReadySeconds. As a Deployment counts every
	// unavailable pod, it counts against maxUnavailable while the rollout
	// has work, but holds no slot of its own: a write that restarts it once
	// it is Ready takes a slot in its own place, like any other (found by
	// TestModel -rapid.seed=1674583798857000453, where a handoff into such
	// a pod went as the continuation of a disruption the pod no longer
	// had). The rollout does not wait for it (Awaited), and a pod on a lost
	// node or that another set's rollout has down does not count
	// (counted).
	Again bool
	// ReleaseAt, for a Ready pod that has not been Ready for its last
	// write's minReadySeconds yet, is when it will have been (released).
	// Zero otherwise. A pod written while Ready counts as Disrupting until
	// then.
	ReleaseAt time.Time
	// ReadReleased: the record holds a write that the set's
	// status.releasedBefore passed, and Record is as a release writes it
	// (releasedRecord). Should the pod fail, Next writes it so (ActionSettle),
	// for the managers of earlier releases, which read the record alone.
	ReadReleased bool
	// BackAt is when the pod came back, or comes back, from its last
	// write, as its status tells (releaseTime): read for a Back pod, by
	// ReleasedBefore.
	BackAt time.Time
	// Upgradable: the pod differs from the latest revision at most in
	// what changes in place, and every latest sidecar is both recorded and
	// present in the pod spec. What changes in place: images (the record's
	// ImagelessHash is the latest one), and the cpu and memory of sidecars
	// when the record's revision is in Latest.ResizableFrom and the
	// apiserver would take the resize (Resize). A pod that is not
	// upgradable needs a recreate; so does, while the kubelet holds it
	// (PodResizePending), a pod whose resize was written.
	Upgradable bool
	// NotUpgradable says why a pod is not Upgradable.
	NotUpgradable string
	// Resize lists the resizes an update of the pod to the latest revision
	// writes, after its images and record.
	Resize []ContainerResources
	// ResizeCondition is the kubelet's word on a resize of the pod, when it
	// gave one with a reason (PodResizePending, or PodResizeInProgress
	// with Error): "TYPE REASON: message".
	ResizeCondition string
	// ResizeOwed lists the resizes the pod still lacks: its record says
	// they were written, and they did not land (ActionResize).
	ResizeOwed []ContainerResources
	// Drifted names, in record order, the containers whose pod spec image
	// differs from the one recorded as last written: someone edited them.
	Drifted []string
	// StaleInit names, in record order, the ordinary init containers that
	// ran an image other than the latest declared one. Their new image
	// reaches new pods only.
	StaleInit []string
	// PodReady: the pod condition Ready is True.
	PodReady bool
	// DisruptedBy names the other SidecarSets whose rollouts disrupted the
	// pod, which is not back yet (DisruptedBy over the other sets'
	// records; on a Ready pod, of the sets that exist); the caller sets it
	// (MarkOthers), Classify knows one record only. A
	// write that would restart a running sidecar of such a pod waits
	// (HeldByOtherRollout), Ready or not: it would keep the pod down
	// longer, unseen by any budget or slot, and a pod still Ready has not
	// been back from the other write yet, so the other set could release
	// it on a Ready the kubelet is about to end (found by TestModel
	// -rapid.seed=1591172309375597795).
	// Unless it writes a sidecar that does not serve (not running, or not
	// ready) and that the kubelet acts on at once (not NotStarted): the
	// pod cannot turn ready before that sidecar serves again, and the
	// kubelet acts on every other container the write changes in the same
	// sync, so the other set counts the pod until the write is done;
	// waiting could wait for ever, the pod down for that very sidecar (one
	// whose image does not pull, or that crashes).
	DisruptedBy []string
	// OthersWriting: another SidecarSet's write into the pod that no set
	// counts, made while the pod was not Ready or by a deleted set, is not
	// done (OthersWriting over the other sets' records); the caller sets
	// it for pods that are Back (MarkOthers). The Ready
	// the pod shows may be from before the kubelet acts on that write, and
	// the other set does not count the pod: it is recorded released only
	// once the write is done, and until then a failure counts as this
	// write's (found by TestModel -rapid.seed=1591172309375597795, where a
	// pod released on a status the kubelet had not updated since it took
	// down another set's sidecar went uncounted by both sets). A write
	// made while the pod was Ready is counted by its own set: waiting for
	// it would count that disruption twice (-rapid.seed=12772703203620558092).
	OthersWriting bool
	// NodeLost: the pod's node is not Ready (NotReady, or unreachable: its
	// Ready condition is not True); the caller sets it. Its kubelet acts on
	// nothing: the pod is not written (HeldNodeLost), and it neither counts
	// against maxUnavailable nor is waited on, whatever its record says.
	NodeLost bool
	// Pending: the pod's phase is Pending: not scheduled, or not started.
	// A write into it waits for the pod, not for the sidecar.
	Pending bool
	// HandoffOwed names the HotUpgrade sidecars whose next slot has taken
	// over while the old slot still serves: the old slot is to get the
	// empty image (ActionHandoff). A pod with a next slot is not complete
	// until then (hot.go).
	HandoffOwed []string
	// Ready: PodReady and every running sidecar complete, i.e. healthy and
	// running what was written, and no hot upgrade under way.
	Ready bool
	// Available: Ready, and for the last write's minReadySeconds
	// (ReleaseAt is zero).
	Available bool
}

// Container is one recorded sidecar of a Pod.
type Container struct {
	Name string
	// Init: the container is in spec.initContainers.
	Init bool
	// Runs: the container keeps running once the pod started: a regular
	// sidecar, or a native one (an init container with restartPolicy
	// Always). An ordinary init container ran to completion before the app
	// started and the kubelet never runs it again, so its image cannot
	// change in place and it takes no part in completion or readiness.
	Runs bool
	// Image is the image in the pod spec now.
	Image string
	// ContainerID and ImageID are from the container's status, "" without
	// one; a waiting container shows those of its last exited instance.
	ContainerID string
	ImageID     string
	// Running: the container's status says running.
	Running bool
	// Ready: the container's status says ready (its readiness probe
	// passes).
	Ready bool
	// StatusImage is the image the container's status shows.
	StatusImage string
	// NotStarted: the container runs, is a native sidecar (an init
	// container that Runs), and its status says its startup probe has not
	// passed (started false). The kubelet acts on a change of its spec
	// only once the probe passes.
	NotStarted bool
	// StartFailed: the container does not run, and waits because the
	// kubelet could not start it (startFailed): its image does not pull,
	// or it keeps crashing.
	StartFailed bool
	// Unacted: the container's pod spec image differs from the one last
	// written (someone else changed it), and the kubelet has still to act on
	// that change: the status shows the container running another image, or
	// not running while the kubelet replaces it (stopping the old one,
	// pulling the new one), rather than failing to start the new one. A
	// write over it waits (HeldChangeInFlight).
	Unacted bool
	// InFlight: the controller wrote the container in place, the write is
	// not complete yet, and the pod spec still holds it. A write someone
	// else wrote over (a hand edit) is never completed: the kubelet acts on
	// the spec, and the container is drifted instead.
	InFlight bool
	// Recorded is the container's record.
	Recorded revision.ContainerState
	// Complete is UpdateComplete for a container that Runs, with
	// ResizeComplete too when the write resized it, and for a drifted one:
	// it runs, and the change is not Unacted; false for one that does not
	// run.
	Complete bool
	// Unresized: the container's status shows cpu or memory other than its
	// spec's: the kubelet has a resize to do. False when the status shows
	// no resources (a node that does not resize).
	Unresized bool
	// Resources are the container's cpu and memory in the pod spec, when
	// Unresized.
	Resources *corev1.ResourceRequirements
	// ResizeOwed: the write in flight is done but for its resize, which
	// did not land (Pod.ResizeOwed): the kubelet has nothing to do for it
	// until ActionResize writes it.
	ResizeOwed bool
	// ResizeHeld: the write in flight is done but for a resize the kubelet
	// holds (PodResizePending) or failed (PodResizeInProgress with Error). The
	// container runs what it ran; another
	// write may go over it.
	ResizeHeld bool
}

// drifted reports whether c's pod spec image differs from the one recorded
// as last written.
func (c Container) drifted() bool {
	return !SameImage(c.Recorded.Image, c.Image)
}

// resizeConditionText is the kubelet's word on a resize of pod, when it
// gave one with a reason (Pod.ResizeCondition).
func resizeConditionText(pod *corev1.Pod) string {
	c, ok := resizeCondition(pod)
	if !ok || c.Reason == "" {
		return ""
	}
	if c.Message == "" {
		return fmt.Sprintf("%s %s", c.Type, c.Reason)
	}
	return fmt.Sprintf("%s %s: %s", c.Type, c.Reason, c.Message)
}

// Classify judges pod, which carries rec as its record of the SidecarSet
// whose latest revision is latest. Completion is judged against the image
// last written (rec's), not the latest declared one: a pod on an older
// revision is consistent when it runs what its own revision says.
//
// The caller passes only pods for which Active holds.
func Classify(pod *corev1.Pod, rec revision.SetState, latest Latest) Pod {
	readReleased := passed(rec.Write, latest.ReleasedBefore)
	if readReleased {
		rec = releasedRecord(rec)
	}
	p := Pod{
		ReadReleased:    readReleased,
		Key:             types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name},
		Labels:          pod.Labels,
		Generation:      pod.Generation,
		Record:          rec,
		Updated:         rec.Hash == latest.Hash,
		PodReady:        podReady(pod),
		Pending:         pod.Status.Phase == corev1.PodPending,
		ResizeOwed:      owedResizes(pod, rec),
		ResizeCondition: resizeConditionText(pod),
	}
	w := progress{complete: true, onlyOwed: true}
	for _, rc := range rec.Containers {
		c, held, found := p.containerOf(pod, rc)
		if !found {
			// Containers cannot be removed from a pod; only a record edited
			// by hand names one that is not there. Nothing can be written to
			// it, and the pod is not upgradable (upgradable).
			continue
		}
		w.add(c, held, &p)
		p.Containers = append(p.Containers, c)
		if image, declared := latest.Containers[rc.Name]; declared && !c.Runs && image != c.Image {
			p.StaleInit = append(p.StaleInit, c.Name)
		}
		if c.drifted() {
			p.Drifted = append(p.Drifted, c.Name)
		}
	}
	for _, h := range hotPairs(rec) {
		if h.upgrading(p) {
			// An update not done until its handoff is.
			w.complete, w.onlyOwed, p.Updating = false, false, true
		}
	}
	p.HandoffOwed = handoffsOwed(p)
	p.Upgradable, p.NotUpgradable, p.Resize = upgradable(pod, p, latest, w.held)
	p.Ready = p.PodReady && w.complete
	if w := cmp.Or(rec.Write, rec.Released); w != nil {
		// A pod not Ready waits for no minReadySeconds (judgeDisruption).
		p.BackAt = releaseTime(pod, rec.Containers, 0)
		if p.PodReady {
			p.BackAt = releaseTime(pod, rec.Containers, w.MinReadySeconds)
		}
		if p.PodReady && latest.Now.Before(p.BackAt) {
			p.ReleaseAt = p.BackAt
		}
	}
	p.Available = p.Ready && p.ReleaseAt.IsZero()
	p.judgeDisruption(w)
	return p
}

// progress is how far the last write into a pod's running sidecars got.
type progress struct {
	// complete: every running sidecar is complete.
	complete bool
	// onlyOwed: every running sidecar is complete but for a resize still
	// to write (ActionResize).
	onlyOwed bool
	// wrote: some running sidecar still carries the record of a write.
	wrote bool
	// held says why the kubelet holds a resize written into the pod.
	held string
}

// add counts c, a sidecar of p whose resize the kubelet holds for the
// reason held, if any, marking p Updating when c's write is in flight.
func (w *progress) add(c Container, held string, p *Pod) {
	if held != "" {
		w.held = held
	}
	if !c.Runs {
		return
	}
	if !c.Complete {
		w.complete = false
		w.onlyOwed = w.onlyOwed && c.ResizeOwed
	}
	if c.InFlight {
		p.Updating = true
	}
	w.wrote = w.wrote || written(c.Recorded)
}

// containerOf judges the sidecar rc records in pod, whose record p holds,
// with why the kubelet holds its resize, if it does; found is false when
// the spec lacks it. Completion is UpdateComplete, and ResizeComplete when
// the write resized it; for a drifted sidecar, that the kubelet acted on
// the edit.
func (p Pod) containerOf(pod *corev1.Pod, rc revision.ContainerState) (c Container, held string, found bool) {
	spec, init, found := specContainer(pod, rc.Name)
	if !found {
		return Container{}, "", false
	}
	st := containerStatus(pod, rc.Name, init)
	c = Container{
		Name:        rc.Name,
		Init:        init,
		Runs:        !init || restartsAlways(spec),
		Image:       spec.Image,
		ContainerID: st.ContainerID,
		ImageID:     st.ImageID,
		Running:     st.State.Running != nil,
		Ready:       st.Ready,
		StatusImage: st.Image,
		StartFailed: startFailed(st),
		NotStarted:  init && st.State.Running != nil && st.Started != nil && !*st.Started,
		Recorded:    rc,
	}
	drifted := c.drifted()
	c.Unacted = c.Runs && drifted && (c.Running && !runsImage(st, spec.Image) || !c.Running && !startFailed(st))
	if c.Unresized = c.Running && st.Resources != nil && !runsResources(spec.Resources, st); c.Unresized {
		c.Resources = cpuMemoryOf(spec.Resources)
	}
	if !c.Runs {
		return c, "", true
	}
	write := storedWrite(pod, p.Record.Write)
	c.Complete = UpdateComplete(rc, write, st, pod.Status.ObservedGeneration)
	if rc.Resized && c.Complete && (!ResizeComplete(pod, spec, st, write) || p.owes(rc.Name)) {
		c.Complete = false
		c.ResizeOwed = p.owes(rc.Name)
		if why, ok := resizeRefused(pod); ok {
			c.ResizeHeld = true
			held = fmt.Sprintf("%s of %s", why, c.Name)
		} else if cond, ok := resizeCondition(pod); ok && cond.Reason == corev1.PodReasonError {
			// The kubelet failed it and retries (a memory limit below
			// what the sidecar uses): a write may go over it.
			c.ResizeHeld = true
		}
	}
	if drifted {
		// Someone else's change, over any write of ours: the kubelet acts
		// on the spec, and done is that it has. A status from before the
		// edit cannot tell: the kubelet may have acted on the spec in
		// between (a write of ours the edit replaced) and be restarting
		// the container for it. A kubelet that reports no generation
		// (before 1.33, or with the feature off) is taken at its status:
		// nothing else tells, and waiting for a generation it never
		// reports would hold the pod for ever.
		observed := pod.Status.ObservedGeneration == 0 || pod.Status.ObservedGeneration >= pod.Generation
		c.Complete = c.Running && !c.Unacted && observed
		// The edit is the kubelet's next act, not a resize owed: left,
		// the pod read as back but for its resize and was recorded back
		// while still to restart.
		c.ResizeOwed = c.ResizeOwed && c.Complete
	}
	c.InFlight = !c.Complete && written(rc) && !drifted
	return c, held, true
}

// storedWrite returns the write w as the pod can show it done: the apiserver
// moves the generation only when the spec changed, and a write it stored
// as it was (a mutating policy put back what was written over) made none,
// and none is to be waited for.
func storedWrite(pod *corev1.Pod, w *revision.Write) *revision.Write {
	if w == nil || pod.Generation >= w.Generation {
		return w
	}
	clamped := *w
	clamped.Generation = pod.Generation
	return &clamped
}

// upgradable says whether p reaches latest in place (Pod.Upgradable), why
// not, and the resizes that takes. held says why the kubelet holds a resize
// written into the pod.
func upgradable(pod *corev1.Pod, p Pod, latest Latest, held string) (bool, string, []ContainerResources) {
	rec := p.Record
	imagesOnly := rec.ImagelessHash == latest.ImagelessHash ||
		(latest.PreviousImagelessHash != "" && rec.ImagelessHash == latest.PreviousImagelessHash)
	ok, why := imagesOnly, ""
	var resize []ContainerResources
	if !imagesOnly && latest.ResizableFrom[rec.Revision] {
		resize, why = resizesOf(pod, p.Containers, latest)
		ok = why == ""
	}
	for name := range latest.Containers {
		if _, hot := latest.Hot[name]; hot {
			for _, slot := range v1alpha1.HotSlots(name) {
				if _, found := p.container(slot); !found {
					ok, why = false, fmt.Sprintf("the pod has no container %s for the hot upgrade of %s: it needs a recreate", slot, name)
				}
			}
			continue
		}
		if _, found := p.container(name); !found {
			ok, why = false, fmt.Sprintf("the pod has no container %s: it needs a recreate", name)
		}
	}
	if held != "" && imagesOnly {
		// The kubelet holds the resize to what the latest revision
		// declares. A revision the pod reaches in place otherwise (an
		// undo) is written over it.
		ok, why = false, held
	}
	return ok, why, resize
}

// judgeDisruption sets whether the rollout has p down (Disrupting),
// whether its last write is back (Back, BackButOwed), and whether it failed
// again once released (Again), from its record and w. waiting: the pod is Ready, and has not been Ready for its last write's
// minReadySeconds yet; judged whether or not the write is done, so that a
// pod whose images are done but for a resize or a handoff it owes waits
// out minReadySeconds too before it is recorded back.
func (p *Pod) judgeDisruption(w progress) {
	rec := p.Record
	waiting := !p.ReleaseAt.IsZero()
	switch {
	case rec.Write == nil && rec.Released != nil:
		p.Again = rec.Released.WasReady && p.Updated && (!p.Ready || waiting)
	case rec.Write == nil:
		// Written before writes were kept, by a version that wrote ready
		// pods only within maxUnavailable: an update in flight in a pod
		// still ready, or no longer ready, is taken for a disruption, as
		// that version counted it; one in a pod never written while ready
		// cannot be told apart, and counts while its container runs the
		// old instance.
		p.Disrupting = p.Updating && (p.PodReady || p.runningInFlightAny())
		p.Back = w.wrote && w.complete
	case rec.Write.WasReady:
		// A ready pod whose write lacks only its resize runs, ready, what
		// it ran: the resize still to write is a disruption of its own.
		waitsForResize := w.onlyOwed && len(p.ResizeOwed) > 0
		// A hot upgrade counted only since the pod turned ready, whose
		// first write is done: its handoff takes a slot of its own.
		waitsForHandoff := rec.Write.TurnedReady && len(p.HandoffOwed) > 0 && !p.runningInFlightAny()
		p.Disrupting = !p.Ready || waiting
		p.BackButOwed = p.PodReady && !waiting && (waitsForResize || waitsForHandoff)
		p.Back = p.Ready && !waiting
	default:
		p.Back = w.complete && !waiting
		// Written while not ready, ready now with the write still to
		// come: the kubelet's restart will take it down. Next records it
		// (ActionRecordDisruption), so that it counts until it is back.
		p.Disrupting = p.PodReady && p.runningInFlightAny()
	}
}

// releaseTime returns when pod, with the write rec records done, has been
// Ready for the write's minReadySeconds, or will have been: counted from
// the later of the Ready condition's last transition to True and the start
// of every running sidecar rec says was written, both from the node's
// clock, so that a sidecar that crashed and started again, in a pod that
// never showed Ready=False (a sidecar without a readiness probe), starts
// it again. A node clock behind the manager's shortens the wait by the
// skew. Worked cases, minReadySeconds 10:
//
//	Ready since 12:00:10, sidecar started 12:00:05 → 12:00:20
//	Ready since 12:00:10, sidecar started 12:00:25 → 12:00:35 (it restarted)
//	sidecar started 12:00:25, minReadySeconds 0    → 12:00:25 (what Classify asks of a pod not Ready)
//	sidecar started 12:00:25 running the old content
//	  under its old name (mayBeOld), grace 30s       → 12:01:15 (12:00:25 + 30s + 10s + 10s)
func releaseTime(pod *corev1.Pod, recorded []revision.ContainerState, minReadySeconds int32) time.Time {
	var since time.Time
	later := func(t metav1.Time) {
		if t.After(since) {
			since = t.Time
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			later(c.LastTransitionTime)
		}
	}
	for _, rc := range recorded {
		if !written(rc) {
			continue
		}
		_, init, found := specContainer(pod, rc.Name)
		if !found {
			continue
		}
		if st := containerStatus(pod, rc.Name, init); st.State.Running != nil {
			start := st.State.Running.StartedAt
			if mayBeOld(rc, st) {
				start = metav1.NewTime(start.Add(stopTime(pod)))
			}
			later(start)
		}
	}
	return since.Add(time.Duration(max(0, minReadySeconds)) * time.Second)
}

// mayBeOld reports whether a new running container of a sidecar written
// in place may be the old one, crashed and started again from the spec
// before the write: the kubelet publishes a sync's status, at the write's
// generation, before it acts on the written spec, and then stops that
// container. It runs the content the write replaced under another name
// than the one written (a tag of the same content reads the same).
func mayBeOld(rc revision.ContainerState, st corev1.ContainerStatus) bool {
	return rc.PreviousContainerID != "" && st.ContainerID != rc.PreviousContainerID &&
		rc.PreviousImage != rc.Image && rc.PreviousImageID != "" &&
		sameImageID(st.ImageID, rc.PreviousImageID) && !runsImage(st, rc.Image)
}

// stopTime is how long after its start a container that mayBeOld counts
// as started: by then the kubelet has acted on the write and stopped the
// old one, which takes it up to the pod's terminationGracePeriodSeconds
// (30 unless set) and a moment to begin.
func stopTime(pod *corev1.Pod) time.Duration {
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = max(0, *g)
	}
	return time.Duration(grace)*time.Second + 10*time.Second
}

// owes reports whether the resize of the named sidecar is owed.
func (p Pod) owes(name string) bool {
	for _, r := range p.ResizeOwed {
		if r.Name == name {
			return true
		}
	}
	return false
}

// written reports whether the controller wrote rc in place: its record
// describes the container that ran before, or says it was resized.
func written(rc revision.ContainerState) bool {
	return rc.PreviousContainerID != "" || rc.PreviousImage != "" || rc.PreviousImageID != "" || rc.NoneRan || rc.Resized
}

// runsImage reports whether a running container's status shows image: the
// status names it, as the runtime reads references, or image pins the
// digest the status's imageID shows. The runtime names the image by one of
// the tags its content has, so a tag that shares content with others may
// show as another of them.
func runsImage(st corev1.ContainerStatus, image string) bool {
	if SameImage(image, st.Image) {
		return true
	}
	d := declaredDigest(image)
	return d != "" && d == imageIDDigest(st.ImageID)
}

// startFailed reports whether a container that does not run is waiting
// because the kubelet could not start it from its spec: its image does not
// pull or is not valid, its configuration is refused, or it keeps crashing.
// The kubelet has then acted on the spec; any other container that does not
// run is still being replaced or started.
func startFailed(st corev1.ContainerStatus) bool {
	if st.State.Waiting == nil {
		return false
	}
	switch st.State.Waiting.Reason {
	case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "ImageInspectError",
		"RegistryUnavailable", "SignatureValidationFailed", "CrashLoopBackOff", "CreateContainerConfigError",
		"CreateContainerError", "RunContainerError", "PreStartHookError", "PostStartHookError":
		return true
	}
	return false
}

func restartsAlways(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// shows reports whether c's status shows image running (runsImage).
func (c Container) shows(image string) bool {
	return runsImage(corev1.ContainerStatus{Image: c.StatusImage, ImageID: c.ImageID}, image)
}

// unacted returns a sidecar of p for which Unacted holds.
func (p Pod) unacted() (Container, bool) {
	for _, c := range p.Containers {
		if c.Unacted {
			return c, true
		}
	}
	return Container{}, false
}

// runningInFlightAny reports whether a sidecar of p whose write is in
// flight runs: the kubelet has yet to restart it.
func (p Pod) runningInFlightAny() bool {
	_, ok := p.runningInFlight()
	return ok
}

func (p Pod) container(name string) (Container, bool) {
	for _, c := range p.Containers {
		if c.Name == name {
			return c, true
		}
	}
	return Container{}, false
}

// specContainer finds a container by name among the pod's containers and
// init containers; names are unique across both.
func specContainer(pod *corev1.Pod, name string) (corev1.Container, bool, bool) {
	if c, ok := byName(pod.Spec.Containers, name); ok {
		return c, false, true
	}
	if c, ok := byName(pod.Spec.InitContainers, name); ok {
		return c, true, true
	}
	return corev1.Container{}, false, false
}

// containerStatus returns the status of the named container, or a zero
// status (not running) when the kubelet has not reported one yet.
func containerStatus(pod *corev1.Pod, name string, init bool) corev1.ContainerStatus {
	statuses := pod.Status.ContainerStatuses
	if init {
		statuses = pod.Status.InitContainerStatuses
	}
	for _, st := range statuses {
		if st.Name == name {
			return st
		}
	}
	return corev1.ContainerStatus{}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Disrupted reports whether any SidecarSet's rollout disrupted pod and it is
// not back yet (DisruptedBy names one). PodDisruptionBudgets are shared by
// every set, so a pod one set disrupted is spent for all of them.
func Disrupted(pod *corev1.Pod, state revision.State, sets Sets, now time.Time) bool {
	return len(DisruptedBy(pod, state, sets, now)) > 0
}

// Sets tells what each existing SidecarSet's records mean, by name: its
// latest Hash and its status.releasedBefore (SetsOf).
type Sets map[string]Latest

// SetsOf returns the Sets of sets.
func SetsOf(sets []v1alpha1.SidecarSet) Sets {
	out := make(Sets, len(sets))
	for i := range sets {
		l := Latest{Hash: revision.Hash(&sets[i].Spec)}
		if w := sets[i].Status.ReleasedBefore; w != nil {
			l.ReleasedBefore = w.Time
		}
		out[sets[i].Name] = l
	}
	return out
}

// classifyFor classifies pod for the set name of sets, at now; for a set
// sets does not name (deleted), against no revision.
func (s Sets) classifyFor(pod *corev1.Pod, name string, rec revision.SetState, now time.Time) (Pod, bool) {
	l, ok := s[name]
	l.Now = now
	return Classify(pod, rec, l), ok
}

// DisruptedBy names, sorted, the SidecarSets of state whose rollouts
// disrupted pod, which is not back yet (Pod.Disrupting), judged at now.
// A set sets does not name was deleted and releases nothing any more: its
// record counts only while its write is in flight. A pod back but for a
// write of its own (BackButOwed) is ready: it counts for its set until
// the record says so, and for no budget.
func DisruptedBy(pod *corev1.Pod, state revision.State, sets Sets, now time.Time) []string {
	var names []string
	for name, rec := range state {
		c, ok := sets.classifyFor(pod, name, rec, now)
		if c.BackButOwed {
			continue
		}
		if (ok && c.Disrupting) || (!ok && c.Disrupting && c.Updating) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// MarkOthers sets what the records of others, the pod's other sets, tell
// about p, the pod classified for one set: DisruptedBy, and OthersWriting
// when p is Ready and Back. A deleted set does not hold a Ready pod: it
// releases nothing any more, so nothing can be released on a Ready its
// write is about to end.
func MarkOthers(p *Pod, pod *corev1.Pod, others revision.State, sets Sets, now time.Time) {
	p.DisruptedBy = DisruptedBy(pod, others, sets, now)
	if !p.PodReady {
		return
	}
	p.DisruptedBy = slices.DeleteFunc(p.DisruptedBy, func(name string) bool {
		_, ok := sets[name]
		return !ok
	})
	if p.Back {
		p.OthersWriting = OthersWriting(pod, others, sets, now)
	}
}

// OthersWriting reports whether a write of one of the records of others,
// the pod's other sets, that no set counts still has a running sidecar for
// the kubelet to restart in pod (Pod.OthersWriting): one made while the pod
// was not Ready, or by a set sets does not name (deleted). A write whose
// set owes only a write of its own (a resize or a handoff, recorded back)
// has nothing in flight.
func OthersWriting(pod *corev1.Pod, others revision.State, sets Sets, now time.Time) bool {
	for name, rec := range others {
		c, exists := sets.classifyFor(pod, name, rec, now)
		if w := c.Record.Write; w != nil && (!w.WasReady || !exists) && c.runningInFlightAny() {
			return true
		}
	}
	return false
}

// Disruptions are the labels of the pods that a SidecarSet's rollout has
// down (Disrupted): the disruptions an in-place write spent, which, unlike
// an eviction's, no budget's status shows until the kubelet restarted the
// container. The controller and `kubectl sidecarset restart` count a
// budget's spent disruptions alike, with Spent.
type Disruptions []labels.Set

// NewDisruptions returns the Disruptions among pods, judged at now against
// the existing sets. Pods that are not Active count nowhere; of a record
// that is partly unreadable, the readable entries count.
func NewDisruptions(pods []*corev1.Pod, sets Sets, now time.Time) Disruptions {
	var d Disruptions
	for _, pod := range pods {
		if !Active(pod) {
			continue
		}
		if state, _ := revision.Decode(pod.Annotations); Disrupted(pod, state, sets, now) {
			d = append(d, pod.Labels)
		}
	}
	return d
}

// Spent counts the disruptions whose pods sel selects (Budget.Spent).
func (d Disruptions) Spent(sel labels.Selector) int32 {
	var n int32
	for _, l := range d {
		if sel.Matches(l) {
			n++
		}
	}
	return n
}

// BudgetSelector returns the pods a policy/v1 PodDisruptionBudget's selector
// selects, as the disruption controller reads it: an empty selector ({})
// selects every pod of the budget's namespace, a nil one none. ok is false
// for a budget that selects nothing (nil, or a selector that does not parse,
// which the apiserver refuses anyway).
func BudgetSelector(s *metav1.LabelSelector) (labels.Selector, bool) {
	if s == nil {
		return nil, false
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, false
	}
	return sel, true
}
