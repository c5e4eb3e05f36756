// Package kubeletsim simulates Kubernetes nodes against a real
// kube-apiserver: it plays the kubelet's part (and the scheduler's, which the
// test control plane lacks) for the pods bound to its nodes. Integration
// tests, the playground and the benchmarks use it.
//
// What it does, and the kubelet behaviour each part mirrors:
//
//   - Node objects, Ready, with room for thousands of pods, and their Leases
//     in kube-node-lease renewed every 10 s like a kubelet's heartbeat.
//   - Unscheduled pods with the default scheduler name (Options.SchedulerName)
//     are bound round-robin to the nodes that fit their nodeSelector and
//     required node affinity, through the pods/binding subresource.
//   - For a pod on its nodes it writes the status a kubelet would: phase,
//     conditions, pod and host IPs, start time, and container statuses with
//     containerd IDs, image and imageID, states with the kubelet's reasons,
//     lastState, ready, started and restartCount; and the kubelet's Events.
//   - Images resolve through a simulated registry: a tag's digest is the
//     sha256 of its normalized reference unless the ConfigMap
//     kube-system/simulated-registry re-points it (a re-push; see
//     RegistryConfigMap for the format). Each node keeps what it pulled, as
//     containerd does: with imagePullPolicy IfNotPresent a node that has a
//     tag keeps using the digest it pulled, re-push or not (use Always or a
//     new tag), and a new tag of a digest the node already knows shows the
//     first tag in status.image. Policy Never counts every image as present
//     except "pull-fails" ones, which give ErrImageNeverPull.
//   - An image whose repository or tag contains "pull-fails" never pulls (ErrImagePull, then
//     ImagePullBackOff); "crashes" starts and exits 1 (CrashLoopBackOff);
//     "completes" runs a while and exits 0; "never-ready" runs but never
//     passes readiness. See Options for the timings.
//   - A container whose image changes in the spec is killed and started
//     again, alone: new container ID, restartCount + 1, Killing event
//     "Container X definition changed, will be restarted" (for a native
//     sidecar "Init container X definition changed").
//   - Init containers run in order (an ordinary one exits 0 as soon as it
//     has started, unless its image says otherwise); native sidecars start
//     before the app containers; Never/OnFailure pods finish (their
//     sidecars stopped in reverse order) as Succeeded or Failed; crashed
//     containers restart with the kubelet's back-off. Readiness follows
//     each probe's initialDelaySeconds (startup, then readiness).
//   - A deleted pod's containers are stopped at once (no grace period, no
//     preStop hooks) and the pod is deleted with grace period 0, as the
//     kubelet does once its containers are gone.
//
// Everything runs off shared informers and rate-limited work queues: a pod
// is synced when it changes or when its next deadline (a pull, a start, a
// probe's initial delay, an exit, a back-off) passes, and its status is
// written only when it changed.
package kubeletsim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Options configures a Sim. The zero value gives three instant nodes.
type Options struct {
	// Nodes is how many nodes to simulate; default 3.
	Nodes int
	// NodePrefix names the nodes: "<prefix>0", "<prefix>1", ...; default
	// "sim-node-".
	NodePrefix string
	// SchedulerName: unscheduled pods whose spec.schedulerName is this are
	// bound to these nodes; default "default-scheduler". A second Sim in
	// the same cluster needs another name, or both would bind the same pods.
	SchedulerName string

	// PullDelay is how long pulling an image takes; zero: instant.
	PullDelay time.Duration
	// StartDelay is how long creating and starting a container takes; zero:
	// instant. Readiness comes after that, once each container's
	// readinessProbe.initialDelaySeconds has passed (at once without a probe).
	StartDelay time.Duration
	// SyncDelay is how long a node takes to act on a change of a pod's
	// spec, as a kubelet does while its pod worker gets to the pod and the
	// container it replaces stops within its grace period; zero: at once.
	// Like the kubelet, which publishes a sync's status before it acts on
	// the spec, the node reports the new generation observed at once,
	// while the status still shows what ran before the change until then;
	// and, like its pod worker, it syncs one change at a time: a change
	// made meanwhile waits, its generation not yet observed.
	SyncDelay time.Duration
	// CompletesAfter is how long a container whose repository contains
	// "completes" runs before it exits 0; default 1s.
	CompletesAfter time.Duration
	// CrashesAfter is how long a container whose repository contains
	// "crashes" runs before it exits 1, and how long one whose repository
	// contains "turns-unready" stays ready before its readiness fails for
	// good; default 1s.
	CrashesAfter time.Duration
	// BackOff is the first crash-loop and image-pull back-off, doubled on
	// each retry up to MaxBackOff; defaults 10s and 5m, the kubelet's.
	BackOff, MaxBackOff time.Duration

	// Workers is how many pods are synced at once, and how many bound at
	// once; default 16.
	Workers int
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.NodePrefix == "" {
		o.NodePrefix = "sim-node-"
	}
	if o.SchedulerName == "" {
		o.SchedulerName = corev1.DefaultSchedulerName
	}
	def(&o.CompletesAfter, time.Second)
	def(&o.CrashesAfter, time.Second)
	def(&o.BackOff, 10*time.Second)
	def(&o.MaxBackOff, 5*time.Minute)
	if o.Workers == 0 {
		o.Workers = 16
	}
	return o
}

