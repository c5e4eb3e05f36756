package rollout

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/internal/revision"
)

func TestUpdateComplete(t *testing.T) {
	aaa := digest("exporter:v1")
	bbb := digest("exporter:v2")
	waiting := func(reason string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
	}
	run := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	const c1, c2, c3 = "containerd://c1", "containerd://c2", "containerd://c3"
	// written returns the record of a write of image over c1, which was
	// started from x:v1.
	written := func(image string) revision.ContainerState {
		return revision.ContainerState{Name: "exporter", Image: image,
			PreviousContainerID: c1, PreviousImage: "x:v1", PreviousImageID: "r/x@" + aaa}
	}
	write := &revision.Write{WasReady: true, Generation: 3}
	status := func(id, imageID string) corev1.ContainerStatus {
		return corev1.ContainerStatus{ContainerID: id, ImageID: imageID, State: run}
	}

	tests := []struct {
		name     string
		recorded revision.ContainerState
		write    *revision.Write
		status   corev1.ContainerStatus
		observed int64
		want     bool
	}{
		{name: "new container", recorded: written("x:v2"), write: write, status: status(c2, "r/x@"+bbb), want: true},
		{
			// The status may show the new tag while the container still
			// runs what ran before the write.
			name: "old container, new tag shown", recorded: written("x:v2"), write: write,
			status: corev1.ContainerStatus{ContainerID: c1, Image: "x:v2", ImageID: "r/x@" + aaa, State: run},
			want:   false,
		},
		{
			// A new tag of the same content: the imageID cannot change, the
			// new container proves the swap.
			name: "new container, same content", recorded: written("x:v1.0.1"), write: write, status: status(c2, "r/x@"+aaa), want: true,
		},
		{
			// Defect: pinning the running tag to its digest restarts the
			// container; the digest shown by the old one proves nothing.
			name: "digest pin, old container shows the digest", recorded: written("x@" + aaa), write: write,
			status: status(c1, "r/x@"+aaa), want: false,
		},
		{name: "digest pin, new container", recorded: written("x@" + aaa), write: write, status: status(c2, "r/x@"+aaa), want: true},
		{
			// Defect: undo after a failed pull writes back the image whose
			// imageID was recorded; a new container of it is the swap.
			name: "undo, new container of the previous content", recorded: written("x:v1"), write: write,
			status: status(c3, "r/x@"+aaa), want: true,
		},
		{
			name: "undo, local import imageID of the previous content", recorded: written("x:v1"), write: write,
			status: status(c3, aaa), want: true,
		},
		{
			// A→B→A: the kubelet ran B in between and is about to replace it.
			name: "undo, container of the image in between", recorded: written("x:v1"), write: write,
			status: status(c2, "r/x@"+bbb), want: false,
		},
		{
			// A→B→A before the kubelet synced: nothing to restart, once it
			// has seen the spec.
			name: "undo, the kubelet never acted", recorded: written("x:v1"), write: write,
			status: status(c1, "r/x@"+aaa), observed: 3, want: true,
		},
		{
			name: "undo, the kubelet has not seen it yet", recorded: written("x:v1"), write: write,
			status: status(c1, "r/x@"+aaa), observed: 2, want: false,
		},
		{
			// Without observedGeneration (a kubelet that does not report
			// it) the same container proves nothing.
			name: "undo, no observedGeneration", recorded: written("x:v1"), write: write,
			status: status(c1, "r/x@"+aaa), want: false,
		},
		{
			name: "kubelet has not seen the write's generation", recorded: written("x:v2"), write: write,
			status: status(c2, "r/x@"+bbb), observed: 2, want: false,
		},
		{
			name: "kubelet has seen the write's generation", recorded: written("x:v2"), write: write,
			status: status(c2, "r/x@"+bbb), observed: 3, want: true,
		},
		{
			name: "pull fails", recorded: written("x:v2"), write: write,
			status: corev1.ContainerStatus{ImageID: "r/x@" + aaa, State: waiting("ErrImagePull")}, want: false,
		},
		{
			name: "crash loop", recorded: written("x:v2"), write: write,
			status: corev1.ContainerStatus{ContainerID: c2, ImageID: "r/x@" + bbb, State: waiting("CrashLoopBackOff")}, want: false,
		},
		{
			// The previous container is unknown (the pod ran none): any
			// container that runs was created from the written spec.
			name: "written into a pod that ran none", write: write,
			recorded: revision.ContainerState{Name: "exporter", Image: "x:v2", PreviousImageID: "r/x@" + aaa, PreviousContainerID: ""},
			status:   status(c2, "r/x@"+aaa),
			want:     true,
		},
		{
			// The kubelet was creating a container from the spec before the
			// write, and shows it at the write's generation, about to
			// replace it.
			name: "written while none ran, container of the spec before", write: write, observed: 3,
			recorded: revision.ContainerState{Name: "exporter", Image: "x:v2", NoneRan: true},
			status:   corev1.ContainerStatus{ContainerID: c1, Image: "x:v1", ImageID: "r/x@" + aaa, State: run},
			want:     false,
		},
		{
			name: "written while none ran, container of the written image", write: write, observed: 3,
			recorded: revision.ContainerState{Name: "exporter", Image: "x:v2", NoneRan: true},
			status:   corev1.ContainerStatus{ContainerID: c2, Image: "docker.io/library/x:v2", ImageID: "r/x@" + bbb, State: run},
			want:     true,
		},
		{
			// A tag of the same content, which the runtime names by the
			// tag it knew: a container after the first is the write's.
			name: "written while none ran, a later container shown by another tag", write: write, observed: 3,
			recorded: revision.ContainerState{Name: "exporter", Image: "x:v2", NoneRan: true},
			status:   corev1.ContainerStatus{ContainerID: c2, Image: "x:v1", ImageID: "r/x@" + aaa, RestartCount: 1, State: run},
			want:     true,
		},
		{
			// Written x:v3 while the kubelet had not finished x:v2 (it
			// failed to pull, say): it may start x:v2's container first,
			// and show it at x:v3's generation, just before it replaces it
			// (found by TestModel -rapid.seed=12650358155861014381).
			name: "written over a write in flight, the container of the image in between", write: write, observed: 3,
			recorded: revision.ContainerState{Name: "exporter", Image: "x:v3", PreviousContainerID: c1, PreviousImageID: "r/x@" + aaa, Between: []string{"x:v2"}},
			status:   corev1.ContainerStatus{ContainerID: c2, Image: "x:v2", ImageID: "r/x@" + bbb, State: run},
			want:     false,
		},
		{
			name: "written over a write in flight, the container of the written image", write: write, observed: 3,
			recorded: revision.ContainerState{Name: "exporter", Image: "x:v3", PreviousContainerID: c1, PreviousImageID: "r/x@" + aaa, Between: []string{"x:v2"}},
			status:   corev1.ContainerStatus{ContainerID: c3, Image: "docker.io/library/x:v3", ImageID: "r/x@" + digest("exporter:v3"), RestartCount: 2, State: run},
			want:     true,
		},
		{
			// containerd names a container by the first tag its content
			// has on the node.
			name: "written over a write in flight, the container of the written image shown by another tag", write: write, observed: 3,
			recorded: revision.ContainerState{Name: "exporter", Image: "x:v3", PreviousContainerID: c1, PreviousImageID: "r/x@" + aaa, Between: []string{"x:v2"}},
			status:   corev1.ContainerStatus{ContainerID: c3, Image: "x:latest", ImageID: "r/x@" + digest("exporter:v3"), RestartCount: 2, State: run},
			want:     true,
		},
		{
			// An undo after a failed pull: the content decides, whatever
			// tag the runtime shows.
			name: "undo over a write in flight, the previous content shown by another tag", write: write, observed: 3,
			recorded: revision.ContainerState{Name: "exporter", Image: "x:v1", PreviousContainerID: c1, PreviousImage: "x:v1",
				PreviousImageID: "r/x@" + aaa, Between: []string{"x:v2"}},
			status: corev1.ContainerStatus{ContainerID: c3, Image: "x:latest", ImageID: "r/x@" + aaa, RestartCount: 2, State: run},
			want:   true,
		},
		{
			name: "written while none ran and over a write in flight, a later container of the image in between", write: write, observed: 3,
			recorded: revision.ContainerState{Name: "exporter", Image: "x:v3", NoneRan: true, Between: []string{"x:v2"}},
			status:   corev1.ContainerStatus{ContainerID: c2, Image: "x:v2", ImageID: "r/x@" + bbb, RestartCount: 1, State: run},
			want:     false,
		},
		{name: "as injected, running", recorded: revision.ContainerState{Name: "exporter", Image: "x:v1"}, status: status(c1, "r/x@"+aaa), want: true},
		{
			name: "as injected, still creating", recorded: revision.ContainerState{Name: "exporter", Image: "x:v1"},
			status: corev1.ContainerStatus{State: waiting("ContainerCreating")}, want: false,
		},
		{
			// Records written before containerIDs were kept.
			name: "imageID-only record, imageID changed", recorded: revision.ContainerState{Name: "exporter", Image: "x:v2", PreviousImageID: "r/x@" + aaa},
			status: status(c2, "docker-pullable://r/x@"+bbb), want: true,
		},
		{
			// That version judged a pin done by the digest; so are its
			// records still, or they would never be done.
			name: "imageID-only record, declared digest running", recorded: revision.ContainerState{Name: "exporter", Image: "x@" + aaa, PreviousImageID: "r/x@" + aaa},
			status: status(c1, "r/x@"+aaa), want: true,
		},
		{
			name: "imageID-only record, same image with a runtime prefix", recorded: revision.ContainerState{Name: "exporter", Image: "x:v2", PreviousImageID: "r/x@" + aaa},
			status: status(c1, "docker-pullable://r/x@"+aaa), want: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UpdateComplete(tt.recorded, tt.write, tt.status, tt.observed); got != tt.want {
				t.Errorf("UpdateComplete(%+v, %+v, %+v, %d) = %v, want %v", tt.recorded, tt.write, tt.status, tt.observed, got, tt.want)
			}
		})
	}
}
