package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sidecarset/sidecarset/internal/revision"
	"github.com/sidecarset/sidecarset/internal/rollout"
)

func TestPodList(t *testing.T) {
	many := make([]string, 1000)
	for i := range many {
		many[i] = fmt.Sprintf("shop/db-%04d", i)
	}
	tests := []struct {
		name  string
		names []string
		want  string
	}{
		{"none", nil, ""},
		{"a few, all named", []string{"shop/db-0", "shop/db-1"}, "shop/db-0, shop/db-1"},
		// 600 bytes hold 43 names of 12 bytes with their separators.
		{"a thousand, the rest counted", many, strings.Join(many[:43], ", ") + " and 957 more"},
		{"one name longer than the limit still shows", []string{strings.Repeat("x", 700)}, strings.Repeat("x", 700)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := podList(tt.names); got != tt.want {
				t.Errorf("podList = %q\nwant %q", got, tt.want)
			}
			// The longest event message around it is under 200 bytes.
			if got := podList(tt.names); len(tt.names) > 1 && len(got) > 1024-200 {
				t.Errorf("podList is %d bytes, too long for an event message", len(got))
			}
		})
	}
}

func TestStepMessage(t *testing.T) {
	many := make([]string, 1000)
	for i := range many {
		many[i] = fmt.Sprintf("shop/db-%04d", i)
	}
	// A revision is named after its set, at most 253 bytes, and a hash.
	longRevision := strings.Repeat("s", 253) + "-5d8c7f9b4"
	tests := []struct {
		name     string
		revision string
		names    []string
		want     string
	}{
		{"a few", "exporter-5d8c7f", []string{"shop/db-0", "shop/db-1"},
			"updating 2 pod(s) in place to revision exporter-5d8c7f: shop/db-0, shop/db-1"},
		{"a thousand", "exporter-5d8c7f", many,
			"updating 1000 pod(s) in place to revision exporter-5d8c7f: " + strings.Join(many[:43], ", ") + " and 957 more"},
		{"a thousand, the longest revision name", longRevision, many,
			"updating 1000 pod(s) in place to revision " + longRevision + ": " + strings.Join(many[:43], ", ") + " and 957 more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := stepMessage(tt.revision, tt.names)
			if got != tt.want {
				t.Errorf("stepMessage = %q\nwant %q", got, tt.want)
			}
			// The apiserver refuses an event message over 1 KiB.
			if len(got) > 1024 {
				t.Errorf("stepMessage is %d bytes, over an event message's 1024", len(got))
			}
		})
	}
}

func TestSplitSettles(t *testing.T) {
	u := func(name string, a rollout.Action) rollout.PodUpdate {
		return rollout.PodUpdate{Pod: types.NamespacedName{Namespace: "shop", Name: name}, Action: a}
	}
	names := func(us []rollout.PodUpdate) []string {
		var out []string
		for _, u := range us {
			out = append(out, u.Pod.Name)
		}
		return out
	}
	mixed := []rollout.PodUpdate{
		u("s1", rollout.ActionSettle), u("w1", rollout.ActionUpdate), u("s2", rollout.ActionSettle),
		u("b1", rollout.ActionRecordDisruption), u("s3", rollout.ActionSettle),
	}
	tests := []struct {
		name            string
		updates         []rollout.PodUpdate
		limit           int
		others, settles []string
		more            bool
	}{
		{"none", nil, 2, nil, nil, false},
		{"under the limit: every settle, in order", mixed, 4, []string{"w1", "b1"}, []string{"s1", "s2", "s3"}, false},
		{"at the limit: every settle", mixed, 3, []string{"w1", "b1"}, []string{"s1", "s2", "s3"}, false},
		{"the others are never limited", mixed, 0, []string{"w1", "b1"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			others, settles, more := splitSettles(tt.updates, tt.limit)
			if got := names(others); !slices.Equal(got, tt.others) {
				t.Errorf("others = %v, want %v", got, tt.others)
			}
			if got := names(settles); !slices.Equal(got, tt.settles) {
				t.Errorf("settles = %v, want %v", got, tt.settles)
			}
			if more != tt.more {
				t.Errorf("more = %v, want %v", more, tt.more)
			}
		})
	}
	// Over the limit, a random choice: none is left out for good.
	seen := map[string]int{}
	for range 100 {
		others, settles, more := splitSettles(slices.Clone(mixed), 2)
		if got := names(others); !more || len(settles) != 2 || !slices.Equal(got, []string{"w1", "b1"}) {
			t.Fatalf("over the limit: others %v, settles %v, more %v; want w1 b1, 2 settles, more", got, names(settles), more)
		}
		if a, b := settles[0].Pod.Name, settles[1].Pod.Name; a == b || a[0] != 's' || b[0] != 's' {
			t.Fatalf("over the limit: settles %v, want two of s1 s2 s3", names(settles))
		}
		for _, s := range settles {
			seen[s.Pod.Name]++
		}
	}
	for _, name := range []string{"s1", "s2", "s3"} {
		if seen[name] == 0 {
			t.Errorf("%s never chosen in 100 plans over the limit: %v", name, seen)
		}
	}
}

