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
	"github.com/sidecarset/sidecarset/internal/imageref"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// Pod is a pod that carries a SidecarSet's record, judged against the latest
// revision. Classify builds it; Next and status.Compute read it.
type Pod struct {
	Key types.NamespacedName
	// Labels are the pod's labels, shared with it, never modified.
	Labels map[string]string
	// Generation is the pod's metadata.generation.
	Generation int64
	// Record is the set's entry of the pod's state annotation.
	Record revision.SetState
	// Containers are the recorded sidecars found in the spec, in record order.
	Containers []Container

	// Updated: the record's Hash is the latest one (the kubelet may lag).
	Updated bool
	// Updating: some running sidecar written in place is not complete yet.
	Updating bool
	// Disrupting: a write restarted a running sidecar of the ready pod
	// (Write.WasReady), and it has not been ready since, every sidecar
	// complete, for minReadySeconds; or it is ready with such a write to come
	// (ActionRecordDisruption). It counts against maxUnavailable and budgets.
	Disrupting bool
	// Back: the last write is done: every running sidecar complete and, if it
	// disrupted the pod, the pod ready again. releasedBefore passes the write
	// once every earlier one is back too; a later failure is then Again.
	Back bool
	// Again: the pod, on the latest revision, came back from a write that
	// disrupted it (Record.Released) and failed since: like a Deployment, it
	// counts against maxUnavailable while the rollout has work, without a slot.
	Again bool
	// ReleaseAt: when a Ready pod will be Ready past minReadySeconds, or zero.
	ReleaseAt time.Time
	// ReadReleased: releasedBefore passed the write; Record reads released.
	ReadReleased bool
	// BackAt is when the pod came, or comes, back from its last write.
	BackAt time.Time
	// Upgradable: the pod differs from the latest revision only in images
	// (the same ImagelessHash) and, from a revision in ResizableFrom, in cpu
	// and memory the apiserver would resize; every latest sidecar is in it.
	// Otherwise, or while the kubelet holds a resize, it needs a recreate.
	Upgradable bool
	// NotUpgradable says why a pod is not Upgradable.
	NotUpgradable string
	// Resize lists the resizes an update to the latest revision writes.
	Resize []ContainerResources
	// ResizeCondition is the kubelet's word on a resize of the pod, when it
	// gave a reason: "TYPE REASON: message".
	ResizeCondition string
	// ResizeOwed lists resizes recorded as written that did not land.
	ResizeOwed []ContainerResources
	// Drifted names the containers whose spec image someone else changed.
	Drifted []string
	// StaleInit names the ordinary init containers that ran an image other
	// than the latest declared one, which reaches new pods only.
	StaleInit []string
	// PodReady: the pod condition Ready is True.
	PodReady bool
	// DisruptedBy names the other sets whose rollouts have the pod down (set
	// by MarkOthers). A write restarting a running sidecar of it waits, Ready
	// or not, as no budget or slot would see it (HeldByOtherRollout), unless
	// a sidecar of this set fails in it: then it could wait for ever.
	DisruptedBy []string
	// OthersWriting: another set's write that no set counts (made while the
	// pod was not Ready, or by a deleted set) is not done: the Ready the pod
	// shows may predate it, so it is not released yet (set by MarkOthers).
	OthersWriting bool
	// NodeLost: the pod's node is not Ready (set by the caller): its kubelet
	// acts on nothing, so the pod is neither written, counted nor waited on.
	NodeLost bool
	// Pending: the pod's phase is Pending: a write waits for the pod.
	Pending bool
	// HandoffOwed names the HotUpgrade sidecars whose next slot has taken
	// over while the old one still serves (ActionHandoff, hot.go).
	HandoffOwed []string
	// Ready: PodReady, every running sidecar complete, no hot upgrade going.
	Ready bool
	// Available: Ready, and past minReadySeconds (ReleaseAt is zero).
	Available bool
}

// Container is one recorded sidecar of a Pod.
type Container struct {
	Name string
	// Init: the container is in spec.initContainers.
	Init bool
	// Runs: a regular or native sidecar. An ordinary init container never
	// runs again, and takes no part in completion or readiness.
	Runs bool
	// Image is the image in the pod spec now.
	Image string
	// ContainerID and ImageID are from the container's status, "" without
	// one; a waiting container shows those of its last exited instance.
	ContainerID string
	ImageID     string
	// Running: the container's status says running.
	Running bool
	// Ready: the container's status says ready.
	Ready bool
	// StatusImage is the image the container's status shows.
	StatusImage string
	// NotStarted: a native sidecar whose startup probe has not passed: the
	// kubelet acts on a change of its spec only once it does.
	NotStarted bool
	// StartFailed: the kubelet could not start the container (startFailed).
	StartFailed bool
	// Unacted: someone else changed the spec image and the kubelet has yet
	// to act on it: the status shows another image running, or the container
	// being replaced. A write over it waits (HeldChangeInFlight).
	Unacted bool
	// InFlight: the controller's write of the container is not complete, and
	// the spec still holds it (a hand edit over it makes it Drifted instead).
	InFlight bool
	// Recorded is the container's record.
	Recorded revision.ContainerState
	// Complete is UpdateComplete (and ResizeComplete if resized) for a
	// container that Runs; for a drifted one, that the kubelet acted on it.
	Complete bool
	// Unresized: the status shows cpu or memory other than the spec's.
	Unresized bool
	// Resources are the spec's cpu and memory, when Unresized.
	Resources *corev1.ResourceRequirements
	// ResizeOwed: the write is done but for its resize, which did not land.
	ResizeOwed bool
	// ResizeHeld: the write in flight is done but for a resize the kubelet
	// holds or failed: another write may go over it.
	ResizeHeld bool
}

