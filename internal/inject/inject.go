// Package inject decides what SidecarSet injection does to a new pod: which
// SidecarSets match, where their containers go, how volumes and
// imagePullSecrets merge, the records written on the pod, and the admission
// warnings. It is pure (no client, no I/O); the mutating webhook and
// `kubectl sidecarset inject` both call it.
//
// Inject never fails a pod. A problem with one SidecarSet (an invalid or
// empty selector, a container name the pod already uses, no name) skips
// that set with a warning: one bad SidecarSet must not block pod creation in
// the namespaces it matches, and the apiserver's own validation still
// refuses a pod that is invalid for other reasons. Which sets match is
// Matches's business; a pod annotated sidecarset.dev/inject: "false" and a
// set with injectionStrategy.paused get nothing.
//
// # Per-pod checks
//
// A set that matches is also left out of a pod, whole, when injecting it
// would make this pod's creation fail (or a container of it fail to start)
// where the pod would succeed without it:
//
//   - a sidecar mounts a volume (volumeMounts or volumeDevices) that neither
//     the pod nor the set declares;
//   - a sidecar port clashes with one of a container running beside it (see
//     portClash): the same containerPort, the same hostPort, or a hostPort
//     other than the containerPort in a hostNetwork pod;
//   - the namespace enforces a Pod Security level (its label
//     pod-security.kubernetes.io/enforce and -version) that the pod meets
//     without the set and violates with it, judged by the apiserver's own
//     checks from k8s.io/pod-security-admission.
//
// Such a set is listed in Result.Skipped with the reason, in the pod's
// sidecarset.dev/skipped annotation, and with the reason in its
// sidecarset.dev/skipped-reasons annotation (SkipReason reads it), and the
// pod is created without it. The
// checks see the pod with the sets taken before, so of two sets that clash
// with each other the later by name is left out. What is wrong with a set
// whatever the pod (a field the apiserver's pod validation refuses) is for
// validation to refuse; a ResourceQuota that demands limits is not checked
// here: whether it applies depends on its scopes and on the namespace's
// LimitRanges, which only the apiserver sees whole.
//
// # Placement
//
// SidecarSets are taken in name order, and each set's containers in declared
// order. A container with podInjectPolicy AfterAppContainer goes after the
// pod's own containers; any other (BeforeAppContainer, or empty, the
// default) goes before them. Init containers follow the same rule against
// the pod's own init containers, so by default they run first, which is what
// a native sidecar (restartPolicy: Always) wants: it is up before any other
// container starts. Worked case: the pod has containers [app] and init
// containers [setup]; SidecarSet "a" declares containers proxy (default) and
// log (AfterAppContainer) and init container mesh-init (native); SidecarSet
// "b" declares container exporter (BeforeAppContainer) and init container
// wait (AfterAppContainer). The pod gets containers
// [proxy exporter app log] and init containers [mesh-init setup wait].
//
// A pod with restartPolicy Never or OnFailure (a Job's) would never complete
// beside a regular sidecar, so there a set with jobPods NativeSidecar (the
// default) injects its regular containers as native sidecars (NativeInPod):
// init containers with restartPolicy Always, after the set's own
// BeforeAppContainer init containers, before the pod's own init containers,
// whatever their podInjectPolicy. The same pod with restartPolicy Never gets
// containers [app] and init containers [mesh-init proxy log exporter setup
// wait]; with a set of jobPods Keep, its containers stay where they were,
// with a warning.
//
// # Canaries
//
// A SidecarSet annotated sidecarset.dev/canary: "true" and
// sidecarset.dev/canary-of: BASE (CanaryOf) replaces BASE in the pods it
// matches: when a canary whose injection is not paused selects the pod,
// BASE is not injected into it, whether or not the canary itself then fits
// the pod. A paused canary hands its pods back to the base. A canary whose
// base does not exist is an ordinary set. Worked case: base "proxy"
// selects app=web, its canary "proxy-v2" selects app=web,track=canary; a
// pod labelled app=web gets proxy, one labelled app=web,track=canary gets
// proxy-v2 and not proxy, and with proxy-v2 paused it gets proxy again.
//
// # Merging
//
// A SidecarSet is injected whole or not at all: its record claims the
// revision's Hash, which covers all its containers, volumes and
// imagePullSecrets. A set that declares a container whose name the pod
// already uses (or an earlier set in the same call, or the set itself twice)
// is skipped with a warning and the pod keeps its own container; such a pod
// then counts as unmanaged, and adoptionPolicy SameName may take it over.
//
// Volumes merge by name: a pod's own volume always wins, silently (the
// contract lets a pod override a SidecarSet's volume). Identical volumes from
// several sets collapse into one; if two sets define the same name
// differently, the first by set name wins and a warning names both.
// imagePullSecrets merge by name.
//
// A sidecar with shareVolumePolicy or shareVolumeDevicePolicy enabled also
// gets the app containers' volume mounts or devices, and one with
// transferEnv their environment variables, as share.go describes; what it
// asks for and cannot get is a warning, never a reason to skip the set. One
// with a resourcesPolicy gets the resources it computes from the pod's own
// containers, as resources.go describes; a policy that cannot give it
// resources the apiserver takes is a per-pod reason to skip the set.
//
// A set's patchPodMetadata annotations are written as PatchAnnotations
// says, after those of the sets before it by name, when the set is
// injected; a set left out of the pod writes none.
//
// # Records
//
// Each injected set gets an entry in the pod's sidecarset.dev/state
// annotation (see revision.State): its revision name, both hashes, and each
// injected container's name, init flag (the list it went into) and image,
// containers before init containers, each in declared order. sidecarset.dev/injected lists the sets
// in the state, and the label sidecarset.dev/managed is "true". Entries of
// sets injected earlier are kept.
//
// A set already in the pod's state is never injected again, whatever its
// revision: the webhook is reinvoked (reinvocationPolicy IfNeeded) on pods
// it has already injected, and moving a running pod to a newer revision is
// the controller's job. An entry whose containers are not all in the pod
// spec (as recorded, init or not) is stale: a template copied from a running
// pod carries the annotation without the sidecars. It is dropped, with a
// warning, and the set is injected afresh; a reinvoked pod holds the
// containers its entries name, so they stay. A pod left with no entry loses
// the records and the managed label. A state annotation that cannot be read
// is treated as empty, with a warning; if a set is then injected, the new
// state replaces it, and if not, the pod keeps it untouched. Containers
// injected before the record was lost are still in the pod, so the name rule
// above keeps them from being injected twice.
//
// # Warnings
//
// Inject warns about what depends on the pod: besides skipped sets and
// stale or unreadable records, when a regular container goes into a pod
// with restartPolicy Never or OnFailure (jobPods Keep), which then never
// completes, naming the set and the container. A last warning names the containers that
// change the pod's QoS class, computed as the kubelet does before and after
// injection; Guaranteed to Burstable matters most, as it moves the pod ahead
// in OOM-kill and eviction order. What holds whatever the pod (a container
// without resources, an image by tag) is SetWarnings's, given when the set
// is applied, not on every pod.
//
// Every warning about a SidecarSet is also in Result.Events, with a reason,
// for the webhook to tell the set: a warning reaches only whoever created
// the pod, often a controller that drops it.
package inject

