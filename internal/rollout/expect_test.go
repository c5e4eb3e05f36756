package rollout

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

func TestFresher(t *testing.T) {
	r1 := revision.SetState{Revision: "s-1", Hash: "1", ImagelessHash: "x"}
	r2 := revision.SetState{Revision: "s-2", Hash: "2", ImagelessHash: "x"}
	other := revision.SetState{Revision: "o-1", Hash: "o", ImagelessHash: "y"}
	pod := func(uid string, state revision.State, phase corev1.PodPhase) *corev1.Pod {
		p := injectedPod("p01", testSet("exporter:v1"))
		p.UID = k8stypes.UID("uid-" + uid)
		p.Annotations[v1alpha1.AnnotationState] = revision.Encode(state)
		p.Status.Phase = phase
		return p
	}
	written := pod("a", revision.State{setName: r2}, corev1.PodRunning)
	tests := []struct {
		name       string
		cached     *corev1.Pod
		wantCached bool
	}{
		{"the write not seen yet", pod("a", revision.State{setName: r1}, corev1.PodRunning), false},
		{"caught up", pod("a", revision.State{setName: r2}, corev1.PodRunning), true},
		{"caught up, status newer", pod("a", revision.State{setName: r2}, corev1.PodSucceeded), true},
		{"caught up, another set's record new", pod("a", revision.State{setName: r2, "other": other}, corev1.PodRunning), true},
		{"another pod of the same name", pod("b", revision.State{setName: r1}, corev1.PodRunning), true},
		{"the record seen, the resize written after it not yet", func() *corev1.Pod {
			p := pod("a", revision.State{setName: r2}, corev1.PodRunning)
			p.Generation = written.Generation - 1
			return p
		}(), false},
		{"a newer spec", func() *corev1.Pod {
			p := pod("a", revision.State{setName: r1}, corev1.PodRunning)
			p.Generation = written.Generation + 1
			return p
		}(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, caughtUp := Fresher(tt.cached, written, setName)
			if caughtUp != tt.wantCached || (got == tt.cached) != tt.wantCached {
				t.Errorf("Fresher: cached returned %v, caught up %v; want %v", got == tt.cached, caughtUp, tt.wantCached)
			}
		})
	}
}

// TestFresherSettledByOthers: another set's write settles or records back
// this set's record (Apply); the cache showing it so has seen a version of
// the pod after this set's write.
func TestFresherSettledByOthers(t *testing.T) {
	r1 := revision.SetState{Revision: "s-1", Hash: "1", ImagelessHash: "x",
		Containers: []revision.ContainerState{{Name: "exporter", Image: "exporter:v1"}}}
	r2 := revision.SetState{Revision: "s-2", Hash: "2", ImagelessHash: "x",
		Write:      &revision.Write{WasReady: true, TurnedReady: true, Generation: 1},
		Containers: []revision.ContainerState{{Name: "exporter", Image: "exporter:v2", PreviousContainerID: "containerd://exporter-0", PreviousImage: "exporter:v1"}}}
	other := revision.SetState{Revision: "o-2", Hash: "o", ImagelessHash: "y"}
	othersWrite := revision.SetState{Revision: "o-3", Hash: "o3", ImagelessHash: "y3", Write: &revision.Write{WasReady: true, Generation: 2}}
	pod := func(rec, other revision.SetState) *corev1.Pod {
		p := injectedPod("p01", testSet("exporter:v1"))
		p.Annotations[v1alpha1.AnnotationState] = revision.Encode(revision.State{setName: rec, "other": other})
		return p
	}
	written := pod(r2, other)
	for _, tt := range []struct {
		name          string
		cached, other revision.SetState
		caughtUp      bool
	}{
		{"the write not seen yet", r1, other, false},
		{"settled by another set's write", settledRecord(r2), othersWrite, true},
		{"recorded back by another set's write", recordedBack(r2), othersWrite, true},
		// A resize written after its record (ActionResize WithRecord)
		// over a record another set's write recorded back keeps that
		// Write but for WasReady: the record from before the write reads
		// as this one recorded back. No other set's record changed: it is
		// the pod from before the write.
		{"recorded back before the write, which kept the rest of its Write", recordedBack(r2), other, false},
		{"settled, no other set's record changed", settledRecord(r2), other, false},
	} {
		if _, caughtUp := Fresher(pod(tt.cached, tt.other), written, setName); caughtUp != tt.caughtUp {
			t.Errorf("%s: caught up %v, want %v", tt.name, caughtUp, tt.caughtUp)
		}
	}
}