// drifted reports whether c's spec image differs from the one last written.
func (c Container) drifted() bool {
	return !imageref.Same(c.Recorded.Image, c.Image)
}

// resizeConditionText is Pod.ResizeCondition of pod.
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

// Classify judges pod, an Active pod carrying rec, against latest; a
// sidecar is complete when it runs the image last written, not the latest.
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
	w := progress{complete: true}
	for _, rc := range rec.Containers {
		c, held, found := p.containerOf(pod, rc)
		if !found {
			// Only a record edited by hand names a container the pod
			// lacks: the pod is not upgradable.
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
			w.complete, p.Updating = false, true
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
	// wrote: some running sidecar still carries the record of a write.
	wrote bool
	// held says why the kubelet holds a resize written into the pod.
	held string
}

// add counts c, a sidecar of p; held is why its resize is held, if it is.
func (w *progress) add(c Container, held string, p *Pod) {
	if held != "" {
		w.held = held
	}
	if !c.Runs {
		return
	}
	if !c.Complete {
		w.complete = false
	}
	if c.InFlight {
		p.Updating = true
	}
	w.wrote = w.wrote || written(c.Recorded)
}

// containerOf judges the sidecar rc records in pod, with why the kubelet
// holds its resize, if it does; found is false when the spec lacks it.
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
	c.Complete = unchanged(rc, spec, st) || UpdateComplete(rc, write, st, pod.Status.ObservedGeneration)
	if rc.Resized && c.Complete && (!ResizeComplete(pod, spec, st, write) || p.owes(rc.Name)) {
		c.Complete = false
		c.ResizeOwed = p.owes(rc.Name)
		if why, ok := resizeRefused(pod); ok {
			c.ResizeHeld = true
			held = fmt.Sprintf("%s of %s", why, c.Name)
		} else if cond, ok := resizeCondition(pod); ok && cond.Reason == corev1.PodReasonError {
			// The kubelet failed it and retries: a write may go over it.
			c.ResizeHeld = true
		}
	}
	if drifted {
		// Someone else's change: done is that the kubelet acted on the
		// spec, which a status from before the edit cannot tell. A kubelet
		// reporting no generation is taken at its status: nothing else tells.
		// A resize the write made stays the write's to wait for; one owed
		// goes once the kubelet has acted on the edit.
		observed := pod.Status.ObservedGeneration == 0 || pod.Status.ObservedGeneration >= pod.Generation
		acted := c.Running && !c.Unacted && observed
		c.ResizeOwed = acted && p.owes(rc.Name)
		c.Complete = acted && (!rc.Resized || ResizeComplete(pod, spec, st, nil) && !c.ResizeOwed)
	}
	c.InFlight = !c.Complete && written(rc) && !drifted
	return c, held, true
}

// unchanged reports whether the last write into a sidecar left its spec
// image as its running container was started with: admission stored the
// image the pod had (a digest pin, a mirror of the declared image, which a
// new revision writes again), and the kubelet restarts nothing for it.
// Not over a write in flight (Between), which the kubelet may still act on.
func unchanged(rc revision.ContainerState, spec corev1.Container, st corev1.ContainerStatus) bool {
	return st.State.Running != nil && rc.PreviousContainerID != "" && st.ContainerID == rc.PreviousContainerID &&
		rc.PreviousImage != "" && rc.PreviousImage == spec.Image && len(rc.Between) == 0
}

// storedWrite returns w as the pod can show it done: a write the apiserver
// stored unchanged made no generation to wait for.
func storedWrite(pod *corev1.Pod, w *revision.Write) *revision.Write {
	if w == nil || pod.Generation >= w.Generation {
		return w
	}
	clamped := *w
	clamped.Generation = pod.Generation
	return &clamped
}

// upgradable says whether p reaches latest in place (Pod.Upgradable), why
// not, and the resizes that takes; held says why a resize is held.
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
		// The kubelet holds the latest resize; an undo is written over it.
		ok, why = false, held
	}
	return ok, why, resize
}

