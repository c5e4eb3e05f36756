// Package rollout decides, from plain values, how running pods move to a
// SidecarSet's latest revision. It never reads or writes the cluster.
//
//	record      the set's entry of the pod's state annotation: revision, images, last Write
//	write       one patch of sidecar images and the record into a running pod
//	complete    the kubelet runs the written image in a new container (UpdateComplete)
//	disrupting  written while Ready, and not yet Ready past minReadySeconds with every
//	            written sidecar complete: it holds one slot of maxUnavailable and one
//	            disruption of each of its PodDisruptionBudgets
//	back        the last write is complete and the pod released; the set's status.releasedBefore
//	            passes the write once every earlier write is back, and the record reads released
//	again       released, and failed since: counted against maxUnavailable, holding no slot
//	due         not on the latest revision, and the partition lets it move now
//	held        has a write to make that a hold keeps back (holdChain), and says why
//	upgradable  reaches the latest revision in place; otherwise it needs a recreate
//	drifted     someone else changed a sidecar's image in the pod spec
//
// The controller uses it in this order:
//
//	latest := rollout.NewLatest(set); latest.Now = now
//	for each pod, m := rollout.MemberOf(pod, set, canaries, namespace, opts):
//		Managed: pods = append(pods, rollout.Classify(pod, m.Record, latest))
//		Replaced, KeptByBase: the other set of a canary pair's; counted nowhere
//		Corrupt: an event on the pod; counted as unmanaged
//		Unmanaged, Skipped (m.MayAdopt): adopt it when rollout.Adoptable(pod, set)
//		the rest that is not adopted counts in unmanagedPods
//		(m.CountsUnmanaged) or skippedPods (Skipped)
//	plan, err := rollout.Next(rollout.Input{Latest: latest, Pods: pods, ...})
//	for each u in plan.Updates: patch u.Containers' images and this set's
//		entry of the state annotation (u.State) in one write
//	status.Compute(...) with the same pods and plan
//
// Pods are keyed by namespace/name and every list this package returns is in
// a stable order, so two runs over the same pods decide the same thing.
package rollout

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// Latest is the revision running pods move to: its ControllerRevision name,
// both hashes, and the image declared for each sidecar.
type Latest struct {
	// Name is the ControllerRevision name, written into pod records.
	Name string
	// Hash and ImagelessHash are the revision's hashes (see revision.Hash).
	Hash          string
	ImagelessHash string
	// PreviousImagelessHash is the ImagelessHash the previous release
	// computed for the same spec (revision.ImagelessHashKeepingPullPolicy):
	// pods it injected are upgradable in place when their record carries it.
	PreviousImagelessHash string
	// Containers maps every sidecar name, regular and init, to its declared
	// image.
	Containers map[string]string
	// Resources maps every sidecar whose resources the set declares (one
	// without a resourcesPolicy) to them.
	Resources map[string]corev1.ResourceRequirements
	// Hot maps every HotUpgrade sidecar to its hotUpgradeEmptyImage. Such a
	// sidecar runs as two containers (v1alpha1.HotSlots), never under its
	// own name; Containers still maps its name to the declared image.
	Hot map[string]string
	// ResizableFrom names the revisions whose pods reach this one in place
	// with a resize besides the images (revision.ResizableFrom); the caller
	// sets it from the set's history. Without it, a pod reaches this
	// revision in place only when their ImagelessHash is the same.
	ResizableFrom map[string]bool
	// MinReadySeconds is updateStrategy.minReadySeconds, kept in the
	// record of each write (revision.Write).
	MinReadySeconds int32
	// Now is when pods are judged: a pod written while Ready counts as
	// disrupted until it has been Ready for its write's minReadySeconds by
	// then. The caller sets it; zero releases no pod that waits for one.
	Now time.Time
	// ReleasedBefore is the set's status.releasedBefore: a record whose
	// write was made before it is read as released (ReleasedBefore).
	ReleasedBefore time.Time
}

// NewLatest returns the latest revision of set.
func NewLatest(set *v1alpha1.SidecarSet) Latest {
	spec := &set.Spec
	images := make(map[string]string, len(spec.Containers)+len(spec.InitContainers))
	resources := make(map[string]corev1.ResourceRequirements, len(spec.Containers)+len(spec.InitContainers))
	var hot map[string]string
	for _, cs := range [][]v1alpha1.SidecarContainer{spec.Containers, spec.InitContainers} {
		for _, c := range cs {
			images[c.Name] = c.Image
			if c.Hot() {
				if hot == nil {
					hot = map[string]string{}
				}
				// Its slots are not resized (revision.ResourcelessHash).
				hot[c.Name] = c.UpgradeStrategy.HotUpgradeEmptyImage
				continue
			}
			if c.ResourcesPolicy == nil {
				resources[c.Name] = c.Resources
			}
		}
	}
	l := Latest{
		Name:                  revision.Name(set.Name, spec),
		Hash:                  revision.Hash(spec),
		ImagelessHash:         revision.ImagelessHash(spec),
		PreviousImagelessHash: revision.ImagelessHashKeepingPullPolicy(spec),
		Containers:            images,
		Resources:             resources,
		Hot:                   hot,
		MinReadySeconds:       ptr.Deref(spec.UpdateStrategy.MinReadySeconds, v1alpha1.DefaultMinReadySeconds),
	}
	if w := set.Status.ReleasedBefore; w != nil {
		l.ReleasedBefore = w.Time
	}
	return l
}

// Active reports whether pod takes part in a rollout: it is neither being
// deleted nor finished (Succeeded or Failed). Such pods are going away or
// will never run again, so they are neither patched nor counted: counting a
// finished Job pod would keep the rollout from ever completing.
func Active(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil &&
		pod.Status.Phase != corev1.PodSucceeded &&
		pod.Status.Phase != corev1.PodFailed
}
