// Package webhook serves the admission webhooks: the pod mutator that injects
// sidecars, and the SidecarSet defaulter and validator. Each reads from the
// manager's informer cache and leaves every decision to the pure packages
// internal/inject and internal/validation. They call the apiserver only
// where the cache cannot answer: the pod mutator for a namespace the cache
// has not seen yet, the validator for a server-side dry run of a pod
// carrying a new SidecarSet's containers.
package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/metrics"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/rollout"
)

// PodMutatorPath is where the pod mutator is served.
const PodMutatorPath = "/mutate-v1-pod"

// MaxPodContainers bounds the containers and init containers of a pod the
// mutator looks at. A larger pod passes through untouched with a warning:
// injecting would make it larger still, and no real workload comes close.
const MaxPodContainers = 1000

// namespaceReadTimeout bounds the live read of a namespace the cache has not
// seen yet; the apiserver gives the whole webhook call 5 seconds.
const namespaceReadTimeout = 2 * time.Second

// PodMutator injects the matching SidecarSets into pods being created.
type PodMutator struct {
	// Reader must be the informer cache: admission answers without calling
	// the apiserver, so a slow apiserver never slows pod creation further.
	Reader client.Reader
	// APIReader, when set, reads a namespace the cache has not seen yet
	// (created just before the pod), so that its labels are not taken for
	// empty.
	APIReader client.Reader
	// Recorder, when set, tells each SidecarSet what injection warned about
	// it for a pod, at most once per set and reason per EventInterval, with
	// the number of pods the event stands for: a warning reaches only
	// whoever created the pod, often a controller that drops it. No event is
	// sent for a dry run.
	Recorder events.EventRecorder
	// Clock, when set, is the time the event limiter goes by; nil is the
	// real one.
	Clock   clock.PassiveClock
	Options inject.Options

	limiter eventLimiter
}

var _ admission.Handler = &PodMutator{}

// Handle answers one AdmissionReview for a pod, and counts and times it
// (internal/metrics).
func (m *PodMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	// Only CREATE is registered; anything else passes through untouched,
	// uncounted.
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	began := time.Now()
	resp, res := m.handle(ctx, req)
	metrics.Admission(time.Since(began), res, !resp.Allowed, req.DryRun != nil && *req.DryRun)
	return resp
}

// handle answers a pod's creation, with the injection's result when it got
// that far.
func (m *PodMutator) handle(ctx context.Context, req admission.Request) (admission.Response, *inject.Result) {
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode pod: %w", err)), nil
	}
	if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers); n > MaxPodContainers {
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"sidecarset: pod has %d containers, more than %d; no sidecar injected", n, MaxPodContainers)), nil
	}
	// A pod created through a controller may not carry its namespace yet;
	// the request's namespace is authoritative.
	namespace := req.Namespace
	if namespace == "" {
		namespace = pod.Namespace
	}

	// The cache's own objects, not copies: nothing here changes a set
	// (withFallbacks declares an older revision in a copy), and copying
	// every set on every pod creation cost more than the injection.
	var sets v1alpha1.SidecarSetList
	if err := m.Reader.List(ctx, &sets, client.UnsafeDisableDeepCopy); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("list SidecarSets from cache: %w", err)), nil
	}
	if len(sets.Items) == 0 {
		return admission.Allowed(""), nil
	}
	ns, warning, err := m.namespace(ctx, namespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err), nil
	}

	// Sets whose policy injects them inside the apiserver are left to it.
	ptrs := make([]*v1alpha1.SidecarSet, 0, len(sets.Items))
	for i := range sets.Items {
		if !inject.ByPolicy(&sets.Items[i]) {
			ptrs = append(ptrs, &sets.Items[i])
		}
	}
	ptrs, fallbacks := m.withFallbacks(ctx, ptrs)
	// With the labels unknown, Inject takes the namespace's name from the
	// pod; the patch must not carry it.
	named := pod.Namespace
	pod.Namespace = namespace
	res := inject.Inject(pod, ns, ptrs, m.Options)
	res.Pod.Namespace = named
	if warning != "" {
		res.Warnings = append([]string{warning}, res.Warnings...)
	}
	for _, name := range res.Injected {
		if n, ok := fallbacks[name]; ok {
			res.Warnings = append(res.Warnings, n.warning)
			if n.event {
				res.Events = append(res.Events, inject.Event{Set: name, Reason: inject.ReasonInjectionWarning, Message: n.warning})
			}
		}
	}
	dryRun := req.DryRun != nil && *req.DryRun
	if !dryRun {
		m.tell(ptrs, klog.KRef(namespace, podName(pod)), res.Events)
	}
	learned := recordAdmitted(res.Pod)
	if !res.Changed && !learned {
		return admission.Allowed("").WithWarnings(res.Warnings...), &res
	}
	log := ctrl.LoggerFrom(ctx)
	log.V(1).Info("injected sidecars", "pod", klog.KRef(namespace, podName(pod)),
		"sidecarSets", res.Injected, "skipped", len(res.Skipped), "recordedAdmittedImages", learned, "dryRun", dryRun)
	ops, err := podPatch(pod, res.Pod)
	if err == nil {
		return admission.Patched("", ops...).WithWarnings(res.Warnings...), &res
	}
	// Injection changed the pod in a way podPatch does not know: the
	// slower diff of the two serialised pods still gives the right patch.
	log.Error(err, "write the injection's patch; diffing the pods instead", "pod", klog.KRef(namespace, podName(pod)))
	out, err := json.Marshal(res.Pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encode injected pod: %w", err)), &res
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, out).WithWarnings(res.Warnings...), &res
}

