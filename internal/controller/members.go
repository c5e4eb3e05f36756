package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/adopt"
	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/rollout"
)

type matched struct {
	pod *corev1.Pod
	rec revision.SetState
}

// matchedPods returns the set's Managed pods (rollout.MemberOf), from the
// cache. A pod whose record of the set is corrupt is told in an event; it
// is counted with the unmanaged pods.
func (r *Reconciler) matchedPods(ctx context.Context, set *v1alpha1.SidecarSet) ([]matched, error) {
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	managed, err := labels.NewRequirement(v1alpha1.LabelManaged, selection.Equals, []string{"true"})
	if err != nil {
		return nil, err
	}
	var list corev1.PodList
	// The cached pods themselves, not copies: a rollout over thousands of
	// pods would otherwise copy them all on every reconcile. Nothing below
	// modifies them; every write works on a DeepCopy.
	if err := r.Client.List(ctx, &list, client.MatchingLabelsSelector{Selector: selector.Add(*managed)},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list managed pods: %w", err)
	}
	canaries, err := r.canaries(ctx, set)
	if err != nil {
		return nil, err
	}
	namespaces := map[string]*corev1.Namespace{}
	var out []matched
	for i := range list.Items {
		pod := &list.Items[i]
		ns, err := r.namespace(ctx, namespaces, pod.Namespace)
		if err != nil {
			return nil, err
		}
		m := rollout.MemberOf(pod, set, canaries, ns, r.injectOptions())
		switch m.Membership {
		case rollout.Managed:
			out = append(out, matched{pod: pod, rec: m.Record})
		case rollout.Corrupt:
			r.Recorder.Eventf(pod, set, corev1.EventTypeWarning, ReasonCorruptState, "Decode",
				"pod is treated as not injected by %s: %v", set.Name, m.Err)
		}
	}
	return out, nil
}

