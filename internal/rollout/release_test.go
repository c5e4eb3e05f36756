package rollout

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecarset/sidecarset/internal/revision"
)

// TestReleasedBefore: the worked cases of ReleasedBefore's doc, and what
// holds a write back.
func TestReleasedBefore(t *testing.T) {
	at := func(hms string) time.Time {
		tm, err := time.Parse("15:04:05", hms)
		if err != nil {
			t.Fatal(err)
		}
		return time.Date(2026, 1, 1, tm.Hour(), tm.Minute(), tm.Second(), 0, time.UTC)
	}
	// written at w, back since back ("" not back).
	pod := func(w, back string) Pod {
		stamp := metav1.NewMicroTime(at(w))
		p := Pod{Record: revision.SetState{Write: &revision.Write{WasReady: true, At: &stamp}}}
		if back != "" {
			p.Back, p.BackAt = true, at(back)
		}
		return p
	}
	with := func(p Pod, f func(*Pod)) Pod { f(&p); return p }
	now, was := at("12:10:00"), at("12:00:00")
	tests := []struct {
		name       string
		pods       []Pod
		want, next time.Time
	}{
		{"both back", []Pod{pod("12:01:00", "12:02:00"), pod("12:03:00", "12:04:00")}, at("12:03:00").Add(time.Microsecond), time.Time{}},
		{"the later one not back", []Pod{pod("12:01:00", "12:02:00"), pod("12:03:00", "")}, at("12:01:00").Add(time.Microsecond), time.Time{}},
		{"the earlier one not back", []Pod{pod("12:01:00", ""), pod("12:03:00", "12:04:00")}, was, time.Time{}},
		{"back less than the margin", []Pod{pod("12:01:00", "12:09:30")}, was, at("12:10:30")},
		{"written less than the margin ago, back at once", []Pod{pod("12:09:20", "12:09:20")}, was, at("12:10:20")},
		{"no write", []Pod{{}}, was, time.Time{}},
		{"a write before timed writes: never passed", []Pod{{Back: true, Record: revision.SetState{Write: &revision.Write{}}}}, was, time.Time{}},
		{"back but owing a resize", []Pod{with(pod("12:01:00", "12:02:00"), func(p *Pod) { p.ResizeOwed = []ContainerResources{{Name: "exporter"}} })}, was, time.Time{}},
		{"back but another set's write in flight", []Pod{with(pod("12:01:00", "12:02:00"), func(p *Pod) { p.OthersWriting = true })}, was, time.Time{}},
		{"never back: it never goes back", []Pod{pod("11:58:00", "")}, was, time.Time{}},
	}
	for _, tt := range tests {
		got, next := ReleasedBefore(tt.pods, was, now, time.Minute)
		if !got.Equal(tt.want) || !next.Equal(tt.next) {
			t.Errorf("%s: ReleasedBefore = %v, next %v; want %v, next %v", tt.name, got, next, tt.want, tt.next)
		}
	}
}

// TestPassed: a set's releasedBefore passes a write made before it; not
// one made at it, nor one never timed. A record it passes reads as
// released: its write moved to Released, its containers settled.
func TestPassed(t *testing.T) {
	w := metav1.NewMicroTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	timed := &revision.Write{WasReady: true, At: &w}
	for _, tc := range []struct {
		name   string
		w      *revision.Write
		before time.Time
		want   bool
	}{
		{"made before", timed, w.Add(time.Microsecond), true},
		{"made at", timed, w.Time, false},
		{"never timed", &revision.Write{WasReady: true}, w.Add(time.Hour), false},
		{"no write", nil, w.Add(time.Hour), false},
	} {
		if got := passed(tc.w, tc.before); got != tc.want {
			t.Errorf("%s: passed = %v, want %v", tc.name, got, tc.want)
		}
	}
	rec := revision.SetState{Write: timed,
		Containers: []revision.ContainerState{{Name: "exporter", Image: "exporter:v2", PreviousContainerID: "containerd://old"}}}
	if got := releasedRecord(rec); got.Write != nil || got.Released == nil || !got.Released.WasReady ||
		got.Containers[0].PreviousContainerID != "" || got.Containers[0].Image != "exporter:v2" {
		t.Errorf("releasedRecord = %+v, want the write released and the container settled", got)
	}
}

// TestSettleBehindStuckWrite: a write that is not back holds the set's
// releasedBefore before it; a pod back from a later write for the margin
// is then written released on its own, and only then.
func TestSettleBehindStuckWrite(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 10, 0, 0, time.UTC)
	latest := Latest{Name: "s-2", Hash: "h2", Now: now}
	pod := func(name string, written, back time.Time) Pod {
		stamp := metav1.NewMicroTime(written)
		p := Pod{Key: types.NamespacedName{Namespace: "db", Name: name}, Updated: true, Upgradable: true, PodReady: true,
			Record: revision.SetState{Hash: "h2", Write: &revision.Write{WasReady: true, At: &stamp}}}
		if !back.IsZero() {
			p.Back, p.BackAt, p.Ready, p.Available = true, back, true, true
		} else {
			p.Disrupting = true
		}
		return p
	}
	pods := []Pod{
		pod("p01", now.Add(-9*time.Minute), time.Time{}),
		pod("p02", now.Add(-7*time.Minute), now.Add(-6*time.Minute)),
		pod("p03", now.Add(-40*time.Second), now.Add(-30*time.Second)),
	}
	was := now.Add(-10 * time.Minute)
	at, _ := ReleasedBefore(pods, was, now, time.Minute)
	if !at.Equal(was) {
		t.Fatalf("ReleasedBefore = %v, want %v: p01's write is not back", at, was)
	}
	for _, tc := range []struct {
		name   string
		margin time.Duration
		want   []string
	}{
		{"p02 back for the margin, p03 not yet", time.Minute, []string{"p02 Settle"}},
		{"no margin: a manager that has just begun to lead writes none", 0, nil},
	} {
		plan, err := Next(Input{Latest: latest, Pods: pods, Strategy: strategy("0", "1"), ReleasedBefore: at, ReleaseMargin: tc.margin})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, outcomeOf(plan).Updates); diff != "" {
			t.Errorf("%s: Updates (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestSettleReadReleasedDown: a pod whose record reads released and that
// is down again gets its record written so, once, for the managers of
// earlier releases; one that serves is left alone.
func TestSettleReadReleasedDown(t *testing.T) {
	latest := Latest{Name: "s-2", Hash: "h2", Now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	released := revision.SetState{Hash: "h2", Released: &revision.Write{WasReady: true}}
	pod := func(name string, available bool) Pod {
		return Pod{Key: types.NamespacedName{Namespace: "db", Name: name}, Updated: true, Upgradable: true, ReadReleased: true,
			PodReady: available, Ready: available, Available: available, Record: released}
	}
	plan, err := Next(Input{Latest: latest, Pods: []Pod{pod("p01", false), pod("p02", true)}, Strategy: strategy("0", "1")})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"p01 Settle"}, outcomeOf(plan).Updates); diff != "" {
		t.Errorf("Updates (-want +got):\n%s", diff)
	}
}