// The simulator's own clients: enough throughput for thousands of pods,
// with Events on a client of their own so they never hold up status.
const (
	clientQPS, clientBurst = 500, 1000
	eventQPS, eventBurst   = 100, 200
	userAgent              = "kubeletsim"
)

// Sim is a set of simulated nodes. Create it with New, start it with Run.
type Sim struct {
	opts   Options
	timing timing
	client kubernetes.Interface
	events kubernetes.Interface
	reg    *registry
	nodes  []*simNode
	byName map[string]*simNode
	ips    *ipPool

	// podQueue holds pods on these nodes to sync; bindQueue unscheduled
	// pods to bind. Both are keyed by namespace/name.
	podQueue  workqueue.TypedRateLimitingInterface[cache.ObjectName]
	bindQueue workqueue.TypedRateLimitingInterface[cache.ObjectName]
	pods      corelisters.PodLister
	pending   corelisters.PodLister
	scheduler record.EventRecorder
	nextNode  atomic.Uint64

	mu       sync.Mutex
	runtimes map[cache.ObjectName]*podRuntime

	started atomic.Bool
	ready   chan struct{}
	done    chan struct{}
	err     error // why Run ended; read after done is closed
}

// New returns a Sim for the apiserver cfg reaches. It talks to the apiserver
// only once Run starts.
func New(cfg *rest.Config, opts Options) (*Sim, error) {
	opts = opts.withDefaults()
	if opts.Nodes < 0 || opts.Workers < 0 || opts.PullDelay < 0 || opts.StartDelay < 0 ||
		opts.CompletesAfter < 0 || opts.CrashesAfter < 0 || opts.BackOff < 0 || opts.MaxBackOff < opts.BackOff {
		return nil, fmt.Errorf("kubeletsim: invalid options %+v", opts)
	}
	clientCfg := rest.CopyConfig(cfg)
	clientCfg.QPS, clientCfg.Burst, clientCfg.UserAgent = clientQPS, clientBurst, userAgent
	client, err := kubernetes.NewForConfig(clientCfg)
	if err != nil {
		return nil, fmt.Errorf("kubeletsim: client: %w", err)
	}
	eventCfg := rest.CopyConfig(clientCfg)
	eventCfg.QPS, eventCfg.Burst = eventQPS, eventBurst
	events, err := kubernetes.NewForConfig(eventCfg)
	if err != nil {
		return nil, fmt.Errorf("kubeletsim: event client: %w", err)
	}
	s := &Sim{
		opts: opts,
		timing: timing{
			pull: opts.PullDelay, start: opts.StartDelay,
			completes: opts.CompletesAfter, crashes: opts.CrashesAfter,
			backOff: opts.BackOff, maxBackOff: opts.MaxBackOff,
		},
		client:   client,
		events:   events,
		reg:      &registry{},
		byName:   map[string]*simNode{},
		ips:      newIPPool(),
		runtimes: map[cache.ObjectName]*podRuntime{},
		ready:    make(chan struct{}),
		done:     make(chan struct{}),
	}
	for i := range opts.Nodes {
		n := newSimNode(fmt.Sprintf("%s%d", opts.NodePrefix, i), i, s.reg, s.timing)
		s.nodes = append(s.nodes, n)
		s.byName[n.name] = n
	}
	return s, nil
}