// canaries returns the canaries of set (inject.CanaryOf), from the cache:
// the pods they selected are theirs, not set's.
func (r *Reconciler) canaries(ctx context.Context, set *v1alpha1.SidecarSet) ([]*v1alpha1.SidecarSet, error) {
	var list v1alpha1.SidecarSetList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list SidecarSets for the canaries of %s: %w", set.Name, err)
	}
	var out []*v1alpha1.SidecarSet
	for i := range list.Items {
		if inject.CanaryOf(&list.Items[i]) == set.Name {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

func (r *Reconciler) injectOptions() inject.Options {
	return inject.Options{ManagerNamespace: r.Namespace, Cache: &r.injectCache}
}

func (r *Reconciler) namespace(ctx context.Context, seen map[string]*corev1.Namespace, name string) (*corev1.Namespace, error) {
	if ns, ok := seen[name]; ok {
		return ns, nil
	}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get namespace %s: %w", name, err)
		}
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	seen[name] = ns
	return ns, nil
}

// unmanagedCounts are a set's matched pods that it does not manage, by the
// status field they count in (rollout.Membership).
type unmanagedCounts struct {
	Unmanaged, Skipped int32
}

func (c *unmanagedCounts) add(m rollout.Membership, n int32) {
	switch {
	case m == rollout.Skipped:
		c.Skipped += n
	case m.CountsUnmanaged():
		c.Unmanaged += n
	}
}

// unmanagedCount is the last count of one set's unmanaged pods.
type unmanagedCount struct {
	generation int64
	counts     unmanagedCounts
	at         time.Time
	// notAdoptable holds, by UID, the pods that adoption found not
	// adoptable, with the resourceVersion they were judged at: until the
	// pod changes, the next recount need not read it again.
	notAdoptable map[types.UID]string
	// failed holds the pods whose adoption failed, with where they are
	// counted meanwhile; each reconcile retries them, and only them.
	failed map[types.NamespacedName]rollout.Membership
}

// countUnmanaged counts the pods that match the set but that it does not
// manage (rollout.MemberOf: Unmanaged, OptedOut and Corrupt in Unmanaged,
// Skipped in Skipped), recounting at most every UnmanagedRecount (or when
// the spec changed). With adoptionPolicy SameName it adopts the ones it can
// first.
//
// A recount costs one list request per page of matching pods. Adoption
// needs a pod's containers, which a metadata list lacks, so each candidate
// is read once; one found not adoptable is not read again until its
// resourceVersion (or the set's generation) changes. A pod whose adoption
// failed keeps the count valid: it is counted where it was found and
// retried alone at the next reconcile.
func (r *Reconciler) countUnmanaged(ctx context.Context, set *v1alpha1.SidecarSet) (unmanagedCounts, error) {
	r.mu.Lock()
	m := r.memoryOf(set.Name)
	last, ok := m.unmanaged, m.hasUnmanaged
	r.mu.Unlock()
	now := r.Clock.Now()
	if ok && last.generation == set.Generation && now.Sub(last.at) < UnmanagedRecount {
		if len(last.failed) == 0 {
			return last.counts, nil
		}
		next, err := r.retryAdoption(ctx, set, last)
		r.remember(set.Name, next)
		return next.counts, err
	}
	if !ok || last.generation != set.Generation {
		// The spec may have made pods adoptable.
		last.notAdoptable = nil
	}
	next, err := r.recount(ctx, set, last.notAdoptable)
	if err != nil {
		return last.counts, err
	}
	next.at = now
	r.remember(set.Name, next)
	if len(next.failed) > 0 {
		return next.counts, fmt.Errorf("adopt %d pod(s); retrying them", len(next.failed))
	}
	return next.counts, nil
}

func (r *Reconciler) remember(name string, c unmanagedCount) {
	r.mu.Lock()
	m := r.memoryOf(name)
	m.unmanaged, m.hasUnmanaged = c, true
	r.mu.Unlock()
}

// recount lists the pods that match the set and sorts them by membership,
// adopting what it can. judged is the previous recount's notAdoptable.
func (r *Reconciler) recount(ctx context.Context, set *v1alpha1.SidecarSet, judged map[types.UID]string) (unmanagedCount, error) {
	next := unmanagedCount{
		generation:   set.Generation,
		notAdoptable: map[types.UID]string{},
		failed:       map[types.NamespacedName]rollout.Membership{},
	}
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return next, fmt.Errorf("spec.selector: %w", err)
	}
	canaries, err := r.canaries(ctx, set)
	if err != nil {
		return next, err
	}
	log := ctrl.LoggerFrom(ctx)
	namespaces := map[string]*corev1.Namespace{}
	// Metadata only, filtered by the set's selector on the apiserver, a page
	// at a time: the cluster's other pods are never transferred, the
	// unmanaged ones never cached, and memory stays bounded by a page however
	// many there are.
	for page := ""; ; {
		var list metav1.PartialObjectMetadataList
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := r.APIReader.List(ctx, &list, client.MatchingLabelsSelector{Selector: selector},
			client.MatchingFieldsSelector{Selector: rollout.NotFinished},
			client.Limit(unmanagedPageSize), client.Continue(page)); err != nil {
			return next, fmt.Errorf("list pods matching %s: %w", set.Name, err)
		}
		for i := range list.Items {
			meta := &list.Items[i]
			ns, err := r.namespace(ctx, namespaces, meta.Namespace)
			if err != nil {
				return next, err
			}
			m := rollout.MemberOf(&corev1.Pod{ObjectMeta: meta.ObjectMeta}, set, canaries, ns, r.injectOptions()).Membership
			if set.Spec.AdoptionPolicy == v1alpha1.AdoptSameName && m.MayAdopt() {
				if rv, ok := judged[meta.UID]; ok && rv == meta.ResourceVersion {
					next.notAdoptable[meta.UID] = rv
				} else {
					key := types.NamespacedName{Namespace: meta.Namespace, Name: meta.Name}
					res, err := r.adopt(ctx, set, key, ns)
					switch {
					case err != nil:
						log.Error(err, "adopt pod; retrying at the next reconcile", "pod", key)
						next.failed[key] = m
					case res.adopted:
						continue
					case res.resourceVersion != "":
						next.notAdoptable[res.uid] = res.resourceVersion
					}
				}
			}
			next.counts.add(m, 1)
		}
		if page = list.Continue; page == "" {
			break
		}
	}
	return next, nil
}

