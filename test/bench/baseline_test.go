package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/bench"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

// baselineWriters is how many pod writes the baseline keeps in flight: as
// many as the controller within one reconcile (its concurrentPodWrites).
const baselineWriters = 16

// baselineSet is the SidecarSet whose status the baseline writes, as the
// controller writes its set's; it selects no pod.
const baselineSet = "bench-baseline"

// baseline rolls a sidecar image out over the pods of one namespace by
// itself: what a script with a watch would do for the controller's job,
// and nothing more. Its client and cache are controller-runtime's, made
// from the rest config the way the manager makes its own (no client-side
// rate limit), so the difference to the controller is the controller's
// own work.
type baseline struct {
	ns, container string
	client        client.Client
	cache         cache.Cache
	stopCache     context.CancelFunc
	cacheDone     chan error
	// image is what the sidecar of its pods runs now.
	image string

	mu  sync.Mutex
	run *baselineRun
}

// baselineRun is one rollout of the baseline, under baseline.mu.
type baselineRun struct {
	image, record string
	// unavailable is the most pods in flight at once (maxUnavailable).
	unavailable int
	pending     []string
	// inflight holds the pods written or being written, with the imageID
	// of the sidecar before, until they are Ready on another one.
	inflight map[string]string
	// retry holds the pods whose patch met a newer resourceVersion, with
	// the one it carried: they are written again once the cache shows a
	// newer one.
	retry               map[string]string
	landed, done, total int
	conflicts           int
	statusEvery         int
	jobs                chan string
	statuses            chan bench.Progress
	progress            *progressLog
	failed              error
	finished            chan struct{}
}

func newBaseline(ctx context.Context, env *testenv.Env, ns, container string) (*baseline, error) {
	cfg := rest.CopyConfig(env.Config)
	if cfg.QPS == 0 {
		// As the manager does (manager.New): no client-side rate limit.
		cfg.QPS = -1
	}
	b := &baseline{ns: ns, container: container, image: "exporter:v1", cacheDone: make(chan error, 1)}
	var err error
	if b.client, err = client.New(cfg, client.Options{Scheme: env.Scheme}); err != nil {
		return nil, err
	}
	b.cache, err = cache.New(cfg, cache.Options{
		Scheme:            env.Scheme,
		DefaultNamespaces: map[string]cache.Config{ns: {}},
		DefaultTransform:  cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, err
	}
	informer, err := b.cache.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, err
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*corev1.Pod); ok {
				b.observe(pod)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	cacheCtx, stop := context.WithCancel(context.Background())
	b.stopCache = stop
	go func() { b.cacheDone <- b.cache.Start(cacheCtx) }()
	if !b.cache.WaitForCacheSync(ctx) {
		return nil, errors.Join(errors.New("the baseline's cache did not sync"), b.stop())
	}
	set := &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: baselineSet},
		Spec: v1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "no-pod-has-this"}},
			Containers: []v1alpha1.SidecarContainer{{Container: corev1.Container{Name: container, Image: b.image}}},
		},
	}
	if err := b.client.Create(ctx, set); err != nil {
		return nil, errors.Join(fmt.Errorf("create SidecarSet %s: %w", baselineSet, err), b.stop())
	}
	return b, nil
}

// stop stops the cache and returns what it stopped with.
func (b *baseline) stop() error {
	b.stopCache()
	return <-b.cacheDone
}

// ready counts the pods that are Ready with the sidecar declared as image.
func (b *baseline) ready(image string) int {
	var pods corev1.PodList
	if err := b.cache.List(context.Background(), &pods, client.InNamespace(b.ns)); err != nil {
		return 0
	}
	n := 0
	for i := range pods.Items {
		if podReady(&pods.Items[i]) && declared(&pods.Items[i], b.container) == image {
			n++
		}
	}
	return n
}

