package rollout

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sidecarset/sidecarset/internal/inject"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// In-place resize: a revision that differs from a pod's only in images and
// in the cpu and memory of sidecars with declared resources reaches it in
// two writes: images and record, as an image update; then the resources,
// through pods/resize. The record goes first, so the pod counts before
// anything changes; a resize that does not follow is owed (ActionResize).

// ContainerResources is what a resize writes into one sidecar.
type ContainerResources struct {
	Name string
	// Init: the container is in spec.initContainers.
	Init bool
	// Resources is the container's whole resources field to be: cpu and
	// memory as declared (a missing request from the limit), the rest as is.
	Resources corev1.ResourceRequirements
}

// resizable are the resources the apiserver lets a resize change.
var resizable = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// resizesOf returns the resizes that bring pod's running sidecars to the
// resources latest declares, or why the apiserver would refuse them: a
// resize that removes a cpu or memory request or limit, or that changes
// the pod's QoS class.
//
// Worked cases, exporter running with requests = limits = cpu 250m, memory
// 64Mi (a Guaranteed pod), declared:
//
//	limits cpu 500m, memory 128Mi             → requests = limits = 500m, 128Mi
//	requests cpu 500m, limits cpu 500m, memory 128Mi → the same
//	limits cpu 500m only                      → refused: removes the memory limit
//	requests cpu 100m, limits cpu 500m, memory 128Mi → refused: Guaranteed to Burstable
//	limits cpu 250m, memory 64Mi              → nothing to resize
func resizesOf(pod *corev1.Pod, containers []Container, latest Latest) ([]ContainerResources, string) {
	var out []ContainerResources
	after := pod.DeepCopy()
	for _, c := range containers {
		declared, ok := latest.Resources[c.Name]
		if !ok || !c.Runs {
			continue
		}
		spec, _, _ := specContainer(pod, c.Name)
		target, err := resizeTarget(spec.Resources, declared)
		if err != "" {
			return nil, fmt.Sprintf("resizing %s would %s, which the apiserver refuses in a running pod", c.Name, err)
		}
		if sameCPUMemory(target, spec.Resources) {
			continue
		}
		out = append(out, ContainerResources{Name: c.Name, Init: c.Init, Resources: target})
		setResources(after, c.Name, c.Init, target)
	}
	if len(out) == 0 {
		return nil, ""
	}
	was, containersDecide := inject.QOSClass(pod)
	if !containersDecide {
		return out, ""
	}
	if pod.Status.QOSClass != "" {
		// The apiserver compares with the class the pod was given.
		was = pod.Status.QOSClass
	}
	if is, _ := inject.QOSClass(after); is != was {
		return nil, fmt.Sprintf("resizing %s would move the pod from QoS class %s to %s, which the apiserver refuses",
			resizeNames(out), was, is)
	}
	return out, ""
}

// resizeTarget returns cur with the cpu and memory of declared, or what
// the resize would do that the apiserver refuses.
func resizeTarget(cur, declared corev1.ResourceRequirements) (corev1.ResourceRequirements, string) {
	out := *cur.DeepCopy()
	for _, name := range resizable {
		lim, hasLim := declared.Limits[name]
		req, hasReq := declared.Requests[name]
		if !hasReq && hasLim {
			req, hasReq = lim, true
		}
		if _, had := cur.Requests[name]; had && !hasReq {
			return corev1.ResourceRequirements{}, fmt.Sprintf("remove its %s request", name)
		}
		if _, had := cur.Limits[name]; had && !hasLim {
			return corev1.ResourceRequirements{}, fmt.Sprintf("remove its %s limit", name)
		}
		out.Requests = with(out.Requests, name, req, hasReq)
		out.Limits = with(out.Limits, name, lim, hasLim)
	}
	return out, ""
}

func with(l corev1.ResourceList, name corev1.ResourceName, q resource.Quantity, set bool) corev1.ResourceList {
	if !set {
		return l
	}
	if l == nil {
		l = corev1.ResourceList{}
	}
	l[name] = q
	return l
}

// sameCPUMemory reports whether a and b have equal cpu and memory quantities.
func sameCPUMemory(a, b corev1.ResourceRequirements) bool {
	for _, name := range resizable {
		if !sameQuantity(a.Requests, b.Requests, name) || !sameQuantity(a.Limits, b.Limits, name) {
			return false
		}
	}
	return true
}

func sameQuantity(a, b corev1.ResourceList, name corev1.ResourceName) bool {
	qa, inA := a[name]
	qb, inB := b[name]
	return inA == inB && qa.Cmp(qb) == 0
}