// retryAdoption tries again the pods whose adoption failed, and moves the
// adopted ones out of the count.
func (r *Reconciler) retryAdoption(ctx context.Context, set *v1alpha1.SidecarSet, last unmanagedCount) (unmanagedCount, error) {
	next := last
	next.failed = map[types.NamespacedName]rollout.Membership{}
	namespaces := map[string]*corev1.Namespace{}
	var errs []error
	for key, m := range last.failed {
		ns, err := r.namespace(ctx, namespaces, key.Namespace)
		if err == nil {
			var res adoption
			if res, err = r.adopt(ctx, set, key, ns); err == nil {
				if res.adopted {
					next.counts.add(m, -1)
				} else if res.resourceVersion != "" {
					next.notAdoptable[res.uid] = res.resourceVersion
				}
				continue
			}
		}
		next.failed[key] = m
		errs = append(errs, err)
	}
	return next, errors.Join(errs...)
}

// adoption is what adopt did with a pod: adopted it, or judged it not
// adoptable at resourceVersion (empty when the pod is gone).
type adoption struct {
	adopted         bool
	uid             types.UID
	resourceVersion string
}

// adopt gives a pod without records the set's record when its containers
// already equal the declared ones except the image, so it is managed from
// now on without a restart.
func (r *Reconciler) adopt(ctx context.Context, set *v1alpha1.SidecarSet, key types.NamespacedName, ns *corev1.Namespace) (adoption, error) {
	var res adoption
	var adopted *corev1.Pod
	canaries, err := r.canaries(ctx, set)
	if err != nil {
		return res, err
	}
	// A new pod's status changes often while its containers start; a
	// conflict means only that, so read it again and retry now rather than
	// wait for the next recount.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		res, adopted = adoption{}, nil
		pod := &corev1.Pod{}
		if err := r.APIReader.Get(ctx, key, pod); err != nil {
			return client.IgnoreNotFound(err)
		}
		res.uid, res.resourceVersion = pod.UID, pod.ResourceVersion
		if !rollout.MemberOf(pod, set, canaries, ns, r.injectOptions()).MayAdopt() || !adopt.Adoptable(pod, set) {
			return nil
		}
		state, err := revision.Put(pod.Annotations, set.Name, adopt.AdoptionRecord(pod, set))
		if err != nil {
			// A record annotation that does not decode stays as it is until
			// the pod changes: judged not adoptable at this version.
			ctrl.LoggerFrom(ctx).Info("pod not adopted: its records do not decode", "pod", key, "err", err.Error())
			return nil
		}
		next := pod.DeepCopy()
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		if next.Labels == nil {
			next.Labels = map[string]string{}
		}
		next.Annotations[v1alpha1.AnnotationState] = state
		revision.DropPerSet(next.Annotations)
		next.Annotations[v1alpha1.AnnotationInjected] = withName(pod.Annotations[v1alpha1.AnnotationInjected], set.Name)
		next.Labels[v1alpha1.LabelManaged] = "true"
		if err := r.Client.Patch(ctx, next, client.MergeFromWithOptions(pod, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		adopted = next
		return nil
	})
	if err != nil {
		return adoption{}, fmt.Errorf("adopt %s: %w", key, err)
	}
	if adopted == nil {
		return res, nil
	}
	r.Recorder.Eventf(adopted, set, corev1.EventTypeNormal, ReasonAdopted, "Adopt",
		"SidecarSet %s manages this pod's sidecars from now on (adoptionPolicy SameName); nothing restarted", set.Name)
	return adoption{adopted: true}, nil
}

// withName adds name to a sorted, comma-separated list of names.
func withName(list, name string) string {
	var names []string
	if list != "" {
		names = strings.Split(list, ",")
	}
	if !slices.Contains(names, name) {
		names = append(names, name)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}