import (
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	psapi "k8s.io/pod-security-admission/api"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// Options carries what injection needs beyond the pod and the sets.
type Options struct {
	// ManagerNamespace is the manager's own namespace. Like kube-system,
	// kube-public and kube-node-lease, it is never injected unless the
	// SidecarSet carries sidecarset.dev/allow-system-namespaces: "true": a
	// sidecar that breaks the manager's pods would stop the webhook that
	// could fix them. Empty means no namespace beyond the system ones.
	ManagerNamespace string
	// Cache, when set, keeps parsed selectors and revision hashes across
	// calls. The webhook should hold one for its lifetime: without it each
	// injection hashes every matching SidecarSet again.
	Cache *Cache
}

// Event reasons: what a Result's Events say about a SidecarSet.
const (
	// ReasonInjectionSkipped: a per-pod check left the set out of a pod,
	// which counts in the set's skippedPods.
	ReasonInjectionSkipped = "InjectionSkipped"
	// ReasonNotInjected: the set matched but was not injected for a reason
	// of its own (a container name the pod already uses, an invalid
	// selector); the pod counts as unmanaged.
	ReasonNotInjected = "NotInjected"
	// ReasonInjectionWarning: the set was injected, with a caveat about
	// this pod (a pod that never completes, a QoS class change, a volume
	// another set declares differently, a stale record dropped).
	ReasonInjectionWarning = "InjectionWarning"
)

// Result is the outcome of injecting one pod.
type Result struct {
	// Pod is a copy of the input pod with the sidecars and records added.
	// It equals the input unless Changed. Its annotations, labels and lists
	// of containers, init containers, volumes and image pull secrets are
	// its own; what it takes unchanged, from the input (a container's
	// fields, the status) or from the sets (a sidecar's fields, a volume's
	// source), it shares rather than copies, as the webhook only encodes
	// it: change anything else of Pod only in a DeepCopy of it.
	Pod *corev1.Pod
	// Changed reports whether Pod differs from the input: sets injected, a
	// stale record dropped, or the skipped annotations written or removed.
	Changed bool
	// Injected names the SidecarSets injected by this call, sorted.
	Injected []string
	// Skipped are the matching SidecarSets that the per-pod checks left
	// out, in the order they were taken, each with why.
	Skipped []Skip
	// Warnings are admission warnings for the client (kubectl prints them),
	// in the order the sets were taken. Each names the SidecarSets and
	// containers it is about.
	Warnings []string
	// Events are the warnings about one SidecarSet each (a warning about
	// several is there once per set), with their reason, in the same order.
	Events []Event
}

// Skip is a SidecarSet that matched a pod but was left out of it.
type Skip struct {
	Set    string
	Reason string
}

// Event is a warning about one SidecarSet.
type Event struct {
	Set     string
	Reason  string
	Message string
}

// Inject returns pod with every matching SidecarSet injected, by the rules
// of the package documentation. ns is the pod's namespace: its name and
// labels are matched as Matches describes; nil means the labels are unknown,
// so only sets without a namespaceSelector can match. The inputs are never
// modified.
func Inject(pod *corev1.Pod, ns *corev1.Namespace, sets []*v1alpha1.SidecarSet, opts Options) Result {
	res := Result{Pod: ownCopy(pod)}
	if pod.Annotations[v1alpha1.AnnotationInject] == "false" {
		return res
	}
	b := newBuilder(res.Pod)
	b.security = podSecurityLevel(ns)
	b.original = pod
	state, err := revision.Decode(pod.Annotations)
	if err != nil {
		b.warn("", "", "ignoring the pod's annotation %s, which cannot be read (%v); the record of a SidecarSet injected now replaces it", v1alpha1.AnnotationState, err)
		state = revision.State{}
	}
	stale := dropStale(state, pod)
	for _, name := range stale {
		b.warn(name, ReasonInjectionWarning, "ignoring SidecarSet %q's record in the pod's annotation %s: a container it names is not in the pod (was the pod copied from a running one?); the set is injected afresh if it matches", name, v1alpha1.AnnotationState)
	}
	nsName := namespaceName(pod, ns)
	b.apps = appContainers(pod, state)
	b.own = ownContainers(pod, state)
	b.guaranteed = guaranteed(pod)
	b.fields = podFields{pod: pod, namespace: nsName}

	ordered := slices.Clone(sets)
	slices.SortStableFunc(ordered, func(a, b *v1alpha1.SidecarSet) int { return strings.Compare(a.Name, b.Name) })
	replaced := replacedBases(ordered, pod, ns, opts)
	for _, set := range ordered {
		if set.Name == "" {
			// Only a file can hold one; its record would have no key.
			b.warn("", "", "a SidecarSet without a name is not injected")
			continue
		}
		if _, ok := state[set.Name]; ok {
			continue // injected before: reinvocation must not inject twice
		}
		if set.Spec.InjectionStrategy.Paused || !namespaceAllowed(set, nsName, opts) || replaced[set.Name] {
			continue
		}
		c := opts.Cache.compiled(set)
		ok, err := selected(c, pod.Labels, ns)
		if err != nil {
			b.warn(set.Name, ReasonNotInjected, "SidecarSet %q not injected: %v", set.Name, err)
			continue
		}
		if !ok || !b.claim(set) {
			continue
		}
		computed, why := computeResources(set, b.own, b.guaranteed)
		if why == "" {
			why = b.fits(set)
		}
		if why != "" {
			b.release(set)
			res.Skipped = append(res.Skipped, Skip{Set: set.Name, Reason: why})
			b.warn(set.Name, ReasonInjectionSkipped, "SidecarSet %q not injected into this pod: %s", set.Name, why)
			continue
		}
		state[set.Name] = b.add(set, c.head(), computed)
		b.patchMetadata(set)
		res.Injected = append(res.Injected, set.Name)
	}

	if len(res.Injected) > 0 {
		b.finish()
		if msg, culprits := qosWarning(pod, res.Pod, b.injected); msg != "" {
			b.warn("", "", "%s", msg)
			for _, set := range culprits {
				b.events = append(b.events, Event{Set: set, Reason: ReasonInjectionWarning, Message: msg})
			}
		}
	}
	if len(res.Injected) > 0 || len(stale) > 0 {
		writeRecords(res.Pod, state)
	}
	writeSkipped(res.Pod, res.Skipped)
	res.Changed = len(res.Injected) > 0 || len(stale) > 0 ||
		res.Pod.Annotations[v1alpha1.AnnotationSkipped] != pod.Annotations[v1alpha1.AnnotationSkipped] ||
		res.Pod.Annotations[v1alpha1.AnnotationSkippedReasons] != pod.Annotations[v1alpha1.AnnotationSkippedReasons]
	res.Warnings = b.warnings
	res.Events = b.events
	return res
}

// ownCopy returns a copy of pod that injection may write (Result.Pod):
// the maps it writes are copied, and the lists it appends to have no room
// beyond their length, so an append makes a list of its own. A deep copy
// of every container and of the status cost a fifth of an injection.
func ownCopy(pod *corev1.Pod) *corev1.Pod {
	out := *pod
	out.Annotations = maps.Clone(pod.Annotations)
	out.Labels = maps.Clone(pod.Labels)
	out.Spec.Containers = slices.Clip(pod.Spec.Containers)
	out.Spec.InitContainers = slices.Clip(pod.Spec.InitContainers)
	out.Spec.Volumes = slices.Clip(pod.Spec.Volumes)
	out.Spec.ImagePullSecrets = slices.Clip(pod.Spec.ImagePullSecrets)
	return &out
}

// dropStale deletes from state, and returns sorted, the sets whose entry
// names a container that pod does not hold where the entry says.
func dropStale(state revision.State, pod *corev1.Pod) []string {
	has := func(cs []corev1.Container, name string) bool {
		return slices.ContainsFunc(cs, func(c corev1.Container) bool { return c.Name == name })
	}
	var stale []string
	for name, entry := range state {
		for _, c := range entry.Containers {
			where := pod.Spec.Containers
			if c.Init {
				where = pod.Spec.InitContainers
			}
			if !has(where, c.Name) {
				stale = append(stale, name)
				break
			}
		}
	}
	slices.Sort(stale)
	for _, name := range stale {
		delete(state, name)
	}
	return stale
}

// writeRecords writes state, the list of injected sets and the managed label
// into pod, or removes all three when state is empty.
func writeRecords(pod *corev1.Pod, state revision.State) {
	// The state was decoded from both forms of the records; it is written
	// back in the one annotation.
	revision.DropPerSet(pod.Annotations)
	if len(state) == 0 {
		delete(pod.Annotations, v1alpha1.AnnotationState)
		delete(pod.Annotations, v1alpha1.AnnotationInjected)
		delete(pod.Labels, v1alpha1.LabelManaged)
		return
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[v1alpha1.AnnotationState] = revision.Encode(state)
	pod.Annotations[v1alpha1.AnnotationInjected] = revision.InjectedNames(state)
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[v1alpha1.LabelManaged] = "true"
}

// writeSkipped writes the sidecarset.dev/skipped and
// sidecarset.dev/skipped-reasons annotations for skipped, or removes them
// when there are none: what a template copied from another pod carries
// says nothing about this one.
func writeSkipped(pod *corev1.Pod, skipped []Skip) {
	if len(skipped) == 0 {
		delete(pod.Annotations, v1alpha1.AnnotationSkipped)
		delete(pod.Annotations, v1alpha1.AnnotationSkippedReasons)
		return
	}
	names := make([]string, len(skipped))
	reasons := make(map[string]string, len(skipped))
	for i, s := range skipped {
		names[i] = s.Set
		reasons[s.Set] = s.Reason
	}
	slices.Sort(names)
	// Map keys come out sorted: the same skips give the same value.
	b, err := json.Marshal(reasons)
	if err != nil {
		// Strings always marshal.
		panic(fmt.Sprintf("marshal skip reasons: %v", err))
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[v1alpha1.AnnotationSkipped] = strings.Join(names, ",")
	pod.Annotations[v1alpha1.AnnotationSkippedReasons] = string(b)
}

// SkipReason returns why set was left out of a pod at its creation, as the
// pod's annotations record it in sidecarset.dev/skipped-reasons; false when
// its sidecarset.dev/skipped does not name set, or no reason is recorded (a
// pod admitted by a release that did not record reasons, or annotations
// edited by hand).
func SkipReason(annotations map[string]string, set string) (string, bool) {
	if !slices.Contains(strings.Split(annotations[v1alpha1.AnnotationSkipped], ","), set) {
		return "", false
	}
	var reasons map[string]string
	if json.Unmarshal([]byte(annotations[v1alpha1.AnnotationSkippedReasons]), &reasons) != nil {
		return "", false
	}
	reason, ok := reasons[set]
	return reason, ok && reason != ""
}

// builder collects what the sets add to pod, which it owns, and puts the
// containers in place once all sets are known.
type builder struct {
	pod *corev1.Pod
	// owner maps each container name in use to "" for the pod's own
	// containers or to the SidecarSet that injected it in this call.
	owner map[string]string
	// volumeOwner maps the names of volumes added in this call to the set
	// that added them.
	volumeOwner map[string]string

	// injected are the sidecars in the order they were taken in.
	injected []sidecar

	// original is the pod as its creator sent it, and security the Pod
	// Security level its namespace enforces, for the per-pod checks.
	original *corev1.Pod
	security psapi.LevelVersion

	// apps are the pod's app containers and fields what a transferEnv
	// fieldRef reads, for the sidecars that take from them (share.go).
	apps   []*corev1.Container
	fields podFields
	// own are the pod's containers a resourcesPolicy may take from, and
	// guaranteed whether the pod was Guaranteed before injection
	// (resources.go).
	own        []*corev1.Container
	guaranteed bool

	// warnings are in the order the sets were taken; events are those about
	// one set.
	warnings []string
	events   []Event
}

// warn adds a warning, and an event with reason on the set named setName
// unless it is "".
func (b *builder) warn(setName, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b.warnings = append(b.warnings, msg)
	if setName != "" {
		b.events = append(b.events, Event{Set: setName, Reason: reason, Message: msg})
	}
}

// sidecar is one container a set injects.
type sidecar struct {
	set  string
	c    *v1alpha1.SidecarContainer
	init bool
	// native: c is one of the set's regular containers, going into the
	// init containers as a native sidecar (jobPods NativeSidecar); init
	// holds too.
	native bool
	// built, when set, is the container with what it takes from the app
	// containers, the resources its resourcesPolicy computed, and
	// restartPolicy Always when native, which goes into the pod instead of
	// c's.
	built *corev1.Container
	// slot is 1 or 2 for the containers of a HotUpgrade sidecar (hot.go),
	// 0 otherwise.
	slot int
}

// container returns what goes into the pod.
func (s sidecar) container() *corev1.Container {
	if s.built != nil {
		return s.built
	}
	return &s.c.Container
}

// after reports whether s goes after the pod's own containers of its list.
// A native one goes before them whatever its podInjectPolicy: as a regular
// container, it started only once every init container had run; before the
// pod's own init containers it is up for them too, like a native sidecar the
// set declares.
func (s sidecar) after() bool {
	return !s.native && s.c.PodInjectPolicy == v1alpha1.AfterAppContainer
}

func newBuilder(pod *corev1.Pod) *builder {
	spec := &pod.Spec
	// Room for a few sidecars too, so the map rarely grows.
	b := &builder{pod: pod, owner: make(map[string]string, len(spec.InitContainers)+len(spec.Containers)+8)}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			b.owner[cs[i].Name] = ""
		}
	}
	// Ephemeral containers share the pod's container names.
	for i := range spec.EphemeralContainers {
		b.owner[spec.EphemeralContainers[i].Name] = ""
	}
	return b
}

// sidecarsOf yields set's containers, then its init containers, each with
// whether it is an init container.
func sidecarsOf(set *v1alpha1.SidecarSet) iter.Seq2[*v1alpha1.SidecarContainer, bool] {
	return func(yield func(*v1alpha1.SidecarContainer, bool) bool) {
		for i := range set.Spec.Containers {
			if !yield(&set.Spec.Containers[i], false) {
				return
			}
		}
		for i := range set.Spec.InitContainers {
			if !yield(&set.Spec.InitContainers[i], true) {
				return
			}
		}
	}
}

// NativeInPod reports whether set's regular containers go into pod as native
// sidecars: a pod with restartPolicy Never or OnFailure (a Job's) completes
// only once its regular containers have all exited, which a sidecar that
// serves until stopped never does; the kubelet stops native sidecars once
// the regular containers have exited. jobPods Keep leaves them regular.
func NativeInPod(set *v1alpha1.SidecarSet, pod *corev1.Pod) bool {
	return set.Spec.JobPods != v1alpha1.JobPodsKeep && finishes(pod)
}

// finishes reports whether pod is meant to finish: its restartPolicy is
// Never or OnFailure.
func finishes(pod *corev1.Pod) bool {
	p := pod.Spec.RestartPolicy
	return p == corev1.RestartPolicyNever || p == corev1.RestartPolicyOnFailure
}

// sidecars returns set's sidecars in the order they go into the pod:
// regular containers, then init containers, then, when native, the regular
// containers moved into the init containers, after the set's own so that
// those still run first, as they did before the regular containers started.
func sidecars(set *v1alpha1.SidecarSet, native bool) []sidecar {
	out := make([]sidecar, 0, len(set.Spec.Containers)+len(set.Spec.InitContainers))
	for sc, init := range sidecarsOf(set) {
		if !native || init {
			out = appendSlots(out, sidecar{set: set.Name, c: sc, init: init})
		}
	}
	if !native {
		return out
	}
	for i := range set.Spec.Containers {
		sc := &set.Spec.Containers[i]
		out = appendSlots(out, sidecar{set: set.Name, c: sc, init: true, native: true, built: nativeContainer(&sc.Container)})
	}
	return out
}

// nativeContainer returns a copy of c that runs as a native sidecar; only
// its restartPolicy is its own (Result.Pod).
func nativeContainer(c *corev1.Container) *corev1.Container {
	out := *c
	out.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
	return &out
}

// claim takes the names of set's containers and reports whether it could:
// when one is already in use, it gives back those it took and warns.
func (b *builder) claim(set *v1alpha1.SidecarSet) bool {
	for sc := range sidecarsOf(set) {
		for _, name := range sc.PodNames() {
			owner, taken := b.owner[name]
			if !taken {
				b.owner[name] = set.Name
				continue
			}
			b.release(set)
			switch owner {
			case "":
				b.warn(set.Name, ReasonNotInjected, "SidecarSet %q not injected: the pod already has a container named %q, which it keeps", set.Name, name)
			case set.Name:
				b.warn(set.Name, ReasonNotInjected, "SidecarSet %q not injected: it declares container %q twice", set.Name, name)
			default:
				b.warn(set.Name, ReasonNotInjected, "SidecarSet %q not injected: container %q is already injected by SidecarSet %q", set.Name, name, owner)
			}
			return false
		}
	}
	return true
}

// release gives back the container names set claimed.
func (b *builder) release(set *v1alpha1.SidecarSet) {
	for sc := range sidecarsOf(set) {
		for _, name := range sc.PodNames() {
			if b.owner[name] == set.Name {
				delete(b.owner, name)
			}
		}
	}
}

// fits runs the per-pod checks for set against the pod built so far and
// returns why set cannot go in, "" when it can.
func (b *builder) fits(set *v1alpha1.SidecarSet) string {
	if why := missingVolume(&b.pod.Spec, set); why != "" {
		return why
	}
	if why := portClash(&b.pod.Spec, b.injected, set); why != "" {
		return why
	}
	if b.security.Level == psapi.LevelPrivileged {
		return ""
	}
	return podSecurityViolation(b.security, &b.original.ObjectMeta, &b.original.Spec, b.trial(set))
}

// trial returns the spec the pod would have with set taken too, sharing
// what it does not change with the pod built so far.
func (b *builder) trial(set *v1alpha1.SidecarSet) *corev1.PodSpec {
	spec := b.pod.Spec
	with := append(slices.Clip(b.injected), sidecars(set, NativeInPod(set, b.pod))...)
	spec.Containers = around(with, false, spec.Containers)
	spec.InitContainers = around(with, true, spec.InitContainers)
	spec.Volumes = slices.Clip(spec.Volumes)
	for _, v := range set.Spec.Volumes {
		if !slices.ContainsFunc(spec.Volumes, func(pv corev1.Volume) bool { return pv.Name == v.Name }) {
			spec.Volumes = append(spec.Volumes, v)
		}
	}
	return &spec
}

// add takes in set's containers, volumes and imagePullSecrets and returns
// the set's record: rec, the revision and hashes, with the containers.
// computed are the resources of the sidecars with a resourcesPolicy, by
// name.
func (b *builder) add(set *v1alpha1.SidecarSet, rec revision.SetState, computed map[string]corev1.ResourceRequirements) revision.SetState {
	n := len(set.Spec.Containers) + len(set.Spec.InitContainers)
	rec.Containers = make([]revision.ContainerState, 0, n)
	b.injected = slices.Grow(b.injected, n)
	native := NativeInPod(set, b.pod)
	for _, s := range sidecars(set, native) {
		if takesFromApps(s.c) {
			built, warnings := withApps(s.c, b.apps, b.fields)
			if s.native {
				built.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
			}
			if s.slot > 0 {
				built = *slotContainer(&built, s.c, s.slot)
			}
			s.built = &built
			for _, w := range warnings {
				b.warn(set.Name, ReasonInjectionWarning, "SidecarSet %q %s", set.Name, w)
			}
		}
		if r, ok := computed[s.c.Name]; ok {
			if s.built == nil {
				// Resources is replaced whole; the rest is shared.
				c := s.c.Container
				s.built = &c
			}
			s.built.Resources = r
		}
		b.injected = append(b.injected, s)
		if !s.init && s.slot < 2 && finishes(b.pod) {
			b.warn(set.Name, ReasonInjectionWarning, "SidecarSet %q container %q is a regular container in a pod with restartPolicy %s, which never completes while it runs: set the SidecarSet's jobPods to NativeSidecar, or declare the container under initContainers with restartPolicy: Always", set.Name, s.c.Name, b.pod.Spec.RestartPolicy)
		}
	}
	// The record lists the containers as the set declares them, each with
	// the list it went into.
	for sc, init := range sidecarsOf(set) {
		if sc.Hot() {
			rec.Containers = append(rec.Containers, hotRecords(sc, init || native)...)
			b.hotAnnotations(sc)
			continue
		}
		rec.Containers = append(rec.Containers, revision.ContainerState{Name: sc.Name, Init: init || native, Image: sc.Image})
	}
	for i := range set.Spec.Volumes {
		b.addVolume(set.Name, &set.Spec.Volumes[i])
	}
	for _, s := range set.Spec.ImagePullSecrets {
		if !slices.Contains(b.pod.Spec.ImagePullSecrets, s) {
			b.pod.Spec.ImagePullSecrets = append(b.pod.Spec.ImagePullSecrets, s)
		}
	}
	return rec
}

// patchMetadata writes set's patchPodMetadata into the pod built so far.
func (b *builder) patchMetadata(set *v1alpha1.SidecarSet) {
	if len(set.Spec.PatchPodMetadata) == 0 {
		return
	}
	var warnings []string
	b.pod.Annotations, warnings = PatchAnnotations(b.pod.Annotations, set.Spec.PatchPodMetadata)
	for _, w := range warnings {
		b.warn(set.Name, ReasonInjectionWarning, "SidecarSet %q %s", set.Name, w)
	}
}

func (b *builder) addVolume(setName string, v *corev1.Volume) {
	i := slices.IndexFunc(b.pod.Spec.Volumes, func(pv corev1.Volume) bool { return pv.Name == v.Name })
	if i < 0 {
		if b.volumeOwner == nil {
			b.volumeOwner = map[string]string{}
		}
		b.volumeOwner[v.Name] = setName
		// Shared with the set (Result.Pod).
		b.pod.Spec.Volumes = append(b.pod.Spec.Volumes, *v)
		return
	}
	owner, fromSet := b.volumeOwner[v.Name]
	if fromSet && !equality.Semantic.DeepEqual(&b.pod.Spec.Volumes[i], v) {
		b.warn(setName, ReasonInjectionWarning, "SidecarSet %q volume %q differs from the one SidecarSet %q declares; the pod gets SidecarSet %q's", setName, v.Name, owner, owner)
	}
}

// finish puts the sidecars around the pod's own containers.
func (b *builder) finish() {
	spec := &b.pod.Spec
	spec.Containers = around(b.injected, false, spec.Containers)
	spec.InitContainers = around(b.injected, true, spec.InitContainers)
}

// around returns own with the sidecars that are init containers or not, as
// init says, before and after it. The sidecars are copied by value: their
// slices, maps and pointers stay shared with the sets (Result.Pod), which
// saves about half an injection's allocations.
func around(injected []sidecar, init bool, own []corev1.Container) []corev1.Container {
	var before, after int
	for _, s := range injected {
		switch {
		case s.init != init:
		case s.after():
			after++
		default:
			before++
		}
	}
	if before+after == 0 {
		return own
	}
	out := make([]corev1.Container, before, before+len(own)+after)
	i := 0
	for _, s := range injected {
		if s.init == init && !s.after() {
			out[i] = *s.container()
			i++
		}
	}
	out = append(out, own...)
	for _, s := range injected {
		if s.init == init && s.after() {
			out = append(out, *s.container())
		}
	}
	return out
}

// qosWarning returns a warning when injection changed the pod's QoS class
// from before to after, naming the injected containers that did it, and the
// sets of those containers.
func qosWarning(before, after *corev1.Pod, injected []sidecar) (string, []string) {
	if podLevelResourcesSet(before) {
		return "", nil // the pod-level resources alone decide the class
	}
	was, is := containersQOS(before), containersQOS(after)
	if was == is {
		return "", nil
	}
	var culprits, sets []string
	for _, s := range injected {
		if containerQOS(&s.container().Resources) != was {
			culprits = append(culprits, fmt.Sprintf("SidecarSet %q container %q", s.set, s.container().Name))
			if !slices.Contains(sets, s.set) {
				sets = append(sets, s.set)
			}
		}
	}
	msg := fmt.Sprintf("injection changes the pod's QoS class from %s to %s (%s)", was, is, strings.Join(culprits, ", "))
	if was == corev1.PodQOSGuaranteed {
		// The kubelet's OOM score and eviction order both favour Guaranteed
		// pods; the class also gates exclusive CPUs under the static CPU
		// manager policy.
		msg += ": under node pressure the pod is now OOM-killed and evicted before Guaranteed pods; give the sidecar limits equal to its requests to keep it Guaranteed"
	}
	return msg, sets
}
