package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/cli"
	"github.com/sidecarset/sidecarset/internal/fixture"
)

func TestStatus(t *testing.T) {
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.CreatePods(3, nil, nil)
	f.complete(3)
	st := f.WaitStatus("the injection path written", func(s v1alpha1.SidecarSetStatus) bool { return s.Injection != nil })

	r := ok(t, "status", f.Set)
	mustContain(t, r.out, "NAME", "REVISION", "MATCHED", "UPDATED", "READY", "UPDATED-READY", "NOT-UPGRADABLE", "DRIFTED", "UNMANAGED", "SKIPPED", "PAUSED", "INJECTION")
	want := []string{f.Set, st.LatestRevision, "3", "3", "3", "3", "0", "0", "0", "0", "false", "Webhook"}
	if diff := cmp.Diff(want, row(t, r.out, f.Set)); diff != "" {
		t.Errorf("status row (-want +got):\n%s", diff)
	}
	// The conditions table follows, one line per condition of the status
	// but Reconciling, which repeats Progressing for kstatus.
	for _, c := range st.Conditions {
		if c.Type == v1alpha1.ConditionReconciling {
			continue
		}
		found := false
		for _, l := range lines(r.out) {
			cells := strings.Fields(l)
			if len(cells) > 4 && cells[0] == f.Set && cells[1] == c.Type && cells[2] == string(c.Status) && cells[3] == c.Reason && strings.HasSuffix(l, c.Message) {
				found = true
			}
		}
		if !found {
			t.Errorf("no line for condition %s=%s %s %q", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	// And one for the injection path, which says why.
	if in := st.Injection; !slices.ContainsFunc(lines(r.out), func(l string) bool {
		cells := strings.Fields(l)
		return len(cells) > 4 && cells[0] == f.Set && cells[1] == "Injection" && cells[2] == string(in.Path) && cells[3] == in.Reason && strings.HasSuffix(l, in.Message)
	}) {
		t.Errorf("no line for the injection path %s %s %q:\n%s", in.Path, in.Reason, in.Message, r.out)
	}

	wide := ok(t, "status", f.Set, "-o", "wide")
	mustContain(t, wide.out, "PARTITION", "MAX-UNAVAILABLE", "INJECTION-PAUSED", "OBSERVED", "AGE")
	cells := row(t, wide.out, f.Set)
	if diff := cmp.Diff([]string{"0", "1", "false"}, cells[12:15]); diff != "" {
		t.Errorf("wide columns partition, maxUnavailable, injection paused (-want +got):\n%s", diff)
	}

	var got v1alpha1.SidecarSet
	j := ok(t, "status", f.Set, "-o", "json")
	if err := json.Unmarshal([]byte(j.out), &got); err != nil {
		t.Fatalf("-o json is not a SidecarSet: %v", err)
	}
	if got.Kind != "SidecarSet" || got.APIVersion != v1alpha1.GroupVersion.String() || got.Status.MatchedPods != 3 {
		t.Errorf("-o json: kind %q apiVersion %q matchedPods %d", got.Kind, got.APIVersion, got.Status.MatchedPods)
	}
	y := ok(t, "status", f.Set, "-o", "yaml")
	mustContain(t, y.out, "kind: SidecarSet", "matchedPods: 3")

	all := ok(t, "status")
	row(t, all.out, f.Set)

	// The formats kubectl get takes, for scripts.
	for _, tc := range []struct{ format, want string }{
		{"name", "sidecarset.sidecarset.dev/" + f.Set + "\n"},
		{"jsonpath={.status.matchedPods}", "3"},
		{"go-template={{.metadata.name}} {{.status.updatedReadyPods}}", f.Set + " 3"},
	} {
		if got := ok(t, "status", f.Set, "-o", tc.format).out; got != tc.want {
			t.Errorf("-o %s: %q, want %q", tc.format, got, tc.want)
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "-o", "xml"}, `--output "xml": must be one of wide, json, yaml, name, jsonpath=TEMPLATE,`},
		{[]string{"status", "-o", "jsonpath={.status"}, `--output "jsonpath={.status": error parsing jsonpath {.status, unclosed action`},
		{[]string{"status", "no-such-set"}, `get SidecarSet no-such-set`},
		{[]string{"status", "-w"}, "give the SidecarSet's NAME"},
		{[]string{"status", f.Set, "-w", "-o", "json"}, "leave out --output"},
	} {
		r := kubectl(t, false, tc.args...)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, r.err, tc.want)
		}
	}
}