// judgeDisruption sets Disrupting, Back and Again from p's record and w. A
// write owing a resize or a handoff is not done: the pod it disrupted
// counts until that write is done too, and minReadySeconds have passed.
func (p *Pod) judgeDisruption(w progress) {
	rec := p.Record
	waiting := !p.ReleaseAt.IsZero()
	switch {
	case rec.Write == nil && rec.Released != nil:
		p.Again = rec.Released.WasReady && p.Updated && (!p.Ready || waiting)
	case rec.Write == nil:
		// A record without a Write, from a version that wrote ready
		// pods only within maxUnavailable: judged as it counted them.
		p.Disrupting = p.Updating && (p.PodReady || p.runningInFlightAny())
		p.Back = w.wrote && w.complete
	case rec.Write.WasReady:
		p.Disrupting = !p.Ready || waiting
		p.Back = p.Ready && !waiting
		// Counted since it turned ready, in no slot the rollout took:
		// serving again, owing only a handoff or a resize, it counts no
		// more, and that write takes a slot (Pod.holdsSlot).
		owes := len(p.HandoffOwed) > 0 || len(p.ResizeOwed) > 0
		if rec.Write.TurnedReady && p.PodReady && !waiting && owes && !p.runningInFlightAny() {
			p.Disrupting = false
		}
	default:
		p.Back = w.complete && !waiting
		// Written while not ready, ready now with the write still to
		// come: it counts from now on (ActionRecordDisruption).
		p.Disrupting = p.PodReady && p.runningInFlightAny()
	}
}

// releaseTime returns when pod, with the write rec records done, has been
// Ready for minReadySeconds, or will have been: from the later of the
// Ready transition and the start of every written sidecar (node clock),
// so that a sidecar's restart, even while the pod stays Ready, counts.
// Worked cases, minReadySeconds 10:
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
// in place may be the old one restarted before the kubelet acted on the
// write: it runs the replaced content under another name than the one
// written.
func mayBeOld(rc revision.ContainerState, st corev1.ContainerStatus) bool {
	return rc.PreviousContainerID != "" && st.ContainerID != rc.PreviousContainerID &&
		rc.PreviousImage != rc.Image && rc.PreviousImageID != "" &&
		imageref.SameID(st.ImageID, rc.PreviousImageID) && !runsImage(st, rc.Image)
}

// stopTime is how long after its start a container that mayBeOld counts
// as started: the old one's terminationGracePeriodSeconds and a moment.
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

// runsImage reports whether a running container's status shows image, by
// name as the runtime reads it, or by the digest image pins.
func runsImage(st corev1.ContainerStatus, image string) bool {
	if imageref.Same(image, st.Image) {
		return true
	}
	d := imageref.Digest(image)
	return d != "" && d == imageref.IDDigest(st.ImageID)
}

// startFailed reports whether a container that does not run waits because
// the kubelet acted on its spec and could not start it.
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

// runningInFlightAny reports whether runningInFlight finds a sidecar.
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

// specContainer finds a container by name in containers or initContainers.
func specContainer(pod *corev1.Pod, name string) (corev1.Container, bool, bool) {
	named := func(c corev1.Container) bool { return c.Name == name }
	if i := slices.IndexFunc(pod.Spec.Containers, named); i >= 0 {
		return pod.Spec.Containers[i], false, true
	}
	if i := slices.IndexFunc(pod.Spec.InitContainers, named); i >= 0 {
		return pod.Spec.InitContainers[i], true, true
	}
	return corev1.Container{}, false, false
}

// containerStatus returns the named container's status, zero if none yet.
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

// DisruptedBy names, sorted, the SidecarSets of state whose rollouts have
// pod down (Pod.Disrupting) at now. A deleted set (not in sets) counts
// only while its write is in flight.
func DisruptedBy(pod *corev1.Pod, state revision.State, sets Sets, now time.Time) []string {
	var names []string
	for name, rec := range state {
		c, ok := sets.classifyFor(pod, name, rec, now)
		if (ok && c.Disrupting) || (!ok && c.Disrupting && c.runningInFlightAny()) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// MarkOthers sets p's DisruptedBy, and OthersWriting when p is Ready and
// Back, from others, the pod's other sets' records.
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

// OthersWriting reports whether a write of others that no set counts still
// has a running sidecar to restart in pod (Pod.OthersWriting).
func OthersWriting(pod *corev1.Pod, others revision.State, sets Sets, now time.Time) bool {
	for name, rec := range others {
		c, exists := sets.classifyFor(pod, name, rec, now)
		if w := c.Record.Write; w != nil && (!w.WasReady || !exists) && c.runningInFlightAny() {
			return true
		}
	}
	return false
}

// Disruptions are the labels of the pods a SidecarSet's rollout has down
// (Disrupted), which no budget's status shows yet.
type Disruptions []labels.Set

// NewDisruptions returns the Disruptions among the Active pods, judged at
// now; of a partly unreadable record, the readable entries count.
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

// BudgetSelector returns what a PodDisruptionBudget's selector selects, as
// the disruption controller reads it ({} all, nil none); ok is false for none.
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
