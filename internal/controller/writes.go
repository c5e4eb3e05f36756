package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/metrics"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/rollout"
)

// apply writes pod updates of a plan, a few at a time, and returns the ones
// that landed, in plan order. The plan already decided that all of them may
// go now; writing them one after another would only make a wide rollout
// (maxUnavailable 100%) wait on round trips.
func (r *Reconciler) apply(ctx context.Context, set *v1alpha1.SidecarSet, latest string, updates []rollout.PodUpdate, pods map[types.NamespacedName]*corev1.Pod) []rollout.PodUpdate {
	landed := make([]bool, len(updates))
	rewrites := make([][]rollout.Rewrite, len(updates))
	var wg sync.WaitGroup
	slots := make(chan struct{}, concurrentPodWrites)
	for i, u := range updates {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			landed[i], rewrites[i] = r.applyOne(ctx, set, pods[u.Pod], u)
		})
	}
	wg.Wait()
	var written []rollout.PodUpdate
	var names []string
	var first *corev1.Pod
	for i, u := range updates {
		if landed[i] {
			written = append(written, u)
			if u.Action == rollout.ActionUpdate {
				names = append(names, u.Pod.String())
				first = cmp.Or(first, pods[u.Pod])
			}
		}
	}
	r.tellRewrites(set, updates, rewrites, pods)
	if len(names) > 0 {
		// The related object is the step's first pod. The events library
		// folds an event into an earlier one alike in object, reason,
		// action and related, keeping the earlier message only: two steps
		// between which the set did not change would otherwise tell the
		// first step's pods twice and the second's never. A pod is updated
		// once per revision, so no two steps of a rollout share it.
		r.Recorder.Eventf(set, first, corev1.EventTypeNormal, ReasonRolloutStep, "Update",
			"%s", stepMessage(latest, names))
	}
	return written
}

// splitSettles splits updates into settles, at most limit of them, and the
// others, in the order given; more says that settles were left out. Over
// the limit, the settles kept are a random choice: settles that keep
// failing (a policy that refuses the pods of one namespace) cannot hold
// back the others for good.
func splitSettles(updates []rollout.PodUpdate, limit int) (others, settles []rollout.PodUpdate, more bool) {
	for _, u := range updates {
		if u.Action == rollout.ActionSettle {
			settles = append(settles, u)
		} else {
			others = append(others, u)
		}
	}
	if len(settles) <= limit {
		return others, settles, false
	}
	rand.Shuffle(len(settles), func(i, j int) { settles[i], settles[j] = settles[j], settles[i] })
	return others, settles[:limit], true
}

// settlesPerReconcile bounds the settles one reconcile writes, about five
// seconds of writes: behind a write that is not back, a rollout over
// thousands of pods may settle them all on their own (rollout.Next), and a
// reconcile that wrote them all at once would hold the set's next change (a
// new image, a pause) for a minute.
const settlesPerReconcile = 1000

// noteBack observes, for every pod first seen back from its write
// (rollout.Pod.Back: Ready past minReadySeconds with every written sidecar
// in its new container), how long the write took, from the time its record
// carries (Stamped), which outlives the manager that wrote it. It remembers
// the writes it observed, so that each is observed once by this manager; a
// record read as released (the set's releasedBefore passed its write) was
// observed before. The memory is for the metric alone: nothing the rollout
// decides reads it.
func (r *Reconciler) noteBack(setName string, pods []rollout.Pod) {
	now := r.Clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.memoryOf(setName)
	back := make(map[types.NamespacedName]time.Time)
	for _, p := range pods {
		w := p.Record.Write
		if w == nil || w.At == nil {
			continue
		}
		if seen, ok := m.back[p.Key]; ok && seen.Equal(w.At.Time) {
			back[p.Key] = seen
		} else if p.Back {
			back[p.Key] = w.At.Time
			// The write's time is the writing replica's clock: a skew
			// between replicas must not give a negative duration.
			metrics.PodUpdated(setName, max(0, now.Sub(w.At.Time)))
		}
	}
	m.back = back
}

