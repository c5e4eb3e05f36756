package cli_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/cli"
)

// TestRolloutRunPause: --pause waits that long after each step but the
// last, and a pause someone sets meanwhile stops the run there (exit 3)
// with the partition left at the step.
func TestRolloutRunPause(t *testing.T) {
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 1))
	f.CreatePods(2, nil, nil)
	f.complete(2)
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = partition("100%") })
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	f.complete(0)

	start := time.Now()
	r := ok(t, "rollout", "run", f.Set, "--steps", "50%,0", "--pause", "3s")
	if took := time.Since(start); took < 3*time.Second {
		t.Errorf("run took %s, less than its pause", took)
	}
	mustContain(t, r.out, "step 1/2 (partition 50%): done; pausing 3s before the next step\n",
		"step 1/2 (partition 50%): done\n", f.Set+": all 2 steps done")
	if strings.Contains(r.out, "step 2/2 (partition 0): done; pausing") {
		t.Errorf("run paused after its last step:\n%s", r.out)
	}

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = partition("100%") })
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v3" })
	f.complete(0)
	done := make(chan result, 1)
	go func() { done <- kubectl(t, false, "rollout", "run", f.Set, "--steps", "50%,0", "--pause", "5m") }()
	// Once the first step is done, the run is in its pause.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		s := f.GetSet()
		if s.Spec.UpdateStrategy.Partition.String() == "50%" && s.Status.ObservedGeneration == s.Generation && s.Status.UpdatedReadyPods == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("step 1 not done within a minute: %+v", s.Status)
		}
	}
	time.Sleep(time.Second)
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Paused = true })
	r = <-done
	if !errors.Is(r.err, cli.ErrPaused) || cli.ExitCode(r.err) != 3 {
		t.Fatalf("run paused during its pause: exit %d, error %v; want exit 3 and ErrPaused", cli.ExitCode(r.err), r.err)
	}
	mustContain(t, r.out, "step 1/2 (partition 50%): done; pausing 5m0s before the next step\n")
	mustContain(t, r.err.Error(), "spec.updateStrategy.paused was set by someone else", "the partition stays at 50%")
	if got := f.GetSet().Spec.UpdateStrategy.Partition.String(); got != "50%" {
		t.Errorf("partition %s after the run stopped in its pause, want 50%%", got)
	}
}

// TestRolloutRunHeld: steps done with pods left that need a recreate is
// not "all steps done": exit 3, saying how to recreate them.
func TestRolloutRunHeld(t *testing.T) {
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.CreatePods(2, nil, nil)
	f.complete(2)
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = partition("100%") })
	// More than an image: the pods need a recreate.
	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}}
	})
	f.WaitStatus("2 not upgradable", func(st v1alpha1.SidecarSetStatus) bool { return st.NotUpgradablePods == 2 })
	r := kubectl(t, false, "rollout", "run", f.Set, "--steps", "50%,0", "--wait-ready", "60s")
	if !errors.Is(r.err, cli.ErrPaused) || cli.ExitCode(r.err) != 3 {
		t.Fatalf("exit %d, error %v; want exit 3 (held)", cli.ExitCode(r.err), r.err)
	}
	mustContain(t, r.err.Error(), "all 2 steps done, but the rollout is held", "kubectl sidecarset restart "+f.Set+" --not-upgradable")
	if strings.Contains(r.out, "all 2 steps done") {
		t.Errorf("run claims every step done:\n%s", r.out)
	}
}