func TestStatusWatch(t *testing.T) {
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 1))
	f.CreatePods(3, nil, nil)
	f.complete(3)

	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	r := ok(t, "status", f.Set, "-w")
	ls := lines(r.out)
	if len(ls) < 2 || !strings.HasPrefix(ls[len(ls)-1], f.Set+": rollout complete: ") {
		t.Errorf("last line should say the rollout is complete:\n%s", r.out)
	}
	// One line per change, from the first pods to the last.
	mustContain(t, r.out, f.Set+": 0/3 updated and ready", f.Set+": 3/3 updated and ready; 3 updated, 0 not ready\n")
	if strings.Contains(r.out, "\x1b") {
		t.Errorf("plain output carries escape codes:\n%q", r.out)
	}
	for _, p := range f.Pods() {
		if got := fixture.Image(&p, "exporter"); got != "exporter:v2" {
			t.Errorf("pod %s runs exporter %s after the watch ended, want exporter:v2", p.Name, got)
		}
	}
	if st := f.GetSet().Status; st.UpdatedReadyPods != 3 || fixture.Condition(st, v1alpha1.ConditionComplete) != metav1.ConditionTrue {
		t.Errorf("watch ended before the cluster's status said complete: %+v", st)
	}

	t.Run("terminal", func(t *testing.T) {
		f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v3" })
		r := kubectl(t, true, "status", f.Set, "-w")
		if r.err != nil {
			t.Fatal(r.err)
		}
		// The bar: brackets, fill, the counts beside it, redrawn in place
		// (cursor up, erase) as the rollout moves.
		mustContain(t, r.out, f.Set+"  [", "=", "]  3/3 updated and ready; 3 updated, 0 not ready", "\x1b[", f.Set+": rollout complete")
		if got := fixture.Image(&f.Pods()[0], "exporter"); got != "exporter:v3" {
			t.Errorf("pod p01 runs exporter %s, want exporter:v3", got)
		}
	})
}

func TestStatusWatchStalled(t *testing.T) {
	f := newFixture(t)
	set := f.SidecarSet("exporter:v1", 0)
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = ptr.To[int32](2)
	f.CreateSet(set)
	f.CreatePods(2, nil, nil)
	f.complete(2)

	// The simulated registry never serves a "pull-fails" image: the first
	// pod updated never becomes ready, and the rollout stalls.
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter-pull-fails:v2" })
	r := kubectl(t, false, "status", f.Set, "-w")
	if !errors.Is(r.err, cli.ErrStalled) || cli.ExitCode(r.err) != 1 {
		t.Fatalf("error %v (exit %d), want one wrapping ErrStalled, exit 1", r.err, cli.ExitCode(r.err))
	}
	mustContain(t, r.err.Error(), "ProgressDeadlineExceeded", "progressDeadlineSeconds (2s)")
	mustContain(t, r.out, "1 updated, 1 not ready")

	// The controller pauses a stalled rollout right after saying so.
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got := f.GetSet()
		return got.Spec.UpdateStrategy.Paused && fixture.Condition(got.Status, v1alpha1.ConditionStalled) == metav1.ConditionTrue, nil
	})
	if err != nil {
		t.Errorf("cluster: want the stalled rollout paused with Stalled=True: %v", err)
	}
}
