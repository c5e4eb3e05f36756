package kubeletsim

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// This file is the simulated container runtime and the kubelet's decisions
// over it, as pure functions of a pod, its runtime state and the time: no
// client, no clock, no goroutines. The Sim calls advance whenever a pod
// changes or a deadline from nextWake passes.

// timing holds the durations that drive simulated containers (see Options).
type timing struct {
	pull, start         time.Duration
	completes, crashes  time.Duration
	backOff, maxBackOff time.Duration
}

// resync is how soon the kubelet looks at a pod again after a failed pull:
// its pod worker syncs again once PLEG relists (every second) and finds the
// image in back-off, so ErrImagePull shows about a second before
// ImagePullBackOff. A shorter back-off shortens it too.
const resync = time.Second

// killedExitCode is what a killed container reports: the busybox images on
// the real node ignore SIGTERM and die of SIGKILL after the grace period.
const killedExitCode = 137

type containerKind int

const (
	regular  containerKind = iota
	initOnce               // an ordinary init container: runs to completion before the next starts
	sidecar                // a native sidecar: an init container with restartPolicy Always
)

func kindOf(spec *corev1.Container, init bool) containerKind {
	switch {
	case !init:
		return regular
	case spec.RestartPolicy != nil && *spec.RestartPolicy == corev1.ContainerRestartPolicyAlways:
		return sidecar
	}
	return initOnce
}

// stage is where a container is in its life.
type stage int

const (
	stageWaiting          stage = iota // due for a (re)start: the next step pulls
	stagePulling                       // until due
	stageCreating                      // until due
	stageRunning                       // cur runs
	stageExited                        // cur terminated and will not start again
	stageErrImagePull                  // the pull failed; until due
	stageImagePullBackOff              // until due, then pull again
	stageCrashLoopBackOff              // cur terminated; until due, then start again
	stageInvalidImage                  // the image does not parse; stays until it changes
	stageNeverPull                     // pull policy Never and no image; stays until it changes
)

// instance is one container the runtime created: what containerd knows by
// its container ID.
type instance struct {
	id             string // containerd://<64 hex>
	image, imageID string
	startedAt      time.Time
	startupAt      time.Time // the startup probe passes: started from then on
	readyAt        time.Time // the readiness probe passes; zero: never
	unreadyAt      time.Time // the readiness probe fails from then on; zero: never
	exitAt         time.Time // exits by itself then; zero: runs until killed
	exitWith       int32
	finishedAt     time.Time // zero while running
	exitCode       int32
	// resources are the cpu and memory the runtime applied to it: the
	// spec's when it was created, then each resize's.
	resources corev1.ResourceRequirements
}

// container is the kubelet's view of one container of a pod across restarts.
type container struct {
	name string
	kind containerKind
	// image is the spec image the current (or coming) instance is for. The
	// kubelet's container hash covers only name and image, so an image that
	// differs from the spec is a changed definition.
	image string
	stage stage
	due   time.Time

	// reason and message are the waiting state the kubelet shows from its
	// last failed sync (its reason cache), until a container starts again.
	reason, message string

	ref          imageRef
	digest       string // what the last pull resolved, for the next instance
	pullStart    time.Time
	pullErr      string
	pullFailedAt time.Time
	pullBackOff  time.Duration
	crashBackOff time.Duration // before the next restart after an exit; zero: restart at once
	lastExit     time.Time

	cur, last *instance
	created   int32 // instances created so far; restartCount is one less
}

func (c *container) started(now time.Time) bool {
	return c.stage == stageRunning && !now.Before(c.cur.startupAt)
}

func (c *container) succeeded() bool {
	return c.stage == stageExited && c.cur != nil && c.cur.exitCode == 0
}

func (c *container) ready(now time.Time) bool {
	if c.kind == initOnce {
		return c.succeeded()
	}
	return c.stage == stageRunning && !c.cur.readyAt.IsZero() && !now.Before(c.cur.readyAt) &&
		(c.cur.unreadyAt.IsZero() || now.Before(c.cur.unreadyAt))
}

// podRuntime is everything the simulated kubelet keeps about one pod.
type podRuntime struct {
	uid         types.UID
	podIP       string
	startTime   time.Time
	initialized bool            // every init container has done its part once
	phase       corev1.PodPhase // Succeeded or Failed once the pod is done; empty before
	deleteSent  bool            // the final delete was sent
	generation  int64           // the pod generation last acted on; 0 before the first sync
	sync        *corev1.Pod     // the spec a sync with SyncDelay acts on at actAt; nil: none pending
	actAt       time.Time
	containers  map[string]*container
}

