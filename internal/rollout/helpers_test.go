package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

const (
	testNS  = "db"
	setName = "mysql-sidecars"
)

// digest is the fake registry's digest of an image reference.
func digest(image string) string {
	sum := sha256.Sum256([]byte(image))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// imageID is what the kubelet reports for an image pulled from a registry.
func imageID(image string) string {
	return "registry.example/sidecar@" + digest(image)
}

// testSet declares a regular sidecar "exporter" with image and a native
// sidecar "shipper".
func testSet(image string) *v1alpha1.SidecarSet {
	return testutil.SidecarSet(setName).
		Selector(map[string]string{"app": "db"}).
		Container("exporter", image).
		InitContainers(testutil.Container("shipper", "fluent-bit:3.1").RestartAlways().Sidecar("")).
		MinReadySeconds(0).
		Obj()
}

// injectedPod returns a running, ready pod into which the webhook injected
// set: an app container, set's sidecars, and set's record.
func injectedPod(name string, set *v1alpha1.SidecarSet) *corev1.Pod {
	pod := testutil.Pod(testNS, name).Labels(map[string]string{"app": "db"}).Container("mysql", "mysql:8").Obj()
	rec := revision.SetState{
		Revision:      revision.Name(set.Name, &set.Spec),
		Hash:          revision.Hash(&set.Spec),
		ImagelessHash: revision.ImagelessHash(&set.Spec),
	}
	for _, sc := range set.Spec.Containers {
		pod.Spec.Containers = append(pod.Spec.Containers, sc.Container)
		rec.Containers = append(rec.Containers, revision.ContainerState{Name: sc.Name, Image: sc.Image})
	}
	for _, sc := range set.Spec.InitContainers {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, sc.Container)
		rec.Containers = append(rec.Containers, revision.ContainerState{Name: sc.Name, Init: true, Image: sc.Image})
	}
	setRecord(pod, rec)
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, running(c.Name, c.Image))
	}
	for _, c := range pod.Spec.InitContainers {
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, running(c.Name, c.Image))
	}
	setReady(pod, true)
	pod.Status.Phase = corev1.PodRunning
	return pod
}

func running(name, image string) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name:        name,
		Image:       image,
		ImageID:     imageID(image),
		ContainerID: "containerd://" + name + "-0",
		Ready:       true,
		State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
	}
}

func setReady(pod *corev1.Pod, ready bool) {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	if ready {
		// A ready pod's containers are all ready.
		for i := range pod.Status.ContainerStatuses {
			pod.Status.ContainerStatuses[i].Ready = pod.Status.ContainerStatuses[i].State.Running != nil
		}
	}
}

func record(pod *corev1.Pod) revision.SetState {
	state, err := revision.Decode(pod.Annotations)
	if err != nil {
		panic(fmt.Sprintf("test pod %s: %v", pod.Name, err))
	}
	return state[setName]
}

func setRecord(pod *corev1.Pod, rec revision.SetState) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[v1alpha1.AnnotationState] = revision.Encode(revision.State{setName: rec})
}

// applyUpdate does what the controller does with a PodUpdate: Apply, as
// the apiserver stores it, moving the generation on a spec change.
func applyUpdate(pod *corev1.Pod, u PodUpdate) {
	written, _, err := Apply(pod, setName, u, time.Time{})
	if err != nil {
		panic(fmt.Sprintf("test pod %s: %v", pod.Name, err))
	}
	if len(u.Containers) > 0 {
		written.Generation++
	}
	*pod = *written
}

// swap plays the kubelet after a spec change: every container whose spec
// image differs from the one running restarts with it.
func swap(pod *corev1.Pod) bool {
	swapped := false
	for _, lists := range []struct {
		spec     []corev1.Container
		statuses []corev1.ContainerStatus
	}{
		{pod.Spec.Containers, pod.Status.ContainerStatuses},
		{pod.Spec.InitContainers, pod.Status.InitContainerStatuses},
	} {
		for _, c := range lists.spec {
			for i := range lists.statuses {
				if lists.statuses[i].Name == c.Name && lists.statuses[i].Image != c.Image {
					restarts := lists.statuses[i].RestartCount + 1
					lists.statuses[i] = running(c.Name, c.Image)
					lists.statuses[i].Ready = false
					lists.statuses[i].RestartCount = restarts
					lists.statuses[i].ContainerID = fmt.Sprintf("containerd://%s-%d", c.Name, restarts)
					swapped = true
				}
			}
		}
	}
	return swapped
}

func key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: testNS, Name: name}
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("p%02d", i+1)
	}
	return out
}
