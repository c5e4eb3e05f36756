package cli_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/cli"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

func TestRolloutPromotePauseResume(t *testing.T) {
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 0)
	set.Spec.UpdateStrategy.MaxUnavailable = partition("2")
	f.CreateSet(set)

	r := ok(t, "rollout", "promote", f.Set, "--partition", "50%")
	mustContain(t, r.out, f.Set+": partition 0 -> 50%")
	got := f.GetSet().Spec.UpdateStrategy
	if got.Partition.String() != "50%" || got.MaxUnavailable.String() != "2" {
		t.Errorf("cluster: partition %s maxUnavailable %s, want 50%% and the untouched 2", got.Partition, got.MaxUnavailable)
	}
	ok(t, "rollout", "promote", f.Set, "--partition", "3")
	if got := f.GetSet().Spec.UpdateStrategy.Partition; got.String() != "3" || got.Type != 0 {
		t.Errorf("cluster: partition %v, want the integer 3", got)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rollout", "promote", f.Set, "--partition", "150%"}, `--partition "150%": a percentage must be a whole number from 0% to 100%`},
		{[]string{"rollout", "promote", f.Set, "--partition", "-1"}, `--partition "-1": must be a non-negative number of pods`},
		{[]string{"rollout", "promote", f.Set, "--partition", "half"}, `--partition "half"`},
		{[]string{"rollout", "promote", f.Set}, "--partition is required"},
		{[]string{"rollout", "promote", "no-such-set", "--partition", "1"}, "get SidecarSet no-such-set"},
	} {
		r := kubectl(t, false, tc.args...)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, r.err, tc.want)
		}
	}
	if got := f.GetSet().Spec.UpdateStrategy.Partition.String(); got != "3" {
		t.Errorf("a refused promote changed the partition to %s", got)
	}

	mustContain(t, ok(t, "rollout", "pause", f.Set).out, f.Set+": rollout paused")
	if !f.GetSet().Spec.UpdateStrategy.Paused {
		t.Error("cluster: not paused after rollout pause")
	}
	mustContain(t, ok(t, "rollout", "pause", f.Set).out, "already paused")
	mustContain(t, ok(t, "rollout", "promote", f.Set, "--partition", "0").out, "the rollout is paused")
	mustContain(t, ok(t, "rollout", "resume", f.Set).out, f.Set+": rollout resumed")
	if got := f.GetSet().Spec.UpdateStrategy; got.Paused || got.Partition.String() != "0" {
		t.Errorf("cluster: paused %v partition %s after resume, want false and 0", got.Paused, got.Partition)
	}
}

