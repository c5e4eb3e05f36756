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