// WriteTimeout bounds each pod write. A leader that lost its lease stops
// only once it fails to renew it; a write it started before then must not
// land after another manager took over and listed the pods, which would
// decide without it. The manager keeps this below the time between the
// moment a leader gives up and the takeover (manager.LeaseDuration less
// manager.RetryPeriod and manager.RenewDeadline: 3 s), and its Fence
// stops writes before either.
const WriteTimeout = 2500 * time.Millisecond

// stepMessage tells what one reconcile's updates wrote: the revision, and
// the pods by namespace/name, as many as the message holds (podList).
func stepMessage(revision string, names []string) string {
	return fmt.Sprintf("updating %d pod(s) in place to revision %s: %s", len(names), revision, podList(names))
}

// applyOne writes one pod update. A failed write is told on the pod; an
// update that landed is told only in the set's RolloutStep event (apply):
// the events library sends each event in a request of its own, all at once,
// so an event per pod would queue, in a step over a thousand pods, a
// thousand event writes ahead of the pod writes that follow. A drift
// revert, one per hand edit, is still told on the pod.
func (r *Reconciler) applyOne(ctx context.Context, set *v1alpha1.SidecarSet, pod *corev1.Pod, u rollout.PodUpdate) (bool, []rollout.Rewrite) {
	log := ctrl.LoggerFrom(ctx)
	rewrites, err := r.writePod(ctx, set, pod, u)
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// The cache was behind: the pod changed or went away since.
			// Its watch event brings the set back with the new pod.
			log.V(1).Info("pod changed before the update; will retry", "pod", klog.KObj(pod), "err", err.Error())
			return false, nil
		}
		log.Error(err, "update sidecar images", "pod", klog.KObj(pod))
		r.Recorder.Eventf(pod, set, corev1.EventTypeWarning, ReasonSidecarUpdateFailed, "Update",
			"update sidecars of %s: %v", set.Name, err)
		return false, nil
	}
	if u.Action == rollout.ActionRevertDrift {
		images := make([]string, len(u.Containers))
		for i, c := range u.Containers {
			images[i] = c.Name + "=" + c.Image
		}
		r.Recorder.Eventf(pod, set, corev1.EventTypeNormal, ReasonDriftReverted, "Update",
			"SidecarSet %s wrote back %s", set.Name, strings.Join(images, ", "))
	}
	return true, rewrites
}

