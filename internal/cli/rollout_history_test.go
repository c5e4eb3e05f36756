package cli_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// TestRolloutHistory: history lists the revisions newest first, each with
// its images, its pods and whether the spec declares it or the last
// complete rollout reached it.
func TestRolloutHistory(t *testing.T) {
	f := newFixture(t)
	f.CreateSet(f.SidecarSet("exporter:v1", 0))
	f.CreatePods(2, nil, nil)
	v1 := f.complete(2).LatestRevision
	f.UpdateSet(func(s *v1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "exporter:v2"
		s.Spec.UpdateStrategy.Partition = partition("1")
	})
	v2 := f.complete(1).LatestRevision

	out := ok(t, "rollout", "history", f.Set).out
	ls := lines(out)
	if want := []string{"REVISION", "NAME", "IMAGES", "PODS", "STATE", "AGE"}; len(ls) != 3 || !slices.Equal(strings.Fields(ls[0]), want) {
		t.Fatalf("history: want a header %v and two revisions:\n%s", want, out)
	}
	newest, oldest := strings.Fields(ls[1]), strings.Fields(ls[2])
	if n, o := atoi(t, newest[0]), atoi(t, oldest[0]); n <= o {
		t.Errorf("revision %s listed before %s, want newest first", newest[0], oldest[0])
	}
	completed := f.GetSet().Status.CompletedRevision
	for _, tc := range []struct {
		row         []string
		name, image string
	}{{newest, v2, "exporter=exporter:v2"}, {oldest, v1, "exporter=exporter:v1"}} {
		want := []string{}
		if tc.name == v2 {
			want = append(want, "current")
		}
		if tc.name == completed {
			want = append(want, "completed")
		}
		state := "<none>"
		if len(want) > 0 {
			state = strings.Join(want, ",")
		}
		if got := tc.row[1:5]; !slices.Equal(got, []string{tc.name, tc.image, "1", state}) {
			t.Errorf("row %v, want %s %s on 1 pod, state %s", tc.row, tc.name, tc.image, state)
		}
	}

	mustContain(t, ok(t, "rollout", "history", f.Set, "-o", "json").out, `"kind": "ControllerRevisionList"`, `"name": "`+v2+`"`, `"name": "`+v1+`"`)
	mustContain(t, ok(t, "rollout", "history", f.Set, "--manager-namespace", "elsewhere").out,
		f.Set+": no revisions kept in namespace elsewhere (see --manager-namespace)")
	if r := kubectl(t, false, "rollout", "history", "no-such-set"); r.err == nil || !strings.Contains(r.err.Error(), "get SidecarSet no-such-set") {
		t.Errorf("history of a missing set: %v", r.err)
	}
	if got := ok(t, "rollout", "history", f.Set, "-o", "jsonpath={.items[*].metadata.name}").out; got != v2+" "+v1 {
		t.Errorf("history -o jsonpath: %q, want %q", got, v2+" "+v1)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
