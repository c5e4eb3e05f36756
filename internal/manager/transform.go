package manager

import (
	"encoding/binary"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/status"
)

// slimPod keeps, of a managed pod in the cache, only what the controller
// reads, which is what lets one manager hold tens of thousands of managed
// pods:
//   - identity, labels (selectors and budgets match them), the generation and
//     this project's annotations (the per-set records too);
//   - the containers the records name, with name, image, restart policy and
//     cpu and memory, and their statuses with name, image, imageID,
//     containerID, the cpu and memory applied, whether the container runs
//     (and since when) or why it waits, and whether it is ready;
//   - of the other containers, in a pod with records, the name and the cpu
//     and memory alone: whether a resize would change the pod's QoS class
//     is judged over every container;
//   - pod-level resources, when set, the QoS class and
//     terminationGracePeriodSeconds;
//   - phase, the generation the kubelet observed (completion rests on it),
//     Ready's status and last transition, the resize conditions and this
//     project's own pod conditions in full.
//
// Everything else is dropped, and what many pods repeat is shared between
// them: strings (namespace, node, label keys and values, images, image IDs)
// and whole label and annotation maps (podStrings, podMaps).
//
// Dropping fields is safe for writes: every pod write is a strategic merge
// patch computed against the cached object (or a JSON merge patch of the
// annotations), so a field or a list item (merged by name or type) absent
// from both sides never appears in it and the apiserver keeps it. Adoption,
// which compares whole containers, reads the pod from the apiserver.
// slimNode keeps of a Node its name, resourceVersion and Ready condition:
// a pod on a node that is not Ready is not written (rollout.Pod.NodeLost).
func slimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Node{
		TypeMeta:   node.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: node.Name, UID: node.UID, ResourceVersion: node.ResourceVersion},
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			slim.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason}}
		}
	}
	return slim, nil
}

func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	keep := recordedContainers(pod.Annotations)
	slim := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         intern(pod.Namespace),
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Generation:        pod.Generation,
			CreationTimestamp: pod.CreationTimestamp,
			DeletionTimestamp: pod.DeletionTimestamp,
			Labels:            internMap(pod.Labels, nil),
			Annotations:       internMap(pod.Annotations, ownAnnotation),
		},
		Spec: corev1.PodSpec{
			NodeName:                      intern(pod.Spec.NodeName),
			TerminationGracePeriodSeconds: pod.Spec.TerminationGracePeriodSeconds,
			InitContainers:                slimContainers(pod.Spec.InitContainers, keep),
			Containers:                    slimContainers(pod.Spec.Containers, keep),
		},
		Status: corev1.PodStatus{
			QOSClass:              corev1.PodQOSClass(intern(string(pod.Status.QOSClass))),
			ObservedGeneration:    pod.Status.ObservedGeneration,
			Phase:                 pod.Status.Phase,
			Conditions:            slimConditions(pod.Status.Conditions),
			InitContainerStatuses: slimStatuses(pod.Status.InitContainerStatuses, keep),
			ContainerStatuses:     slimStatuses(pod.Status.ContainerStatuses, keep),
		},
	}
	if r := pod.Spec.Resources; r != nil {
		slim.Spec.Resources = r.DeepCopy()
	}
	return slim, nil
}

// ownAnnotation reports whether the annotation key k is this project's: the
// records and the injection list, opt-out and skip marks. The policy path
// writes each set's record under its own key (revision.PerSetPrefix).
func ownAnnotation(k string) bool {
	return strings.HasPrefix(k, "sidecarset.dev/") || strings.HasPrefix(k, revision.PerSetPrefix)
}

// recordedContainers returns the names of the containers the pod's records
// name, or nil (keep every container) when a record does not decode: the
// controller then judges the pod by what it can read, which must not lose
// the containers of the unreadable entry.
func recordedContainers(annotations map[string]string) map[string]bool {
	state, err := revision.Decode(annotations)
	if err != nil {
		return nil
	}
	names := map[string]bool{}
	for _, rec := range state {
		for _, c := range rec.Containers {
			names[c.Name] = true
		}
	}
	return names
}