// writePod patches the images of u's containers and the set's record in one
// request. The patch carries the pod's resourceVersion: if the cache was
// stale the apiserver refuses it, so a pod is never written twice from one
// stale view. When admission stored other images than those written, a
// second write records what it stored (recordStored).
//
// A resize follows, through the pods/resize subresource (the only way to
// change a running pod's resources, and one that takes nothing else). It
// is tried first as a dry run, so that a resize the apiserver refuses (the
// node's allocatable, a quota, a LimitRange) writes no record that would
// promise it. The resize itself is the diff of the cached pod's cpu and
// memory alone, so it never touches another resource, and goes without a
// precondition after the record, which the kubelet's status writes in
// between would fail: the record that decided it is in. A resize that
// fails then is told on the pod, and the record, which landed, has a later
// plan write it again (rollout.ActionResize); one written alone carries the
// cached resourceVersion, after the record when the plan counts it as a
// new disruption.
func (r *Reconciler) writePod(ctx context.Context, set *v1alpha1.SidecarSet, cached *corev1.Pod, u rollout.PodUpdate) ([]rollout.Rewrite, error) {
	if r.Fence != nil {
		if !r.Fence.Enter(time.Now()) {
			return nil, ErrFenced
		}
		defer r.Fence.Leave()
	}
	ctx, cancel := context.WithTimeout(ctx, WriteTimeout)
	defer cancel()
	resized := rollout.Resize(cached, u)
	resize := func(opts ...client.SubResourcePatchOption) error {
		patch := client.StrategicMergeFrom(cached)
		if u.Action == rollout.ActionResize && !u.WritesRecord() {
			patch = client.StrategicMergeFrom(cached, client.MergeFromWithOptimisticLock{})
		}
		out := resized.DeepCopy()
		if err := r.Client.SubResource("resize").Patch(ctx, out, patch, opts...); err != nil {
			return fmt.Errorf("resize sidecars of %s: %w", klog.KObj(cached), err)
		}
		if len(opts) == 0 {
			r.expect(set.Name, out)
		}
		return nil
	}
	if len(u.Resize) > 0 && u.WritesRecord() {
		if err := resize(client.DryRunAll); err != nil {
			return nil, err
		}
	}
	var rewrites []rollout.Rewrite
	if u.WritesRecord() {
		u = u.Stamped(stampTime(r.Clock.Now(), r.storedReleasedBefore(set)))
		written, _, err := rollout.Apply(cached, set.Name, u, r.Clock.Now())
		if err != nil {
			return nil, err
		}
		patch, err := recordPatch(cached, written)
		if err != nil {
			return nil, err
		}
		if err := r.Client.Patch(ctx, written, patch); err != nil {
			return nil, fmt.Errorf("patch sidecar images of %s: %w", klog.KObj(cached), err)
		}
		rewrites = r.recordStored(ctx, set.Name, written, u)
		r.expect(set.Name, written)
	}
	if len(u.Resize) == 0 {
		return rewrites, nil
	}
	if err := resize(); err != nil {
		if !u.WritesRecord() {
			return nil, err
		}
		ctrl.LoggerFrom(ctx).Error(err, "resize after the record landed; a later reconcile writes it again", "pod", klog.KObj(cached))
		r.Recorder.Eventf(cached, set, corev1.EventTypeWarning, ReasonSidecarUpdateFailed, "Resize",
			"resize sidecars of %s: %v", set.Name, err)
	}
	return rewrites, nil
}

// storedReleasedBefore returns the later of set's status.releasedBefore,
// as cached, and the one this manager last wrote, which the cache may not
// show yet.
func (r *Reconciler) storedReleasedBefore(set *v1alpha1.SidecarSet) *metav1.MicroTime {
	r.mu.Lock()
	defer r.mu.Unlock()
	stored := set.Status.ReleasedBefore
	if w := r.memoryOf(set.Name).status; w != nil && w.status.ReleasedBefore != nil && (stored == nil || w.status.ReleasedBefore.After(stored.Time)) {
		stored = w.status.ReleasedBefore
	}
	return stored
}

// stampTime returns the time a write made at now records: now, unless
// the set's status.releasedBefore, which another manager's clock may have
// set, is not before it. A write it passed would read as released at once.
func stampTime(now time.Time, releasedBefore *metav1.MicroTime) time.Time {
	if releasedBefore != nil && !now.After(releasedBefore.Time) {
		return releasedBefore.Add(time.Microsecond)
	}
	return now
}

// recordStored records, into pod as the apiserver returned it from u's
// write, the images it stored in place of those written
// (rollout.RecordStored), and returns those it recorded; pod then holds
// what the apiserver returned again. The patch tests that the pod still
// carries the record and the images it is made from, rather than its
// resourceVersion: the kubelet's status writes, which follow the write at
// once, do not refuse it, and anything else does. A record that did not
// land leaves the pod drifted: driftPolicy Revert writes it again, and
// tries again; under Report it shows drifted until the next update.
func (r *Reconciler) recordStored(ctx context.Context, setName string, pod *corev1.Pod, u rollout.PodUpdate) []rollout.Rewrite {
	rec, rewrites := rollout.RecordStored(u, pod)
	if len(rewrites) == 0 {
		return nil
	}
	patch, err := storedPatch(pod, setName, rec, rewrites)
	if err == nil {
		err = r.Client.Patch(ctx, pod, patch)
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "record the images admission stored in place of those written", "pod", klog.KObj(pod))
		return nil
	}
	return rewrites
}

