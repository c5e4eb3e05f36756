// Package rollout decides, from plain values, how running pods move to a
// SidecarSet's latest revision. It never reads or writes the cluster.
//
//	record      the set's entry of the pod's state annotation: revision, images, last Write
//	write       one patch of sidecar images and the record into a running pod
//	complete    the kubelet runs the written image in a new container (UpdateComplete)
//	disrupting  written while Ready and not yet Ready past minReadySeconds with every written
//	            sidecar complete: holds a slot of maxUnavailable and of each PodDisruptionBudget
//	back        the last write is complete, and the pod Ready past its minReadySeconds
//	released    status.releasedBefore passed the write, once every earlier write was back
//	again       released, and failed since: counted against maxUnavailable, holding no slot
//	due         not on the latest revision, and the partition lets it move now
//	held        has a write to make that a hold keeps back (holdChain), and says why
//	upgradable  reaches the latest revision in place; otherwise it needs a recreate
//	drifted     someone else changed a sidecar's image in the pod spec
//
// The controller classifies each Managed pod (MemberOf, Classify), plans
// with Next, and makes each update as one write (Apply). Every list
// returned is in a stable order, so two runs over the same pods decide the
// same thing.
package rollout

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// Latest is the revision running pods move to.
type Latest struct {
	// Name is the ControllerRevision name, written into pod records.
	Name string
	// Hash and ImagelessHash are the revision's hashes (revision.Hash).
	Hash          string
	ImagelessHash string
	// PreviousImagelessHash is the ImagelessHash the previous release computed
	// for the same spec: pods whose record carries it are upgradable in place.
	PreviousImagelessHash string
	// Containers maps every sidecar, regular and init, to its declared image.
	Containers map[string]string
	// Resources maps each sidecar without a resourcesPolicy to its resources.
	Resources map[string]corev1.ResourceRequirements
	// Hot maps each HotUpgrade sidecar to its hotUpgradeEmptyImage; such a
	// sidecar runs as two slots (v1alpha1.HotSlots), never under its own name.
	Hot map[string]string
	// ResizableFrom names the revisions whose pods reach this one in place
	// with a resize (revision.ResizableFrom); others need the same
	// ImagelessHash.
	ResizableFrom map[string]bool
	// MinReadySeconds is updateStrategy.minReadySeconds, kept in each write.
	MinReadySeconds int32
	// Now is when pods are judged; zero releases none waiting minReadySeconds.
	Now time.Time
	// ReleasedBefore is status.releasedBefore: writes before it read released.
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

// Active reports whether pod takes part in a rollout: neither being deleted
// nor finished (Succeeded or Failed). A finished Job pod, counted, would
// keep the rollout from ever completing.
func Active(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil &&
		pod.Status.Phase != corev1.PodSucceeded &&
		pod.Status.Phase != corev1.PodFailed
}
