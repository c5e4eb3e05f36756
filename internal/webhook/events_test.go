package webhook

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sidecarset/sidecarset/internal/inject"
)

func TestEventLimiter(t *testing.T) {
	var l eventLimiter
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		set, reason string
		at          time.Duration
		want        bool
	}{
		{"a", inject.ReasonInjectionSkipped, 0, true},
		{"a", inject.ReasonInjectionSkipped, time.Second, false},
		{"a", inject.ReasonInjectionWarning, time.Second, true},
		{"b", inject.ReasonInjectionSkipped, time.Second, true},
		{"a", inject.ReasonInjectionSkipped, EventInterval - time.Nanosecond, false},
		{"a", inject.ReasonInjectionSkipped, EventInterval, true},
		{"a", inject.ReasonInjectionSkipped, EventInterval + time.Second, false},
	}
	for i, s := range steps {
		if got := l.allow(s.set, s.reason, t0.Add(s.at)); got != s.want {
			t.Errorf("step %d: allow(%s, %s) at +%s = %v, want %v", i, s.set, s.reason, s.at, got, s.want)
		}
	}
}

func TestEventLimiterForgetsOldEntries(t *testing.T) {
	var l eventLimiter
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range maxLimiterEntries {
		l.allow(strings.Repeat("x", i+1), inject.ReasonInjectionSkipped, t0)
	}
	l.allow("late", inject.ReasonInjectionSkipped, t0.Add(EventInterval))
	if n := len(l.last); n != 1 {
		t.Errorf("%d entries after the interval, want 1", n)
	}
}

func TestEventsBySetAndReason(t *testing.T) {
	got := eventsBySetAndReason([]inject.Event{
		{Set: "a", Reason: inject.ReasonInjectionWarning, Message: "no resources"},
		{Set: "b", Reason: inject.ReasonInjectionSkipped, Message: "port clash"},
		{Set: "a", Reason: inject.ReasonInjectionWarning, Message: "a tag"},
		{Set: "a", Reason: inject.ReasonNotInjected, Message: "name taken"},
	})
	want := []inject.Event{
		{Set: "a", Reason: inject.ReasonInjectionWarning, Message: "no resources; a tag"},
		{Set: "b", Reason: inject.ReasonInjectionSkipped, Message: "port clash"},
		{Set: "a", Reason: inject.ReasonNotInjected, Message: "name taken"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("eventsBySetAndReason() (-want +got):\n%s", diff)
	}
}

func TestTruncate(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a bit longer", 10, "a bit l..."},
		// "é" is two bytes: the cut never splits it.
		{"aaaaaaééx", 10, "aaaaaa..."},
	}
	for _, tc := range cases {
		if got := truncate(tc.in, tc.n); got != tc.want || len(got) > tc.n {
			t.Errorf("truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