func TestRolloutUndo(t *testing.T) {
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.CreatePods(2, nil, nil)
	v1 := f.complete(2).LatestRevision
	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "exporter:v2"
		s.Spec.UpdateStrategy.Partition = partition("1")
	})
	v2 := f.complete(1).LatestRevision

	r := ok(t, "rollout", "undo", f.Set)
	// One revision, one name: the one status shows, with no number beside it.
	mustContain(t, r.out, fmt.Sprintf("%s: declared revision %s again: exporter=exporter:v1 (was exporter=exporter:v2)\n", f.Set, v1))
	mustContain(t, r.out, fmt.Sprintf("1 pod(s) go back, whatever the partition (1), at most 1 at a time: %s/p01", f.NS))
	got := f.GetSet()
	if img := got.Spec.Containers[0].Image; img != "exporter:v1" || got.Spec.UpdateStrategy.Partition.String() != "1" {
		t.Errorf("cluster after undo: image %s partition %s, want exporter:v1 and the partition left at 1", img, got.Spec.UpdateStrategy.Partition)
	}
	// Defect: the controller makes the undone revision the newest again;
	// p02 never left it, and the partition, left at 1, kept the canary p01
	// on v2 and called the rollout complete. The pods of the revision
	// undone go back whatever the partition.
	if latest := f.complete(2).LatestRevision; latest != v1 {
		t.Errorf("latest revision %s after undo, want %s", latest, v1)
	}
	for _, p := range f.Pods() {
		if img := fixture.Image(&p, "exporter"); img != "exporter:v1" {
			t.Errorf("pod %s runs %s after undo, want exporter:v1", p.Name, img)
		}
	}
	if got := fixture.Restarts(f.Pods(), "exporter"); got["p01"] != 2 || got["p02"] != 0 {
		t.Errorf("exporter restarts %v after undo, want p01 2 (to v2 and back), p02 0", got)
	}

	var revs appsv1.ControllerRevisionList
	if err := env.Client.List(t.Context(), &revs, client.InNamespace(cli.DefaultManagerNamespace), client.MatchingLabels{v1alpha1.LabelSidecarSet: f.Set}); err != nil {
		t.Fatal(err)
	}
	var v2Number int64
	for _, cr := range revs.Items {
		if cr.Name == v2 {
			v2Number = cr.Revision
		}
	}
	// Forward to a revision declared after the current one: the partition
	// decides, as for any new revision.
	r = ok(t, "rollout", "undo", f.Set, "--to-revision", fmt.Sprint(v2Number))
	mustContain(t, r.out, "a revision declared after the current one: pods move to it as the partition (1) says")
	if img := f.GetSet().Spec.Containers[0].Image; img != "exporter:v2" {
		t.Errorf("cluster after undo --to-revision %d: image %s, want exporter:v2", v2Number, img)
	}
	f.complete(1)
	if n := fixture.CountImage(f.Pods(), "exporter:v2"); n != 1 {
		t.Errorf("%d pods on exporter:v2 after going forward with partition 1 of 2, want 1", n)
	}
	mustContain(t, ok(t, "rollout", "undo", f.Set, "--to-revision", v2).out, f.Set+": already declares revision "+v2+"; nothing to do\n")
	if got := row(t, ok(t, "status", f.Set).out, f.Set)[1]; got != v2 {
		t.Errorf("status shows revision %s, where undo named %s", got, v2)
	}

	r = kubectl(t, false, "rollout", "undo", f.Set, "--to-revision", "99")
	if r.err == nil || !strings.Contains(r.err.Error(), "--to-revision 99: no such revision; kept, newest first: "+v2+", "+v1) {
		t.Errorf("undo to a missing revision: %v", r.err)
	}
	r = kubectl(t, false, "rollout", "undo", f.Set, "--manager-namespace", "elsewhere")
	if r.err == nil || !strings.Contains(r.err.Error(), "revisions are kept in namespace elsewhere") {
		t.Errorf("undo with no revisions: %v", r.err)
	}
}

func TestRolloutRun(t *testing.T) {
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 1))
	f.CreatePods(4, nil, nil)
	f.complete(4)
	// Hold every pod back, then declare v2: nothing moves until run.
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = partition("100%") })
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	f.complete(0)

	r := ok(t, "rollout", "run", f.Set, "--steps", "75%,50%,0", "--wait-ready", "60s")
	for _, want := range []string{
		"step 1/3 (partition 75%): partition 100% -> 75%",
		f.Set + ": 1/1 updated and ready (4 matched, partition 3); 1 updated, 0 not ready",
		"step 1/3 (partition 75%): done",
		"step 2/3 (partition 50%): partition 75% -> 50%",
		"step 2/3 (partition 50%): done",
		"step 3/3 (partition 0): partition 50% -> 0",
		f.Set + ": 4/4 updated and ready; 4 updated, 0 not ready",
		f.Set + ": all 3 steps done",
	} {
		mustContain(t, r.out, want)
	}
	st := f.GetSet()
	if st.Spec.UpdateStrategy.Partition.String() != "0" || st.Status.UpdatedReadyPods != 4 {
		t.Errorf("cluster after run: partition %s updatedReady %d, want 0 and 4", st.Spec.UpdateStrategy.Partition, st.Status.UpdatedReadyPods)
	}

	// Running it again finds every step done.
	again := ok(t, "rollout", "run", f.Set, "--steps", "50%,0")
	mustContain(t, again.out, "step 1/2 (partition 50%): skipped: keeps 2 of 4 pods, more than the current partition 0 (0)", "step 2/2 (partition 0): partition already 0")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rollout", "run", f.Set}, "--steps is required"},
		{[]string{"rollout", "run", f.Set, "--steps", "50%,x"}, `--steps (step 2) "x"`},
		{[]string{"rollout", "run", f.Set, "--steps", "0", "--wait-ready", "0s"}, "--wait-ready 0s: must be positive"},
		{[]string{"rollout", "run", f.Set, "--steps", "0", "--pause", "-1s"}, "--pause -1s: must not be negative"},
	} {
		r := kubectl(t, false, tc.args...)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, r.err, tc.want)
		}
	}
}