func newPodRuntime(uid types.UID) *podRuntime {
	return &podRuntime{uid: uid, containers: map[string]*container{}}
}

func (rt *podRuntime) container(spec *corev1.Container, init bool) *container {
	c := rt.containers[spec.Name]
	if c == nil {
		c = &container{name: spec.Name, kind: kindOf(spec, init), image: spec.Image}
		rt.containers[spec.Name] = c
	}
	return c
}

// nextWake is the earliest moment after now at which something changes
// without anyone touching the pod; zero when nothing will.
func (rt *podRuntime) nextWake(now time.Time) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if rt.phase != "" {
		return next
	}
	for _, c := range rt.containers {
		switch c.stage {
		case stagePulling, stageCreating, stageErrImagePull, stageImagePullBackOff, stageCrashLoopBackOff:
			consider(c.due)
		case stageRunning:
			consider(c.cur.exitAt)
			consider(c.cur.startupAt)
			consider(c.cur.readyAt)
			consider(c.cur.unreadyAt)
		}
	}
	return next
}

// event is an Event about a container of the pod.
type event struct {
	container       string
	init            bool
	warning         bool
	reason, message string
}

// machine is one simulated node's kubelet and container runtime.
type machine struct {
	timing
	reg    *registry
	images *nodeImages
	newID  func() string
}

// step is one pass of the kubelet's pod sync.
type step struct {
	*machine
	pod    *corev1.Pod
	rt     *podRuntime
	now    time.Time
	events []event
}

// advance moves rt forward to now as the kubelet would for pod, and returns
// the Events it would record on the way. It never changes pod.
func (m *machine) advance(pod *corev1.Pod, rt *podRuntime, now time.Time) []event {
	s := &step{machine: m, pod: pod, rt: rt, now: now}
	switch {
	case pod.DeletionTimestamp != nil:
		s.stopAll()
	case rt.phase != "":
		// A finished pod never runs again.
	default:
		s.applySpecChanges()
		if s.runInitContainers() {
			for i := range pod.Spec.Containers {
				spec := &pod.Spec.Containers[i]
				s.drive(rt.container(spec, false), spec)
			}
			s.finishIfDone()
		}
	}
	return s.events
}

func (s *step) record(c *container, warning bool, reason, message string) {
	s.events = append(s.events, event{container: c.name, init: c.kind != regular, warning: warning, reason: reason, message: message})
}

// applySpecChanges handles images changed in the pod spec. A running
// container is killed and started again at once, whatever the restart
// policy (computePodActions: "Restart regardless of the restart policy
// because the container spec changed"); nothing else in the pod restarts.
func (s *step) applySpecChanges() {
	changed := func(spec *corev1.Container) {
		c := s.rt.containers[spec.Name]
		if c == nil {
			return
		}
		if c.image == spec.Image {
			s.resize(c, spec)
			return
		}
		c.image = spec.Image
		// The kubelet keys both back-offs by the image, so a new image
		// starts without one; its last error no longer applies either.
		c.crashBackOff, c.pullBackOff = 0, 0
		c.reason, c.message = "", ""
		switch c.stage {
		case stageRunning:
			msg := fmt.Sprintf("Container %s definition changed, will be restarted", c.name)
			if c.kind != regular {
				msg = fmt.Sprintf("Init container %s definition changed", c.name)
			}
			s.kill(c, msg)
			c.stage = stageWaiting
		case stageExited:
			// What exited for good stays exited: only a running container is
			// restarted for a changed definition.
		default:
			c.stage = stageWaiting
		}
	}
	for i := range s.pod.Spec.InitContainers {
		changed(&s.pod.Spec.InitContainers[i])
	}
	for i := range s.pod.Spec.Containers {
		changed(&s.pod.Spec.Containers[i])
	}
}

// resize applies a running container's new cpu and memory, as the kubelet
// does once it admitted a resize: in place, unless the container's
// resizePolicy says RestartContainer for a resource that changed, when it is
// restarted (and the next instance gets the new resources). A container
// that does not run gets the spec's resources when it is next created.
func (s *step) resize(c *container, spec *corev1.Container) {
	if c.stage != stageRunning {
		return
	}
	want := cpuMemory(spec.Resources)
	if apiequality.Semantic.DeepEqual(want, c.cur.resources) {
		return
	}
	for _, p := range spec.ResizePolicy {
		if p.RestartPolicy == corev1.RestartContainer && changedResource(c.cur.resources, want, p.ResourceName) {
			s.kill(c, fmt.Sprintf("Container %s resize requires restart", c.name))
			c.stage = stageWaiting
			return
		}
	}
	c.cur.resources = want
}