// internMap returns the entries of in whose key passes keep (every entry
// when keep is nil), nil when none is left. Pods of one workload at one
// revision carry the same labels and records, so equal results are one map
// shared between them (podMaps), of shared strings. Nothing writes to a
// cached object (the controller copies one before changing it), so a shared
// map is as safe as one of its own.
func internMap(in map[string]string, keep func(string) bool) map[string]string {
	keys := make([]string, 0, len(in))
	for k := range in {
		if keep == nil || keep(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	// Each key and value after its length: no two maps write the same id,
	// whatever bytes their values hold.
	var id []byte
	for _, k := range keys {
		id = binary.AppendUvarint(id, uint64(len(k)))
		id = append(id, k...)
		id = binary.AppendUvarint(id, uint64(len(in[k])))
		id = append(id, in[k]...)
	}
	return podMaps.get(string(id), func(string) map[string]string {
		out := make(map[string]string, len(keys))
		for _, k := range keys {
			out[intern(k)] = intern(in[k])
		}
		return out
	})
}

func slimContainers(in []corev1.Container, keep map[string]bool) []corev1.Container {
	var out []corev1.Container
	for _, c := range in {
		switch {
		case keep == nil || keep[c.Name]:
			// RestartPolicy tells a native sidecar from an init container.
			out = append(out, corev1.Container{
				Name: intern(c.Name), Image: intern(c.Image), RestartPolicy: c.RestartPolicy,
				Resources: slimResources(c.Resources),
			})
		case len(keep) > 0:
			out = append(out, corev1.Container{Name: intern(c.Name), Resources: slimResources(c.Resources)})
		}
	}
	return out
}

// slimResources returns the cpu and memory requests and limits of r, the
// lists shared between the pods that have the same (podResources).
func slimResources(r corev1.ResourceRequirements) corev1.ResourceRequirements {
	var id []byte
	var out corev1.ResourceRequirements
	for i, l := range []corev1.ResourceList{r.Requests, r.Limits} {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := l[name]; ok {
				v := q.String()
				id = binary.AppendUvarint(id, uint64(i))
				id = append(id, name...)
				id = binary.AppendUvarint(id, uint64(len(v)))
				id = append(id, v...)
			}
		}
	}
	if len(id) == 0 {
		return out
	}
	return podResources.get(string(id), func(string) corev1.ResourceRequirements {
		keep := func(l corev1.ResourceList) corev1.ResourceList {
			var out corev1.ResourceList
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if q, ok := l[name]; ok {
					if out == nil {
						out = corev1.ResourceList{}
					}
					out[name] = q.DeepCopy()
				}
			}
			return out
		}
		return corev1.ResourceRequirements{Requests: keep(r.Requests), Limits: keep(r.Limits)}
	})
}

func slimStatuses(in []corev1.ContainerStatus, keep map[string]bool) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, s := range in {
		if keep != nil && !keep[s.Name] {
			continue
		}
		var state corev1.ContainerState
		switch {
		case s.State.Running != nil:
			// Its start tells when a pod came back from a write
			// (rollout.Pod.BackSince).
			state.Running = &corev1.ContainerStateRunning{StartedAt: s.State.Running.StartedAt}
		case s.State.Waiting != nil:
			// The reason tells a start that failed from one under way.
			state.Waiting = &corev1.ContainerStateWaiting{Reason: intern(s.State.Waiting.Reason)}
		}
		cs := corev1.ContainerStatus{
			Name:        intern(s.Name),
			Image:       intern(s.Image),
			ImageID:     intern(s.ImageID),
			ContainerID: s.ContainerID,
			State:       state,
			// A hot upgrade's next slot has taken over once ready.
			Ready: s.Ready,
		}
		if s.Resources != nil {
			// Shared with the pods that run the same: never written.
			r := slimResources(*s.Resources)
			cs.Resources = &r
		}
		out = append(out, cs)
	}
	return out
}

// slimConditions keeps Ready's type, status and transition time, which is
// all the controller reads of it (the time tells when a pod came back from
// a write), and this project's conditions whole: they are rewritten by a
// patch computed against the cached ones, and keep their transition time.
func slimConditions(in []corev1.PodCondition) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range in {
		switch c.Type {
		case corev1.PodReady:
			out = append(out, corev1.PodCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
		case corev1.PodResizePending, corev1.PodResizeInProgress:
			out = append(out, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: intern(c.Reason), Message: c.Message})
		case v1alpha1.PodConditionUpgradable, status.PodConditionDrifted:
			c.Reason = intern(c.Reason)
			c.Message = intern(c.Message)
			out = append(out, c)
		}
	}
	return out
}

// podStrings and podMaps share the strings and the label and annotation
// maps cached pods repeat.
var (
	podStrings = newInterner[string](1 << 13)
	podMaps    = newInterner[map[string]string](1 << 10)
	// podResources shares the cpu and memory lists of containers.
	podResources = newInterner[corev1.ResourceRequirements](1 << 10)
)

// interner hands out one value for each key it has seen. It forgets them
// all once it holds limit, so that keys seen once each (a pod-name label, a
// record in flight) cannot grow it without bound; the values already handed
// out stay valid and shared. The unique package would forget a string as
// soon as no Handle to it is held, and a cached string holds none, so it
// would share strings only between two garbage collections.
type interner[V any] struct {
	mu    sync.Mutex
	limit int
	seen  map[string]V
}

func newInterner[V any](limit int) *interner[V] {
	return &interner[V]{limit: limit, seen: map[string]V{}}
}

// get returns the value kept for key, or keeps and returns build(k), k a
// copy of key (so that a key cut from a larger string does not keep it).
func (in *interner[V]) get(key string, build func(k string) V) V {
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.seen[key]; ok {
		return v
	}
	if len(in.seen) >= in.limit {
		in.seen = map[string]V{}
	}
	key = strings.Clone(key)
	v := build(key)
	in.seen[key] = v
	return v
}

// intern returns the shared copy of s.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return podStrings.get(s, func(k string) string { return k })
}