// TestRolloutRunStepsGoDown: steps that do not lower the partition are a
// usage error naming --steps and why, before anything is written. They
// used to be skipped one by one, and the run exited 0 with "all 2 steps
// done" having done nothing.
func TestRolloutRunStepsGoDown(t *testing.T) {
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 0)
	set.Spec.UpdateStrategy.Partition = partition("100%")
	f.CreateSet(set)
	for _, tc := range []struct{ steps, want string }{
		{"50,90", "--steps 50,90: step 2 (90) is not below step 1 (50): the partition is how many pods stay on their revision, so each step must be lower than the one before, e.g. 90%,50%,0"},
		{"90%,50%,50%", "--steps 90%,50%,50%: step 3 (50%) is not below step 2 (50%)"},
		{"0,10%", "--steps 0,10%: step 2 (10%) is not below step 1 (0)"},
		{"50%,0%,0", "--steps 50%,0%,0: step 3 (0) is not below step 2 (0%)"},
	} {
		r := kubectl(t, false, "rollout", "run", f.Set, "--steps", tc.steps)
		if got := cli.ExitCode(r.err); got != 2 || r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("--steps %s: exit %d, error %v; want exit 2 and an error containing %q", tc.steps, got, r.err, tc.want)
		}
		if r.out != "" {
			t.Errorf("--steps %s printed steps:\n%s", tc.steps, r.out)
		}
	}
	if got := f.GetSet().Spec.UpdateStrategy.Partition.String(); got != "100%" {
		t.Errorf("a refused run changed the partition to %s", got)
	}
}

func TestRolloutRunStopsAtAnomaly(t *testing.T) {
	f := newFixture(t)
	// The readiness probe matters: without one a real kubelet counts a
	// running container ready.
	f.CreateSet(f.SidecarSet("exporter:v1", 1))
	f.CreatePods(4, nil, nil)
	f.complete(4)
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = partition("100%") })
	// A "never-ready" image runs but never passes its readiness probe:
	// the first updated pod stays not ready.
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter-never-ready:v2" })
	f.complete(0)

	r := kubectl(t, false, "rollout", "run", f.Set, "--steps", "75%,0", "--not-ready-timeout", "3s", "--wait-ready", "60s")
	if !errors.Is(r.err, cli.ErrAnomaly) {
		t.Fatalf("error %v, want one wrapping ErrAnomaly", r.err)
	}
	mustContain(t, r.err.Error(), "step 1/2 (partition 75%)", "1 updated pods not ready, and none became ready, for 3s (--not-ready-timeout)",
		"the partition stays at 75%", "kubectl sidecarset rollout undo "+f.Set)
	mustContain(t, r.out, "step 1/2 (partition 75%): partition 100% -> 75%", "0/1 updated and ready (4 matched, partition 3); 1 updated, 1 not ready")
	if strings.Contains(r.out, "step 2/2") {
		t.Errorf("run went past the anomaly:\n%s", r.out)
	}
	st := f.GetSet()
	if st.Spec.UpdateStrategy.Partition.String() != "75%" || st.Status.UpdatedPods != 1 {
		t.Errorf("cluster: partition %s updated %d, want the partition left at 75%% with 1 pod updated", st.Spec.UpdateStrategy.Partition, st.Status.UpdatedPods)
	}

	// A paused rollout is refused before any step.
	ok(t, "rollout", "pause", f.Set)
	r = kubectl(t, false, "rollout", "run", f.Set, "--steps", "0")
	if r.err == nil || !strings.Contains(r.err.Error(), "spec.updateStrategy.paused is true; `kubectl sidecarset rollout resume "+f.Set+"` first") {
		t.Errorf("run on a paused rollout: %v", r.err)
	}
	if got := f.GetSet().Spec.UpdateStrategy.Partition.String(); got != "75%" {
		t.Errorf("a refused run changed the partition to %s", got)
	}
}