// recordAdmitted makes pod's records hold the sidecar images its spec
// carries now (rollout.RecordAdmitted) and reports whether they changed. On
// a reinvocation they do when a mutator that ran after the injection
// rewrote an image; the controller then sees no drift where nobody edited
// anything. A state that cannot be read was warned about by Inject.
func recordAdmitted(pod *corev1.Pod) bool {
	state, err := revision.Decode(pod.Annotations)
	if err != nil {
		return false
	}
	state, changed := rollout.RecordAdmitted(state, pod)
	if changed {
		pod.Annotations[v1alpha1.AnnotationState] = revision.Encode(state)
		revision.DropPerSet(pod.Annotations)
	}
	return changed
}

// namespace returns the namespace named name: from the cache, or, when the
// cache has not seen it, from the apiserver. It returns nil, with a warning
// to pass on, when neither can tell its labels: then only SidecarSets
// without a namespaceSelector can match.
func (m *PodMutator) namespace(ctx context.Context, name string) (*corev1.Namespace, string, error) {
	ns := &corev1.Namespace{}
	err := m.Reader.Get(ctx, client.ObjectKey{Name: name}, ns)
	if err == nil {
		return ns, "", nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, "", fmt.Errorf("get namespace %s from cache: %w", name, err)
	}
	if m.APIReader == nil {
		return nil, "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, namespaceReadTimeout)
	defer cancel()
	err = m.APIReader.Get(ctx, client.ObjectKey{Name: name}, ns)
	switch {
	case err == nil:
		return ns, "", nil
	case apierrors.IsNotFound(err):
		// The apiserver refuses a pod in a namespace that does not exist.
		return nil, "", nil
	default:
		ctrl.LoggerFrom(ctx).Error(err, "read namespace", "namespace", name)
		return nil, fmt.Sprintf("sidecarset: the labels of namespace %s could not be read (%v): SidecarSets with a namespaceSelector were not considered", name, err), nil
	}
}

// EventInterval is how often at most a SidecarSet gets an event of one
// reason from injection. A Deployment scaling up creates its pods in a
// burst; one event per set and reason says what a thousand would, and how
// many pods it stands for. It is longer than the 12 minutes within which
// client-go's events.k8s.io recorder folds a new event into the series of
// an earlier one with the same set, reason and action, keeping the earlier
// message: within that window the count of pods would never be seen.
const EventInterval = 15 * time.Minute

// tell sends the events about each set, one per set and reason, unless
// one was sent within EventInterval. An event that follows others held back
// counts the pods since the last one went out, this one included.
func (m *PodMutator) tell(sets []*v1alpha1.SidecarSet, pod klog.ObjectRef, evs []inject.Event) {
	if m.Recorder == nil || len(evs) == 0 {
		return
	}
	for _, ev := range eventsBySetAndReason(evs) {
		i := slices.IndexFunc(sets, func(s *v1alpha1.SidecarSet) bool { return s.Name == ev.Set })
		if i < 0 {
			continue
		}
		pods, ok := m.limiter.allow(ev.Set, ev.Reason, m.now())
		if !ok {
			continue
		}
		m.Recorder.Eventf(sets[i], nil, corev1.EventTypeWarning, ev.Reason, "Inject", "%s", eventNote(pod, ev.Message, pods))
	}
}

func (m *PodMutator) now() time.Time {
	if m.Clock == nil {
		return time.Now()
	}
	return m.Clock.Now()
}

// noteLimit is the longest event message the apiserver accepts, in bytes;
// the recorder drops a longer one whole.
const noteLimit = 1024

// eventNote is the message of an event about pod standing for pods pods:
// "pod shop/db-0: MESSAGE", and, when it stands for more than this one,
// " (17 pods since the last event)", which a long message never cuts off.
func eventNote(pod klog.ObjectRef, msg string, pods int) string {
	var count string
	if pods > 1 {
		count = fmt.Sprintf(" (%d pods since the last event)", pods)
	}
	return truncate(fmt.Sprintf("pod %s: %s", pod, msg), noteLimit-len(count)) + count
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "..."
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// eventsBySetAndReason joins the messages of evs with one set and reason
// into one event, in the order they first come.
func eventsBySetAndReason(evs []inject.Event) []inject.Event {
	var out []inject.Event
	for _, ev := range evs {
		i := slices.IndexFunc(out, func(o inject.Event) bool { return o.Set == ev.Set && o.Reason == ev.Reason })
		if i < 0 {
			out = append(out, ev)
			continue
		}
		out[i].Message += "; " + ev.Message
	}
	return out
}

// eventLimiter lets one event per SidecarSet and reason through per
// EventInterval, and counts the pods it held back in between. The zero value
// is ready and safe for concurrent use.
type eventLimiter struct {
	mu   sync.Mutex
	last map[[2]string]limited
}

// limited is what the limiter knows of one set and reason: when its last
// event went out, and how many pods it held back since.
type limited struct {
	sent time.Time
	held int
}

// maxLimiterEntries bounds the limiter's memory: past it, entries older
// than EventInterval (of deleted sets, of reasons that stopped) are dropped,
// with the pods they held back uncounted.
const maxLimiterEntries = 4096

// allow reports whether an event about set for reason may go out at now,
// and, when it may, how many pods it stands for: this one and those held
// back since the last event. Worked case, one set and reason: pods at +0s,
// +1s, +2s and +15m (EventInterval) give (1, true), (0, false),
// (0, false), (3, true).
func (l *eventLimiter) allow(set, reason string, now time.Time) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := [2]string{set, reason}
	e, ok := l.last[key]
	if ok && now.Sub(e.sent) < EventInterval {
		e.held++
		l.last[key] = e
		return 0, false
	}
	if l.last == nil {
		l.last = map[[2]string]limited{}
	}
	if len(l.last) >= maxLimiterEntries {
		for k, old := range l.last {
			if now.Sub(old.sent) >= EventInterval {
				delete(l.last, k)
			}
		}
	}
	l.last[key] = limited{sent: now}
	return e.held + 1, true
}

// podName names a pod for logs: pods of a controller often have only a
// generateName at admission.
func podName(pod *corev1.Pod) string {
	if pod.Name != "" {
		return pod.Name
	}
	return pod.GenerateName + "<generated>"
}