// rollout writes image into the sidecar of every pod, at most mu of them
// in flight, with record as the state annotation, and writes the status of
// baselineSet statusWrites times along (at least once, at the end). It
// fills p's time, progress and conflicts.
func (b *baseline) rollout(ctx context.Context, p *bench.RolloutPhase, image string, mu intstr.IntOrString, statusWrites int, record string) error {
	var pods corev1.PodList
	if err := b.cache.List(ctx, &pods, client.InNamespace(b.ns)); err != nil {
		return err
	}
	if len(pods.Items) != p.Pods {
		return fmt.Errorf("the baseline's cache holds %d pods, want %d", len(pods.Items), p.Pods)
	}
	unavailable, err := intstr.GetScaledValueFromIntOrPercent(&mu, p.Pods, true)
	if err != nil {
		return err
	}
	names := make([]string, len(pods.Items))
	for i, pod := range pods.Items {
		names[i] = pod.Name
	}
	slices.Sort(names)
	statusWrites = max(statusWrites, 1)
	run := &baselineRun{
		image: image, record: record, unavailable: max(unavailable, 1), pending: names,
		inflight: map[string]string{}, retry: map[string]string{}, total: p.Pods,
		// Every this many pods back, a status; the last one at the end.
		statusEvery: (p.Pods + statusWrites - 1) / statusWrites,
		jobs:        make(chan string, p.Pods),
		statuses:    make(chan bench.Progress, statusWrites+1),
		progress:    &progressLog{start: time.Now()},
		finished:    make(chan struct{}),
	}
	ctx, cancel := context.WithTimeout(ctx, phaseTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for range baselineWriters {
		wg.Go(func() {
			for name := range run.jobs {
				b.write(ctx, run, name)
			}
		})
	}
	statusDone := make(chan error, 1)
	go func() { statusDone <- b.writeStatuses(ctx, run) }()

	b.mu.Lock()
	b.run = run
	b.dispatch(run)
	b.mu.Unlock()

	var waitErr error
	select {
	case err := <-statusDone:
		// The last status is written once every pod is back.
		waitErr = err
	case <-ctx.Done():
		waitErr = ctx.Err()
	}
	elapsed := time.Since(run.progress.start)

	b.mu.Lock()
	b.run = nil
	close(run.jobs)
	failed, done, landed := run.failed, run.done, run.landed
	b.mu.Unlock()
	wg.Wait()
	if err := errors.Join(failed, waitErr); err != nil {
		return fmt.Errorf("%d of %d pods written, %d back: %w", landed, p.Pods, done, err)
	}
	b.image = image
	p.Seconds = elapsed.Seconds()
	p.Conflicts = run.conflicts
	p.Progress = run.progress.final(landed, done)
	return nil
}

// dispatch hands pods to the writers while fewer than the run allows are
// in flight. The caller holds b.mu.
func (b *baseline) dispatch(run *baselineRun) {
	for len(run.inflight) < run.unavailable && len(run.pending) > 0 {
		name := run.pending[0]
		run.pending = run.pending[1:]
		pod := &corev1.Pod{}
		if err := b.cache.Get(context.Background(), client.ObjectKey{Namespace: b.ns, Name: name}, pod); err != nil {
			run.failed = errors.Join(run.failed, fmt.Errorf("read pod %s from the cache: %w", name, err))
			continue
		}
		run.inflight[name] = imageID(pod, b.container)
		run.jobs <- name
	}
}

// write patches one pod's sidecar image and state annotation, carrying the
// resourceVersion the cache holds, as the controller does.
func (b *baseline) write(ctx context.Context, run *baselineRun, name string) {
	pod := &corev1.Pod{}
	if err := b.cache.Get(ctx, client.ObjectKey{Namespace: b.ns, Name: name}, pod); err != nil {
		b.fail(run, fmt.Errorf("read pod %s from the cache: %w", name, err))
		return
	}
	patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"annotations":{%q:%q}},"spec":{"containers":[{"name":%q,"image":%q}]}}`,
		pod.ResourceVersion, v1alpha1.AnnotationState, run.record, b.container, run.image)
	err := b.client.Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, []byte(patch)))
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.run != run {
		// The run ended (failed or timed out) meanwhile.
		return
	}
	switch {
	case apierrors.IsConflict(err):
		run.conflicts++
		// Written again once the cache shows the newer version; it may
		// already.
		fresh := &corev1.Pod{}
		if err := b.cache.Get(ctx, client.ObjectKey{Namespace: b.ns, Name: name}, fresh); err == nil && fresh.ResourceVersion != pod.ResourceVersion {
			run.jobs <- name
			return
		}
		run.retry[name] = pod.ResourceVersion
	case err != nil:
		run.failed = errors.Join(run.failed, fmt.Errorf("patch pod %s: %w", name, err))
	default:
		run.landed++
		run.progress.add(run.landed, run.done)
	}
}

func (b *baseline) fail(run *baselineRun, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	run.failed = errors.Join(run.failed, err)
}

// observe takes a pod's update from the cache: a pod in flight that is
// Ready on a new imageID is back, which lets the next one go; a pod whose
// patch conflicted is written again.
func (b *baseline) observe(pod *corev1.Pod) {
	b.mu.Lock()
	defer b.mu.Unlock()
	run := b.run
	if run == nil {
		return
	}
	if rv, ok := run.retry[pod.Name]; ok && rv != pod.ResourceVersion {
		delete(run.retry, pod.Name)
		run.jobs <- pod.Name
		return
	}
	before, ok := run.inflight[pod.Name]
	if !ok || !podReady(pod) || declared(pod, b.container) != run.image || imageID(pod, b.container) == before {
		return
	}
	delete(run.inflight, pod.Name)
	run.done++
	run.progress.add(run.landed, run.done)
	if run.done%run.statusEvery == 0 || run.done == run.total {
		run.statuses <- bench.Progress{Updated: run.landed, UpdatedReady: run.done}
	}
	b.dispatch(run)
}

// writeStatuses writes baselineSet's status with each count the run sends,
// until every pod is back.
func (b *baseline) writeStatuses(ctx context.Context, run *baselineRun) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case s := <-run.statuses:
			body := fmt.Sprintf(`{"status":{"observedGeneration":1,"matchedPods":%d,"updatedPods":%d,"readyPods":%d,"updatedReadyPods":%d,"notUpgradablePods":0,"driftedPods":0,"unmanagedPods":0}}`,
				run.total, s.Updated, run.total, s.UpdatedReady)
			set := &v1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: baselineSet}}
			if err := b.client.Status().Patch(ctx, set, client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
				return fmt.Errorf("write the status of %s: %w", baselineSet, err)
			}
			if s.UpdatedReady == run.total {
				return nil
			}
		}
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// declared is the image the pod's spec gives container.
func declared(pod *corev1.Pod, container string) string {
	for _, c := range pod.Spec.Containers {
		if c.Name == container {
			return c.Image
		}
	}
	return ""
}

// imageID is the imageID the pod's status shows for container.
func imageID(pod *corev1.Pod, container string) string {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == container {
			return s.ImageID
		}
	}
	return ""
}
