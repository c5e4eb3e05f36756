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
	before := revision.ContainerState{Name: "exporter", PreviousImageID: "r/x@" + aaa}

	tests := []struct {
		name     string
		declared string
		recorded revision.ContainerState
		status   corev1.ContainerStatus
		want     bool
	}{
		{
			name:     "imageID changed",
			declared: "x:v2",
			recorded: before,
			status:   corev1.ContainerStatus{Image: "x:v2", ImageID: "r/x@" + bbb, State: run},
			want:     true,
		},
		{
			// Seed false case (a): the status shows the new tag while the
			// container still runs what ran before the write.
			name:     "new tag shown, imageID as before the write",
			declared: "x:v2",
			recorded: before,
			status:   corev1.ContainerStatus{Image: "x:v2", ImageID: "r/x@" + aaa, State: run},
			want:     false,
		},
		{
			// Seed false case (b): the tag was re-pushed; the status names
			// the declared tag whichever content runs.
			name:     "re-pushed tag: same tag, content as before the write",
			declared: "x:latest",
			recorded: revision.ContainerState{Name: "exporter", PreviousImageID: "r/x@" + aaa},
			status:   corev1.ContainerStatus{Image: "x:latest", ImageID: "r/x@" + aaa, State: run},
			want:     false,
		},
		{
			name:     "status lags: old image and old imageID",
			declared: "x:v2",
			recorded: before,
			status:   corev1.ContainerStatus{Image: "x:v1", ImageID: "r/x@" + aaa, State: run},
			want:     false,
		},
		{
			// A new reference to the same content: the imageID cannot
			// change, the pinned digest proves it.
			name:     "declared digest equals running digest",
			declared: "x@" + aaa,
			recorded: before,
			status:   corev1.ContainerStatus{Image: "x:v1", ImageID: "r/x@" + aaa, State: run},
			want:     true,
		},
		{
			name:     "declared tag and digest, digest running",
			declared: "x:v2@" + aaa,
			recorded: before,
			status:   corev1.ContainerStatus{ImageID: "r/x@" + aaa, State: run},
			want:     true,
		},
		{
			name:     "declared digest, bare sha256 imageID of a local import",
			declared: "x@" + aaa,
			recorded: before,
			status:   corev1.ContainerStatus{ImageID: aaa, State: run},
			want:     true,
		},
		{
			name:     "declared digest differs, imageID as before the write",
			declared: "x@" + bbb,
			recorded: before,
			status:   corev1.ContainerStatus{ImageID: "r/x@" + aaa, State: run},
			want:     false,
		},
		{
			name:     "bare sha256 imageIDs, changed",
			declared: "x:v2",
			recorded: revision.ContainerState{PreviousImageID: aaa},
			status:   corev1.ContainerStatus{ImageID: bbb, State: run},
			want:     true,
		},
		{
			name:     "bare sha256 imageIDs, unchanged",
			declared: "x:v2",
			recorded: revision.ContainerState{PreviousImageID: aaa},
			status:   corev1.ContainerStatus{ImageID: aaa, State: run},
			want:     false,
		},
		{
			name:     "same digest with and without a runtime prefix is no change",
			declared: "x:v2",
			recorded: revision.ContainerState{PreviousImageID: "docker-pullable://r/x@" + aaa},
			status:   corev1.ContainerStatus{ImageID: "r/x@" + aaa, State: run},
			want:     false,
		},
		{
			name:     "waiting in ErrImagePull",
			declared: "x:v2",
			recorded: before,
			status:   corev1.ContainerStatus{Image: "x:v2", State: waiting("ErrImagePull")},
			want:     false,
		},
		{
			name:     "waiting in CrashLoopBackOff with the new imageID",
			declared: "x:v2",
			recorded: before,
			status:   corev1.ContainerStatus{Image: "x:v2", ImageID: "r/x@" + bbb, State: waiting("CrashLoopBackOff")},
			want:     false,
		},
		{
			name:     "terminated",
			declared: "x:v2",
			recorded: before,
			status: corev1.ContainerStatus{ImageID: "r/x@" + bbb, State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
			want: false,
		},
		{
			name:     "no status yet",
			declared: "x:v2",
			recorded: before,
			want:     false,
		},
		{
			name:     "as injected: no previous imageID, running",
			declared: "x:v1",
			recorded: revision.ContainerState{Name: "exporter"},
			status:   corev1.ContainerStatus{ImageID: "r/x@" + aaa, State: run},
			want:     true,
		},
		{
			name:     "as injected, still creating",
			declared: "x:v1",
			recorded: revision.ContainerState{Name: "exporter"},
			status:   corev1.ContainerStatus{State: waiting("ContainerCreating")},
			want:     false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UpdateComplete(tt.declared, tt.recorded, tt.status); got != tt.want {
				t.Errorf("UpdateComplete(%q, %+v, %+v) = %v, want %v", tt.declared, tt.recorded, tt.status, got, tt.want)
			}
		})
	}
}

func TestDigests(t *testing.T) {
	d := digest("a")
	tests := []struct {
		in                   string
		wantDeclared, wantID string
	}{
		{in: "x:v1"},
		{in: "registry:5000/x:v1"},
		{in: "x@" + d, wantDeclared: d, wantID: d},
		{in: "registry:5000/x:v1@" + d, wantDeclared: d, wantID: d},
		{in: d, wantID: d},
		{in: "docker-pullable://x@" + d, wantDeclared: d, wantID: d},
		{in: "docker://" + d, wantID: d},
		{in: "x@sha256:short"},
		{in: "x@sha256:" + "Z" + d[len("sha256:")+1:]},
	}
	for _, tt := range tests {
		if got := declaredDigest(tt.in); got != tt.wantDeclared {
			t.Errorf("declaredDigest(%q) = %q, want %q", tt.in, got, tt.wantDeclared)
		}
		if got := imageIDDigest(tt.in); got != tt.wantID {
			t.Errorf("imageIDDigest(%q) = %q, want %q", tt.in, got, tt.wantID)
		}
	}
}