// NodeNames returns the names of the simulated nodes.
func (s *Sim) NodeNames() []string {
	names := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		names[i] = n.name
	}
	return names
}

// Ready waits until the nodes exist and the simulator's caches have synced,
// so that pods created from now on are bound and run. It returns Run's
// error if Run ended first.
func (s *Sim) Ready(ctx context.Context) error {
	select {
	case <-s.ready:
		return nil
	case <-s.done:
		if s.err != nil {
			return s.err
		}
		return errors.New("kubeletsim: stopped before it was ready")
	case <-ctx.Done():
		return fmt.Errorf("kubeletsim: wait until ready: %w", ctx.Err())
	}
}

// Run registers the nodes and plays their kubelets until ctx is done. It
// blocks; it returns an error only if the simulator could not start.
func (s *Sim) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("kubeletsim: Run called twice")
	}
	defer close(s.done)
	s.err = s.run(ctx)
	return s.err
}

func (s *Sim) run(ctx context.Context) error {
	log := ctrllog.FromContext(ctx).WithName("kubeletsim")
	ctx = ctrllog.IntoContext(ctx, log)

	// The kubelet's own recorder drops an object's events beyond a burst of
	// 25; pods restarted in place here emit more than that, and tests read
	// them, so the burst is larger. The broadcaster outlives ctx until the
	// workers have stopped recording.
	broadcaster := record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)),
		record.WithCorrelatorOptions(record.CorrelatorOptions{BurstSize: 200, QPS: 1}))
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.events.CoreV1().Events("")})
	for _, n := range s.nodes {
		n.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: n.name})
	}
	s.scheduler = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: s.opts.SchedulerName})

	if err := s.registerNodes(ctx); err != nil {
		return err
	}

	limiter := func() workqueue.TypedRateLimiter[cache.ObjectName] {
		return workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](5*time.Millisecond, 10*time.Second)
	}
	s.podQueue = workqueue.NewTypedRateLimitingQueueWithConfig(limiter(), workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "kubeletsim-pods"})
	s.bindQueue = workqueue.NewTypedRateLimitingQueueWithConfig(limiter(), workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "kubeletsim-bind"})
	defer s.podQueue.ShutDown()
	defer s.bindQueue.ShutDown()

	factories, err := s.startInformers(ctx)
	if err != nil {
		return err
	}
	defer func() {
		for _, f := range factories {
			f.Shutdown()
		}
	}()

	// Pods that already hold an IP (from before a restart) keep it.
	all, err := s.pods.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("kubeletsim: list pods: %w", err)
	}
	for _, p := range all {
		if s.byName[p.Spec.NodeName] != nil && p.Status.PodIP != "" {
			s.ips.reserve(p.Status.PodIP)
		}
	}

	var wg sync.WaitGroup
	wg.Go(func() { s.renewLeases(ctx) })
	for range s.opts.Workers {
		wg.Go(func() {
			for s.processNext(ctx, s.podQueue, s.syncPod) {
			}
		})
	}
	for range s.opts.Workers {
		wg.Go(func() {
			for s.processNext(ctx, s.bindQueue, s.bind) {
			}
		})
	}
	log.Info("Simulated nodes ready", "nodes", s.NodeNames())
	close(s.ready)

	<-ctx.Done()
	s.podQueue.ShutDown()
	s.bindQueue.ShutDown()
	wg.Wait()
	return nil
}