// cpuMemory returns the cpu and memory of r: what a runtime applies to a
// container and the kubelet reports in containerStatuses[].resources.
func cpuMemory(r corev1.ResourceRequirements) corev1.ResourceRequirements {
	keep := func(l corev1.ResourceList) corev1.ResourceList {
		out := corev1.ResourceList{}
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := l[name]; ok {
				out[name] = q.DeepCopy()
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return corev1.ResourceRequirements{Requests: keep(r.Requests), Limits: keep(r.Limits)}
}

// changedResource reports whether name's request or limit differs between
// a and b.
func changedResource(a, b corev1.ResourceRequirements, name corev1.ResourceName) bool {
	differs := func(x, y corev1.ResourceList) bool {
		qx, inX := x[name]
		qy, inY := y[name]
		return inX != inY || qx.Cmp(qy) != 0
	}
	return differs(a.Requests, b.Requests) || differs(a.Limits, b.Limits)
}

// runInitContainers drives the init containers in order: each ordinary one
// must complete and each native sidecar must have started before the next
// starts. It reports whether the pod is initialized. After that, the
// ordinary ones stay completed and the sidecars keep running (and restart
// when they exit) without holding anything up.
func (s *step) runInitContainers() bool {
	for i := range s.pod.Spec.InitContainers {
		spec := &s.pod.Spec.InitContainers[i]
		c := s.rt.container(spec, true)
		s.drive(c, spec)
		if s.rt.initialized {
			continue
		}
		switch {
		case c.kind == sidecar && c.started(s.now):
			continue
		case c.kind == initOnce && c.succeeded():
			continue
		case c.kind == initOnce && c.stage == stageExited:
			// It failed and restartPolicy Never allows no other try.
			s.finish(corev1.PodFailed)
		}
		return false
	}
	s.rt.initialized = true
	return true
}

// finishIfDone ends a pod whose restartPolicy is Never or OnFailure once
// every regular container has exited for good: its native sidecars are
// stopped and the pod is Succeeded when all regular containers exited 0.
func (s *step) finishIfDone() {
	if s.pod.Spec.RestartPolicy == corev1.RestartPolicyAlways || s.pod.Spec.RestartPolicy == "" {
		return
	}
	phase := corev1.PodSucceeded
	for i := range s.pod.Spec.Containers {
		c := s.rt.containers[s.pod.Spec.Containers[i].Name]
		if c.stage != stageExited {
			return
		}
		if c.cur == nil || c.cur.exitCode != 0 {
			phase = corev1.PodFailed
		}
	}
	s.finish(phase)
}

// finish stops the init containers, sidecars last started first, as the
// kubelet does when a pod terminates, and records the pod's final phase.
func (s *step) finish(phase corev1.PodPhase) {
	for i := len(s.pod.Spec.InitContainers) - 1; i >= 0; i-- {
		if c := s.rt.containers[s.pod.Spec.InitContainers[i].Name]; c != nil {
			s.stop(c)
		}
	}
	s.rt.phase = phase
}

// stopAll stops a pod being deleted: regular containers first, then the
// init containers in reverse order.
func (s *step) stopAll() {
	for i := range s.pod.Spec.Containers {
		if c := s.rt.containers[s.pod.Spec.Containers[i].Name]; c != nil {
			s.stop(c)
		}
	}
	if s.rt.phase != "" {
		return
	}
	phase := corev1.PodSucceeded
	for i := range s.pod.Spec.Containers {
		if c := s.rt.containers[s.pod.Spec.Containers[i].Name]; c == nil || c.cur == nil || c.cur.exitCode != 0 {
			phase = corev1.PodFailed
		}
	}
	s.finish(phase)
}

// stop kills c if it runs; whatever it was doing, it does nothing more.
func (s *step) stop(c *container) {
	if c.stage == stageRunning {
		s.kill(c, fmt.Sprintf("Stopping container %s", c.name))
	}
	c.stage = stageExited
	c.reason, c.message = "", ""
}

func (s *step) kill(c *container, message string) {
	s.record(c, false, "Killing", message)
	c.cur.finishedAt, c.cur.exitCode = s.now, killedExitCode
	c.lastExit = s.now
	c.stage = stageExited
}

// drive moves one container through as many stages as are due by now.
func (s *step) drive(c *container, spec *corev1.Container) {
	for {
		switch c.stage {
		case stageWaiting:
			s.beginPull(c, spec)
		case stagePulling:
			if s.now.Before(c.due) {
				return
			}
			s.finishPull(c)
		case stageCreating:
			if s.now.Before(c.due) {
				return
			}
			s.create(c, spec)
		case stageRunning:
			if c.cur.exitAt.IsZero() || s.now.Before(c.cur.exitAt) {
				return
			}
			s.exit(c)
		case stageErrImagePull:
			if s.now.Before(c.due) {
				return
			}
			c.stage, c.due = stageImagePullBackOff, c.pullFailedAt.Add(c.pullBackOff)
			c.reason = "ImagePullBackOff"
			c.message = fmt.Sprintf("Back-off pulling image %q: ErrImagePull: %s", c.image, c.pullErr)
			s.record(c, false, "BackOff", fmt.Sprintf("Back-off pulling image %q", c.image))
			s.record(c, true, "Failed", "Error: ImagePullBackOff")
		case stageImagePullBackOff, stageCrashLoopBackOff:
			if s.now.Before(c.due) {
				return
			}
			c.stage = stageWaiting
		default:
			return
		}
	}
}

// pullPolicy is the container's policy, or the apiserver's default for it.
func pullPolicy(spec *corev1.Container, ref imageRef) corev1.PullPolicy {
	switch {
	case spec.ImagePullPolicy != "":
		return spec.ImagePullPolicy
	case ref.digest == "" && ref.tag == "latest":
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// beginPull is the image manager's EnsureImageExists: use what the node has
// unless the policy says pull, and pull otherwise.
func (s *step) beginPull(c *container, spec *corev1.Container) {
	ref, err := parseImage(c.image)
	if err != nil {
		c.stage = stageInvalidImage
		c.reason, c.message = "InvalidImageName", fmt.Sprintf("Failed to apply default image tag %q: %v", c.image, err)
		s.record(c, true, "InspectFailed", c.message)
		return
	}
	c.ref = ref
	if policy := pullPolicy(spec, ref); policy != corev1.PullAlways {
		digest, ok := s.images.present(ref)
		if !ok && policy == corev1.PullNever {
			if behaviourOf(ref) == pullFails {
				c.stage = stageNeverPull
				c.reason, c.message = "ErrImageNeverPull", fmt.Sprintf("Container image %q is not present with pull policy of Never", c.image)
				s.record(c, true, "ErrImageNeverPull", c.message)
				return
			}
			// Any other image counts as imported on every simulated node,
			// the way the real node's local images are used with Never.
			digest, ok = s.reg.resolve(ref), true
			s.images.record(ref, digest)
		}
		if ok {
			c.digest = digest
			s.record(c, false, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.image))
			c.stage, c.due = stageCreating, s.now.Add(s.start)
			return
		}
	}
	s.record(c, false, "Pulling", fmt.Sprintf("Pulling image %q", c.image))
	c.stage, c.due, c.pullStart = stagePulling, s.now.Add(s.pull), s.now
}

func (s *step) finishPull(c *container) {
	took := s.now.Sub(c.pullStart).Truncate(time.Millisecond)
	if behaviourOf(c.ref) == pullFails {
		c.pullErr = fmt.Sprintf("failed to pull and unpack image %q: failed to resolve reference %q: %s: not found", c.ref, c.ref, c.ref)
		s.record(c, true, "Failed", fmt.Sprintf("Failed to pull image %q: %s", c.image, c.pullErr))
		s.record(c, true, "Failed", "Error: ErrImagePull")
		c.pullBackOff = nextBackOff(c.pullBackOff, s.backOff, s.maxBackOff)
		c.pullFailedAt = s.now
		c.stage, c.due = stageErrImagePull, s.now.Add(min(resync, c.pullBackOff))
		c.reason, c.message = "ErrImagePull", c.pullErr
		return
	}
	c.digest = s.reg.resolve(c.ref)
	s.images.record(c.ref, c.digest)
	s.record(c, false, "Pulled", fmt.Sprintf("Successfully pulled image %q in %v (%v including waiting). Image size: %d bytes.",
		c.image, took, took, imageSize(c.digest)))
	c.stage, c.due = stageCreating, s.now.Add(s.start)
}

// imageSize makes up a stable size for the Pulled event from the first hex
// digits of the digest (a digest has at least 32).
func imageSize(digest string) int64 {
	hex := digest[strings.IndexByte(digest, ':')+1:]
	n, _ := strconv.ParseInt(hex[:6], 16, 64)
	return 1<<20 + n
}

func nextBackOff(prev, base, maxBackOff time.Duration) time.Duration {
	if prev == 0 {
		return base
	}
	return min(2*prev, maxBackOff)
}

// probeDelay is when a probe first succeeds after the container started.
// A kubelet probes every periodSeconds and ignores the results of the
// initial delay, so the first success is at the first probe once the delay
// has passed: a delay of 1s with the default period of 10s makes a
// container ready after 10s.
func probeDelay(p *corev1.Probe) time.Duration {
	if p == nil {
		return 0
	}
	delay := time.Duration(p.InitialDelaySeconds) * time.Second
	if period := time.Duration(p.PeriodSeconds) * time.Second; period > 0 {
		delay = (delay + period - 1) / period * period
	}
	return delay
}

func (s *step) create(c *container, spec *corev1.Container) {
	inst := &instance{id: s.newID(), startedAt: s.now, resources: cpuMemory(spec.Resources)}
	inst.image, inst.imageID = s.images.describe(c.ref, c.digest)
	plan(inst, c.kind, behaviourOf(c.ref), spec, s.timing)
	if c.cur != nil {
		c.last = c.cur
	}
	c.cur = inst
	c.created++
	c.reason, c.message = "", ""
	c.stage = stageRunning
	s.record(c, false, "Created", "Container created")
	s.record(c, false, "Started", "Container started")
}

// plan sets when an instance started at inst.startedAt passes its probes
// and when it exits by itself.
func plan(inst *instance, kind containerKind, b behaviour, spec *corev1.Container, t timing) {
	startup := probeDelay(spec.StartupProbe)
	inst.startupAt = inst.startedAt.Add(startup)
	if kind != initOnce && b != neverReady {
		// Readiness is probed only once the container has started.
		inst.readyAt = inst.startedAt.Add(max(startup, probeDelay(spec.ReadinessProbe)))
	}
	switch {
	case b == crashes:
		inst.exitAt, inst.exitWith = inst.startedAt.Add(t.crashes), 1
	case b == turnsUnready && !inst.readyAt.IsZero():
		inst.unreadyAt = inst.readyAt.Add(t.crashes)
	case b == completes:
		inst.exitAt = inst.startedAt.Add(t.completes)
	case kind == initOnce:
		// An ordinary init container does its work and exits 0 at once.
		inst.exitAt = inst.startedAt
	}
}

func (s *step) exit(c *container) {
	inst := c.cur
	inst.finishedAt, inst.exitCode = inst.exitAt, inst.exitWith
	prevExit := c.lastExit
	c.lastExit = inst.finishedAt
	if !restarts(s.pod, c, inst.exitCode) {
		c.stage = stageExited
		return
	}
	// The kubelet's crash-loop back-off: the first restart is immediate,
	// the next ones wait 10s, 20s, ... up to 5m; a container that stayed up
	// for twice the cap starts over without one.
	if !prevExit.IsZero() && inst.finishedAt.Sub(prevExit) > 2*s.maxBackOff {
		c.crashBackOff = 0
	}
	if c.crashBackOff == 0 {
		c.crashBackOff = s.backOff
		c.stage = stageWaiting
		return
	}
	pod := fmt.Sprintf("%s_%s(%s)", s.pod.Name, s.pod.Namespace, s.pod.UID)
	c.stage, c.due = stageCrashLoopBackOff, inst.finishedAt.Add(c.crashBackOff)
	c.reason = "CrashLoopBackOff"
	c.message = fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", c.crashBackOff, c.name, pod)
	s.record(c, true, "BackOff", fmt.Sprintf("Back-off restarting failed container %s in pod %s", c.name, pod))
	c.crashBackOff = min(2*c.crashBackOff, s.maxBackOff)
}

// restarts says whether a container of pod that exited with exitCode starts
// again.
func restarts(pod *corev1.Pod, c *container, exitCode int32) bool {
	switch {
	case c.kind == sidecar:
		return true
	case c.kind == initOnce && exitCode == 0:
		return false
	}
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return true
}
