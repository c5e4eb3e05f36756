package rollout

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecarset/sidecarset/internal/revision"
)

// Pod is a pod that carries a SidecarSet's record, judged against the latest
// revision. Classify builds it; Next and status.Compute read it.
type Pod struct {
	Key types.NamespacedName
	// Labels are the pod's labels, for updateStrategy.selector. Shared with
	// the pod, never modified.
	Labels map[string]string
	// Record is the set's entry of the pod's state annotation.
	Record revision.SetState
	// Containers are the recorded sidecars found in the pod spec, in record
	// order.
	Containers []Container

	// Updated: the record's Hash is the latest one, i.e. the latest revision
	// is written into the pod spec (the kubelet may not have caught up).
	Updated bool
	// Updating: some container the controller wrote in place (it recorded a
	// PreviousImageID) is not complete yet. Holds for updates and drift
	// reverts alike, on any revision.
	Updating bool
	// Upgradable: the pod differs from the latest revision at most in
	// images: the record's ImagelessHash is the latest one and every latest
	// sidecar is both recorded and present in the pod spec. A pod that is
	// not upgradable needs a recreate.
	Upgradable bool
	// Drifted names, in record order, the containers whose pod spec image
	// differs from the one recorded as last written: someone edited them.
	Drifted []string
	// PodReady: the pod condition Ready is True.
	PodReady bool
	// Ready: PodReady and every sidecar complete (UpdateComplete), i.e.
	// healthy and running what was written.
	Ready bool
}

// Container is one recorded sidecar of a Pod.
type Container struct {
	Name string
	// Init: the container is in spec.initContainers (a native sidecar).
	Init bool
	// Image is the image in the pod spec now.
	Image string
	// ImageID is the running imageID from the pod status, "" without one.
	ImageID string
	// Recorded is the container's record.
	Recorded revision.ContainerState
	// Complete is UpdateComplete(Recorded.Image, Recorded, status).
	Complete bool
}

// Unavailable reports whether p counts against maxUnavailable: an in-place
// write is still pending, or the pod is on the latest revision but not
// ready. Such a pod is either being disrupted by the rollout or may have been
// broken by the latest revision, and the rollout waits for it.
func (p Pod) Unavailable() bool {
	return p.Updating || (p.Updated && !p.Ready)
}

// Classify judges pod, which carries rec as its record of the SidecarSet
// whose latest revision is latest. Completion is judged against the image
// last written (rec's), not the latest declared one: a pod on an older
// revision is consistent when it runs what its own revision says.
//
// The caller passes only pods for which Active holds.
func Classify(pod *corev1.Pod, rec revision.SetState, latest Latest) Pod {
	p := Pod{
		Key:      types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name},
		Labels:   pod.Labels,
		Record:   rec,
		Updated:  rec.Hash == latest.Hash,
		PodReady: podReady(pod),
	}
	complete := true
	for _, rc := range rec.Containers {
		spec, init, found := specContainer(pod, rc.Name)
		if !found {
			// Containers cannot be removed from a pod; only a record edited
			// by hand names one that is not there. Nothing can be written to
			// it, and the pod is not upgradable below.
			continue
		}
		st := containerStatus(pod, rc.Name, init)
		c := Container{
			Name:     rc.Name,
			Init:     init,
			Image:    spec.Image,
			ImageID:  st.ImageID,
			Recorded: rc,
			Complete: UpdateComplete(rc.Image, rc, st),
		}
		p.Containers = append(p.Containers, c)
		if !c.Complete {
			complete = false
			if rc.PreviousImageID != "" {
				p.Updating = true
			}
		}
		if c.Image != rc.Image {
			p.Drifted = append(p.Drifted, c.Name)
		}
	}
	p.Upgradable = rec.ImagelessHash == latest.ImagelessHash
	for name := range latest.Containers {
		if _, ok := p.container(name); !ok {
			p.Upgradable = false
		}
	}
	p.Ready = p.PodReady && complete
	return p
}

func (p Pod) container(name string) (Container, bool) {
	for _, c := range p.Containers {
		if c.Name == name {
			return c, true
		}
	}
	return Container{}, false
}

// specContainer finds a container by name among the pod's containers and
// init containers; names are unique across both.
func specContainer(pod *corev1.Pod, name string) (corev1.Container, bool, bool) {
	if c, ok := byName(pod.Spec.Containers, name); ok {
		return c, false, true
	}
	if c, ok := byName(pod.Spec.InitContainers, name); ok {
		return c, true, true
	}
	return corev1.Container{}, false, false
}

// containerStatus returns the status of the named container, or a zero
// status (not running) when the kubelet has not reported one yet.
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