func TestSettlesAgain(t *testing.T) {
	tests := []struct {
		name          string
		more          bool
		tried, landed int
		want          time.Duration
	}{
		{"none tried", false, 0, 0, 0},
		{"every settle landed", false, 5, 5, 0},
		{"some failed", false, 5, 3, settleRetry},
		{"more left, some landed: the rest at once", true, 1000, 400, time.Millisecond},
		{"more left, none landed: not at once", true, 1000, 0, settleRetry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := settlesAgain(tt.more, tt.tried, tt.landed); got != tt.want {
				t.Errorf("settlesAgain(%v, %d, %d) = %v, want %v", tt.more, tt.tried, tt.landed, got, tt.want)
			}
		})
	}
}

// TestStampTime: a write is stamped after the set's releasedBefore, even
// when another manager's clock, ahead of this one's, set it.
func TestStampTime(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		before *metav1.MicroTime
		want   time.Time
	}{
		{"none", nil, now},
		{"behind now", new(metav1.NewMicroTime(now.Add(-time.Minute))), now},
		{"now", new(metav1.NewMicroTime(now)), now.Add(time.Microsecond)},
		{"ahead of now", new(metav1.NewMicroTime(now.Add(time.Second))), now.Add(time.Second + time.Microsecond)},
	}
	for _, tt := range tests {
		if got := stampTime(now, tt.before); !got.Equal(tt.want) {
			t.Errorf("%s: stampTime = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestNoteBack checks that a write's duration is observed once, when its
// pod is first seen back (released), and again for the next write.
func TestNoteBack(t *testing.T) {
	r := &Reconciler{Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
	r.Init()
	const set = "note-back"
	written := func(at time.Time, back bool) []rollout.Pod {
		return []rollout.Pod{{Key: types.NamespacedName{Namespace: "db", Name: "p01"}, Back: back,
			Record: revision.SetState{Write: &revision.Write{WasReady: true, At: &metav1.MicroTime{Time: at}}}}}
	}
	observed := func() uint64 {
		families, err := ctrlmetrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "sidecarset_pod_update_duration_seconds" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetValue() == set {
						return m.GetHistogram().GetSampleCount()
					}
				}
			}
		}
		return 0
	}
	first, second := time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 11, 30, 0, 0, time.UTC)
	for _, step := range []struct {
		name string
		pods []rollout.Pod
		want uint64
	}{
		{"written, not back yet", written(first, false), 0},
		{"back", written(first, true), 1},
		{"still back", written(first, true), 1},
		{"failed after it was back", written(first, false), 1},
		{"back again from the same write", written(first, true), 1},
		{"written again, not back yet", written(second, false), 1},
		{"back from the second write", written(second, true), 2},
	} {
		r.noteBack(set, step.pods)
		if got := observed(); got != step.want {
			t.Errorf("%s: %d writes observed, want %d", step.name, got, step.want)
		}
	}
}