// startInformers watches pods on any node, unscheduled pods and the
// registry ConfigMap, and waits for their caches.
func (s *Sim) startInformers(ctx context.Context) ([]informers.SharedInformerFactory, error) {
	// Thousands of cached pods: their managed fields are never read.
	stripManagedFields := func(obj any) (any, error) {
		if m, err := meta.Accessor(obj); err == nil {
			m.SetManagedFields(nil)
		}
		return obj, nil
	}
	factory := func(opts ...informers.SharedInformerOption) informers.SharedInformerFactory {
		return informers.NewSharedInformerFactoryWithOptions(s.client, 0, append(opts, informers.WithTransform(stripManagedFields))...)
	}
	bound := factory(informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
	}))
	unbound := factory(informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", "").String()
	}))
	registry := factory(informers.WithNamespace(RegistryNamespace), informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", RegistryName).String()
	}))

	podInformer := bound.Core().V1().Pods()
	s.pods = podInformer.Lister()
	enqueuePod := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && s.byName[pod.Spec.NodeName] == nil {
			return
		}
		// Deleted pods may come as tombstones: sync forgets them.
		if key, err := cache.DeletionHandlingObjectToName(obj); err == nil {
			s.podQueue.Add(key)
		}
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueuePod,
		UpdateFunc: func(_, obj any) { enqueuePod(obj) },
		DeleteFunc: enqueuePod,
	}); err != nil {
		return nil, fmt.Errorf("kubeletsim: watch pods: %w", err)
	}

	pendingInformer := unbound.Core().V1().Pods()
	s.pending = pendingInformer.Lister()
	enqueueBind := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && s.schedules(pod) {
			s.bindQueue.Add(cache.MetaObjectToName(pod))
		}
	}
	if _, err := pendingInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueBind,
		UpdateFunc: func(_, obj any) { enqueueBind(obj) },
	}); err != nil {
		return nil, fmt.Errorf("kubeletsim: watch unscheduled pods: %w", err)
	}

	log := ctrllog.FromContext(ctx)
	load := func(obj any) {
		cm, _ := obj.(*corev1.ConfigMap)
		if err := s.reg.load(cm); err != nil {
			log.Error(err, "Some simulated registry entries were ignored")
		}
	}
	if _, err := registry.Core().V1().ConfigMaps().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    load,
		UpdateFunc: func(_, obj any) { load(obj) },
		DeleteFunc: func(any) { load(nil) },
	}); err != nil {
		return nil, fmt.Errorf("kubeletsim: watch %s/%s: %w", RegistryNamespace, RegistryName, err)
	}

	factories := []informers.SharedInformerFactory{bound, unbound, registry}
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	for _, f := range factories {
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return factories, fmt.Errorf("kubeletsim: cache of %v did not sync", typ)
			}
		}
	}
	return factories, nil
}

// processNext takes one key off q and syncs it; it reports false once q is
// shut down.
func (s *Sim) processNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[cache.ObjectName], sync func(context.Context, cache.ObjectName) error) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	if err := sync(ctx, key); err != nil {
		if ctx.Err() != nil {
			return true // shutting down; the queue is about to close
		}
		log := ctrllog.FromContext(ctx)
		if apierrors.IsConflict(err) {
			// Our cache is behind our own last write; the retry reads newer.
			log.V(4).Info("Retrying after a conflict", "pod", key, "err", err)
		} else {
			log.Error(err, "Retrying", "pod", key)
		}
		q.AddRateLimited(key)
		return true
	}
	q.Forget(key)
	return true
}

// syncPod is the kubelet's pod sync: move the pod's containers forward to
// now, record Events, write the status if it changed, and come back at the
// next deadline.
func (s *Sim) syncPod(ctx context.Context, key cache.ObjectName) error {
	pod, err := s.pods.Pods(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		s.forget(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get pod %s from cache: %w", key, err)
	}
	n := s.byName[pod.Spec.NodeName]
	if n == nil {
		return nil
	}
	now := time.Now()
	rt, err := s.runtimeFor(key, pod, n, now)
	if err != nil {
		return err
	}
	switch {
	case rt == nil:
		return s.deleteTerminated(ctx, pod, nil)
	case rt.deleteSent:
		// Only a finalizer holds the pod now; the kubelet is done with it.
		return nil
	}

	view, acting := s.view(pod, rt, now)
	if acting {
		for _, e := range n.m.advance(view, rt, now) {
			n.recordEvent(pod, e)
		}
		view = s.nextSync(pod, rt, now)
	}
	status := podStatus(view, rt, n.ip, now)
	if !apiequality.Semantic.DeepEqual(pod.Status, status) {
		updated := pod.DeepCopy()
		updated.Status = status
		if _, err := s.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("update status of pod %s: %w", key, err)
		}
		ctrllog.FromContext(ctx).V(4).Info("Updated pod status", "pod", key, "phase", status.Phase)
	}
	if pod.DeletionTimestamp != nil {
		return s.deleteTerminated(ctx, pod, rt)
	}
	next := rt.nextWake(now)
	if rt.sync != nil {
		next = rt.actAt
	}
	if !next.IsZero() {
		s.podQueue.AddAfter(key, next.Sub(now))
	}
	return nil
}