// storedPatch returns the JSON patch that writes rec as setName's record
// into pod if pod's state annotation and the images of rewrites' containers
// are still as in pod.
func storedPatch(pod *corev1.Pod, setName string, rec revision.SetState, rewrites []rollout.Rewrite) (client.Patch, error) {
	value, err := revision.Put(maps.Clone(pod.Annotations), setName, rec)
	if err != nil {
		return nil, fmt.Errorf("record the images stored in %s: %w", klog.KObj(pod), err)
	}
	state := "/metadata/annotations/" + strings.ReplaceAll(v1alpha1.AnnotationState, "/", "~1")
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value string `json:"value"`
	}
	ops := []op{{"test", state, pod.Annotations[v1alpha1.AnnotationState]}}
	for _, rw := range rewrites {
		named := func(c corev1.Container) bool { return c.Name == rw.Container }
		list, i := "containers", slices.IndexFunc(pod.Spec.Containers, named)
		if i < 0 {
			list, i = "initContainers", slices.IndexFunc(pod.Spec.InitContainers, named)
		}
		if i < 0 {
			return nil, fmt.Errorf("record the images stored in %s: no container %s", klog.KObj(pod), rw.Container)
		}
		at := fmt.Sprintf("/spec/%s/%d/", list, i)
		ops = append(ops, op{"test", at + "name", rw.Container}, op{"test", at + "image", rw.Stored})
	}
	ops = append(ops, op{"replace", state, value})
	data, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("record the images stored in %s: %w", klog.KObj(pod), err)
	}
	return client.RawPatch(types.JSONPatchType, data), nil
}

// tellRewrites tells, in one event on the set, the images the apiserver
// stored in place of those that updates wrote (rewrites, by update), as
// admission rewrote them, and the pods. They are recorded as stored
// (recordStored), so each pod is told once per revision, not at every
// write. The related object is the first such pod, as in RolloutStep.
func (r *Reconciler) tellRewrites(set *v1alpha1.SidecarSet, updates []rollout.PodUpdate, rewrites [][]rollout.Rewrite, pods map[types.NamespacedName]*corev1.Pod) {
	var images, names []string
	var first *corev1.Pod
	for i, u := range updates {
		for _, rw := range rewrites[i] {
			if image := fmt.Sprintf("%s %s as %s", rw.Container, rw.Written, rw.Stored); !slices.Contains(images, image) {
				images = append(images, image)
			}
		}
		if len(rewrites[i]) > 0 {
			names = append(names, u.Pod.String())
			first = cmp.Or(first, pods[u.Pod])
		}
	}
	if len(names) == 0 {
		return
	}
	r.Recorder.Eventf(set, first, corev1.EventTypeWarning, ReasonImageRewritten, "Update",
		"admission stored other images than the controller wrote (%s): recorded as stored, written again only for a new revision, in %d pod(s): %s",
		strings.Join(images, ", "), len(names), podList(names))
}

// recordPatch returns the strategic merge patch from cached to written, a
// pod that rollout.Apply made of it, locked to cached's resourceVersion:
// the annotations that changed (null for those removed) and the images
// that changed, each container by its name, with the order of the list it
// is in. It is the patch a diff of the two pods gives (client.MergeFrom),
// built from what Apply changes alone, which costs a rollout's every write
// a fraction of that diff.
func recordPatch(cached, written *corev1.Pod) (client.Patch, error) {
	if cached.ResourceVersion == "" {
		// The apiserver would take the patch unconditionally.
		return nil, fmt.Errorf("patch of %s: no resourceVersion to lock it to", klog.KObj(cached))
	}
	annotations := map[string]any{}
	for k, v := range written.Annotations {
		if was, ok := cached.Annotations[k]; !ok || was != v {
			annotations[k] = v
		}
	}
	for k := range cached.Annotations {
		if _, ok := written.Annotations[k]; !ok {
			annotations[k] = nil
		}
	}
	metadata := map[string]any{"resourceVersion": cached.ResourceVersion}
	if len(annotations) > 0 {
		metadata["annotations"] = annotations
	}
	patch := map[string]any{"metadata": metadata}
	spec := map[string]any{}
	for _, list := range []struct {
		key             string
		cached, written []corev1.Container
	}{
		{"initContainers", cached.Spec.InitContainers, written.Spec.InitContainers},
		{"containers", cached.Spec.Containers, written.Spec.Containers},
	} {
		if len(list.cached) != len(list.written) {
			return nil, fmt.Errorf("patch of %s: the write changes the %s, not only their images", klog.KObj(cached), list.key)
		}
		var order, images []map[string]string
		for i, c := range list.written {
			if c.Name != list.cached[i].Name {
				return nil, fmt.Errorf("patch of %s: the write changes the %s, not only their images", klog.KObj(cached), list.key)
			}
			order = append(order, map[string]string{"name": c.Name})
			if c.Image != list.cached[i].Image {
				images = append(images, map[string]string{"name": c.Name, "image": c.Image})
			}
		}
		if len(images) > 0 {
			spec["$setElementOrder/"+list.key] = order
			spec[list.key] = images
		}
	}
	if len(spec) > 0 {
		patch["spec"] = spec
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("patch of %s: %w", klog.KObj(cached), err)
	}
	return client.RawPatch(types.StrategicMergePatchType, data), nil
}

