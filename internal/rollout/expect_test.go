package rollout

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// TestFresher: the resourceVersions decide, whatever the record shows.
func TestFresher(t *testing.T) {
	r1 := revision.SetState{Revision: "s-1", Hash: "1", ImagelessHash: "x",
		Containers: []revision.ContainerState{{Name: "exporter", Image: "exporter:v1"}}}
	r2 := revision.SetState{Revision: "s-2", Hash: "2", ImagelessHash: "x",
		Write:      &revision.Write{WasReady: true, Generation: 2},
		Containers: []revision.ContainerState{{Name: "exporter", Image: "exporter:v2", PreviousContainerID: "containerd://exporter-0", PreviousImage: "exporter:v1"}}}
	pod := func(uid, rv string, rec revision.SetState) *corev1.Pod {
		p := injectedPod("p01", testSet("exporter:v1"))
		p.UID, p.ResourceVersion, p.Generation = k8stypes.UID("uid-"+uid), rv, 2
		p.Annotations[v1alpha1.AnnotationState] = revision.Encode(revision.State{setName: rec})
		return p
	}
	written := pod("a", "12", r2)
	for _, tt := range []struct {
		name     string
		cached   *corev1.Pod
		caughtUp bool
	}{
		{"the write not seen yet", pod("a", "11", r1), false},
		{"the write seen", pod("a", "12", r2), true},
		{"a later version, status newer", pod("a", "13", r2), true},
		{"a later version, settled by another set's write", pod("a", "15", releasedRecord(r2)), true},
		// A resize written after its record (ActionResize WithRecord) into
		// a pod written while not ready keeps that Write but for WasReady:
		// the pod from before it reads as the written one, not counted.
		{"the pod before the write, its record as the written one not counted", pod("a", "11", notCounted(r2)), false},
		{"an earlier version, a shorter resourceVersion", pod("a", "9", r2), false},
		{"another pod of the same name", pod("b", "3", r1), true},
	} {
		got, caughtUp := Fresher(tt.cached, written, setName)
		if caughtUp != tt.caughtUp || (got == tt.cached) != tt.caughtUp {
			t.Errorf("%s: cached returned %v, caught up %v; want %v", tt.name, got == tt.cached, caughtUp, tt.caughtUp)
		}
	}
}

// TestFresherByRecord: resourceVersions that do not compare leave the
// record's rule.
func TestFresherByRecord(t *testing.T) {
	r1 := revision.SetState{Revision: "s-1", Hash: "1", ImagelessHash: "x"}
	r2 := revision.SetState{Revision: "s-2", Hash: "2", ImagelessHash: "x"}
	other := revision.SetState{Revision: "o-1", Hash: "o", ImagelessHash: "y"}
	pod := func(uid string, state revision.State, phase corev1.PodPhase) *corev1.Pod {
		p := injectedPod("p01", testSet("exporter:v1"))
		p.UID, p.ResourceVersion = k8stypes.UID("uid-"+uid), "opaque"
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

// notCounted returns rec with its write made while the pod was not ready.
func notCounted(rec revision.SetState) revision.SetState {
	w := *rec.Write
	w.WasReady = false
	rec.Write = &w
	return rec
}