// view returns the pod as the node's pod worker sees it now, with pod's
// live status, and whether the node acts on it now. Without a SyncDelay it
// acts on every change at once. With one, the worker takes one spec change
// at a time, as the kubelet's does: a sync of a changed spec reports its
// generation observed at once (the kubelet publishes a sync's status before
// acting) and acts on that spec SyncDelay later; a change that comes
// meanwhile waits for that sync to end, and the observed generation stays
// the one being synced until then. Changes that came while the worker was
// busy are taken together, as the latest spec. A pod being deleted is
// stopped at once.
func (s *Sim) view(pod *corev1.Pod, rt *podRuntime, now time.Time) (*corev1.Pod, bool) {
	if s.opts.SyncDelay == 0 || pod.DeletionTimestamp != nil {
		rt.generation, rt.sync, rt.actAt = pod.Generation, nil, time.Time{}
		return pod, true
	}
	if rt.sync == nil {
		if rt.generation == 0 || rt.generation == pod.Generation {
			rt.generation = pod.Generation
			return pod, true
		}
		rt.sync, rt.actAt = pod.DeepCopy(), now.Add(s.opts.SyncDelay)
	}
	view := rt.sync.DeepCopy()
	view.Status = pod.Status
	return view, !now.Before(rt.actAt)
}

// nextSync ends the sync the node just acted on, starts the next one when
// the spec changed meanwhile, and returns the pod as the node's status
// then shows it.
func (s *Sim) nextSync(pod *corev1.Pod, rt *podRuntime, now time.Time) *corev1.Pod {
	if rt.sync == nil {
		return pod
	}
	rt.generation, rt.sync, rt.actAt = rt.sync.Generation, nil, time.Time{}
	v, _ := s.view(pod, rt, now)
	return v
}

// deleteTerminated removes a pod being deleted whose containers have
// stopped, with grace period 0 and the pod's UID as precondition, as the
// kubelet's status manager does.
func (s *Sim) deleteTerminated(ctx context.Context, pod *corev1.Pod, rt *podRuntime) error {
	err := s.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete terminated pod %s: %w", klog.KObj(pod), err)
	}
	if rt != nil {
		rt.deleteSent = true
	}
	return nil
}

// runtimeFor returns the runtime of pod, creating it on first sight (or
// restoring it from the status a previous simulator wrote). It returns nil
// for a pod that is being deleted and never ran here: there is nothing to
// stop.
func (s *Sim) runtimeFor(key cache.ObjectName, pod *corev1.Pod, n *simNode, now time.Time) (*podRuntime, error) {
	s.mu.Lock()
	rt := s.runtimes[key]
	s.mu.Unlock()
	if rt != nil && rt.uid == pod.UID {
		return rt, nil
	}
	if rt != nil {
		// A new pod under the name of one that is gone.
		s.ips.release(rt.podIP)
	}
	started := pod.Status.PodIP != "" || len(pod.Status.ContainerStatuses) > 0
	switch {
	case started:
		rt = n.m.restore(pod)
		s.ips.reserve(rt.podIP)
	case pod.DeletionTimestamp != nil:
		return nil, nil
	default:
		rt = newPodRuntime(pod.UID)
		if pod.Spec.HostNetwork {
			// Host-network pods have the node's IP.
			rt.podIP = n.ip
		}
	}
	if rt.podIP == "" {
		ip, err := s.ips.allocate()
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", key, err)
		}
		rt.podIP = ip
	}
	if rt.startTime.IsZero() {
		rt.startTime = now
	}
	s.mu.Lock()
	s.runtimes[key] = rt
	s.mu.Unlock()
	return rt, nil
}

// forget drops the runtime of a pod that is gone and frees its IP.
func (s *Sim) forget(key cache.ObjectName) {
	s.mu.Lock()
	rt := s.runtimes[key]
	delete(s.runtimes, key)
	s.mu.Unlock()
	if rt != nil {
		s.ips.release(rt.podIP)
	}
}

// newContainerID returns a containerd container ID.
func newContainerID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return "containerd://" + hex.EncodeToString(b)
}