// expect remembers pod, as the apiserver returned it from a write of
// setName's record, until the cache has caught up with it (expected).
func (r *Reconciler) expect(setName string, pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.memoryOf(setName).writes[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] = podWrite{pod: pod, at: r.Clock.Now()}
}

// podWrite is a pod as a write of the controller left it.
type podWrite struct {
	pod *corev1.Pod
	at  time.Time
}

// expectationTTL bounds how long a write is trusted over the cache. The
// cache shows a write within moments; one it never shows was overtaken by
// an edit rollout.Fresher cannot recognise (someone else rewrote the
// record), and the cache is then the truth.
const expectationTTL = time.Minute

// freshest returns the pod, or the version of it that any SidecarSet's
// last write made when the cache has not caught up with that write.
func (r *Reconciler) freshest(pod *corev1.Pod) *corev1.Pod {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.Clock.Now()
	for setName, m := range r.memory {
		if written, ok := m.writes[key]; ok && now.Sub(written.at) <= expectationTTL {
			if fresh, caughtUp := rollout.Fresher(pod, written.pod, setName); !caughtUp {
				pod = fresh
			}
		}
	}
	return pod
}

// expected replaces, in pods, every pod whose cached version has not caught
// up with this controller's last write of it by the pod written
// (rollout.Fresher), and forgets the writes the cache has caught up with or
// whose pods are gone.
func (r *Reconciler) expected(setName string, pods []matched) []matched {
	r.mu.Lock()
	defer r.mu.Unlock()
	writes := r.memoryOf(setName).writes
	if len(writes) == 0 {
		return pods
	}
	seen := make(map[types.NamespacedName]bool, len(writes))
	now := r.Clock.Now()
	for i, p := range pods {
		key := types.NamespacedName{Namespace: p.pod.Namespace, Name: p.pod.Name}
		written, ok := writes[key]
		if !ok {
			continue
		}
		seen[key] = true
		fresh, caughtUp := rollout.Fresher(p.pod, written.pod, setName)
		if caughtUp || now.Sub(written.at) > expectationTTL {
			delete(writes, key)
			continue
		}
		// Another set's unreadable entry does not make this one unreadable.
		state, _ := revision.Decode(fresh.Annotations)
		if rec, ok := state[setName]; ok {
			pods[i] = matched{pod: fresh, rec: rec}
		}
	}
	for key := range writes {
		if !seen[key] {
			delete(writes, key)
		}
	}
	return pods
}

// podListLimit bounds the pod names in one event message. The apiserver
// refuses an event whose message is over 1024 bytes, and the recorder then
// drops it: a rollout step over a thousand pods would tell nothing at all.
const podListLimit = 600

// podList names pods in an event message: as many as fit in podListLimit
// bytes, then how many more there are.
func podList(names []string) string {
	var b strings.Builder
	for i, name := range names {
		if i > 0 && b.Len()+len(name) > podListLimit {
			fmt.Fprintf(&b, " and %d more", len(names)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name)
	}
	return b.String()
}