// runsResources reports whether a container's status shows spec's cpu and
// memory applied; a status without resources says nothing.
func runsResources(spec corev1.ResourceRequirements, st corev1.ContainerStatus) bool {
	if st.Resources == nil {
		return false
	}
	for _, name := range resizable {
		for _, pair := range [][2]corev1.ResourceList{{spec.Requests, st.Resources.Requests}, {spec.Limits, st.Resources.Limits}} {
			want, set := pair[0][name]
			if !set {
				continue
			}
			if got, ok := pair[1][name]; !ok || got.Cmp(want) != 0 {
				return false
			}
		}
	}
	return true
}

// ResizeComplete reports whether the kubelet finished resizing a running
// container to spec: it saw the write's generation (or reports none), has
// no resize pending or in progress, and shows spec's cpu and memory.
func ResizeComplete(pod *corev1.Pod, spec corev1.Container, st corev1.ContainerStatus, write *revision.Write) bool {
	if st.State.Running == nil || !runsResources(spec.Resources, st) {
		return false
	}
	if g := pod.Status.ObservedGeneration; write != nil && g > 0 && g < write.Generation {
		return false
	}
	_, pending := resizeCondition(pod)
	return !pending
}

// resizeCondition returns the pod's PodResizePending or PodResizeInProgress
// condition, whichever the kubelet set.
func resizeCondition(pod *corev1.Pod) (corev1.PodCondition, bool) {
	for _, c := range pod.Status.Conditions {
		if (c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress) && c.Status == corev1.ConditionTrue {
			return c, true
		}
	}
	return corev1.PodCondition{}, false
}

// resizeRefused returns why the kubelet holds pod's resize, when it set
// PodResizePending (Infeasible or Deferred).
func resizeRefused(pod *corev1.Pod) (string, bool) {
	c, ok := resizeCondition(pod)
	if !ok || c.Type != corev1.PodResizePending {
		return "", false
	}
	msg := fmt.Sprintf("the kubelet holds the resize as %s", c.Reason)
	if c.Message != "" {
		msg += ": " + c.Message
	}
	return msg, true
}

// owedResizes returns resizes recorded as written that pod's spec lacks.
func owedResizes(pod *corev1.Pod, rec revision.SetState) []ContainerResources {
	var out []ContainerResources
	for _, rc := range rec.Containers {
		if !rc.Resized || rc.Resources == nil {
			continue
		}
		spec, init, found := specContainer(pod, rc.Name)
		if !found {
			continue
		}
		if target, refused := resizeTarget(spec.Resources, *rc.Resources); refused == "" && !sameCPUMemory(target, spec.Resources) {
			out = append(out, ContainerResources{Name: rc.Name, Init: init, Resources: target})
		}
	}
	return out
}

// declaresResize reports whether latest declares, for the sidecar name,
// the cpu and memory r that a write's resize set. Worked cases, r 500m and
// 128Mi: latest declares limits 500m and 128Mi → true (requests default to
// limits); 250m and 64Mi → false; nothing for name (a resourcesPolicy) →
// false.
func declaresResize(latest Latest, name string, r *corev1.ResourceRequirements) bool {
	declared, ok := latest.Resources[name]
	if !ok || r == nil {
		return false
	}
	target, refused := resizeTarget(*r, declared)
	return refused == "" && sameCPUMemory(target, *r)
}

// cpuMemoryOf returns the cpu and memory of r alone.
func cpuMemoryOf(r corev1.ResourceRequirements) *corev1.ResourceRequirements {
	out := &corev1.ResourceRequirements{}
	for _, name := range resizable {
		if q, ok := r.Requests[name]; ok {
			out.Requests = with(out.Requests, name, q.DeepCopy(), true)
		}
		if q, ok := r.Limits[name]; ok {
			out.Limits = with(out.Limits, name, q.DeepCopy(), true)
		}
	}
	return out
}

// Resize returns a copy of pod with u's resizes, for pods/resize.
func Resize(pod *corev1.Pod, u PodUpdate) *corev1.Pod {
	out := pod.DeepCopy()
	for _, r := range u.Resize {
		setResources(out, r.Name, r.Init, *r.Resources.DeepCopy())
	}
	return out
}

func setResources(pod *corev1.Pod, name string, init bool, r corev1.ResourceRequirements) {
	list := pod.Spec.Containers
	if init {
		list = pod.Spec.InitContainers
	}
	for i := range list {
		if list[i].Name == name {
			list[i].Resources = r
		}
	}
}

func resizeNames(rs []ContainerResources) string {
	s := ""
	for i, r := range rs {
		if i > 0 {
			s += ", "
		}
		s += r.Name
	}
	return s
}
