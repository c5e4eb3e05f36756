package webhook

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"

	"github.com/sidecarset/sidecarset/internal/inject"
)

func TestEventLimiter(t *testing.T) {
	var l eventLimiter
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		set, reason string
		at          time.Duration
		want        bool
		// pods is how many pods an event let through stands for.
		pods int
	}{
		// The worked case of allow.
		{"w", inject.ReasonInjectionWarning, 0, true, 1},
		{"w", inject.ReasonInjectionWarning, time.Second, false, 0},
		{"w", inject.ReasonInjectionWarning, 2 * time.Second, false, 0},
		{"w", inject.ReasonInjectionWarning, 15 * time.Minute, true, 3},

		{"a", inject.ReasonInjectionSkipped, 0, true, 1},
		{"a", inject.ReasonInjectionSkipped, time.Second, false, 0},
		{"a", inject.ReasonInjectionWarning, time.Second, true, 1},
		{"b", inject.ReasonInjectionSkipped, time.Second, true, 1},
		{"a", inject.ReasonInjectionSkipped, EventInterval - time.Nanosecond, false, 0},
		{"a", inject.ReasonInjectionSkipped, EventInterval, true, 3},
		{"a", inject.ReasonInjectionSkipped, EventInterval + time.Second, false, 0},
		// Long after, with nothing held back since: this pod alone.
		{"b", inject.ReasonInjectionSkipped, 10 * EventInterval, true, 1},
	}
	for i, s := range steps {
		pods, ok := l.allow(s.set, s.reason, t0.Add(s.at))
		if ok != s.want || pods != s.pods {
			t.Errorf("step %d: allow(%s, %s) at +%s = (%d, %v), want (%d, %v)", i, s.set, s.reason, s.at, pods, ok, s.pods, s.want)
		}
	}
}

func TestEventNote(t *testing.T) {
	pod := klog.KRef("shop", "db-0")
	long := strings.Repeat("x", 2*noteLimit)
	cases := []struct {
		name string
		msg  string
		pods int
		want string
	}{
		{"one pod: no count", "injection changes the pod's QoS class", 1, "pod shop/db-0: injection changes the pod's QoS class"},
		{"held back pods: counted", "injection changes the pod's QoS class", 17, "pod shop/db-0: injection changes the pod's QoS class (17 pods since the last event)"},
		{"a long message is cut, the count kept", long, 2,
			"pod shop/db-0: " + long[:noteLimit-len("pod shop/db-0: ")-len("... (2 pods since the last event)")] + "... (2 pods since the last event)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := eventNote(pod, tc.msg, tc.pods)
			if got != tc.want {
				t.Errorf("eventNote() = %q, want %q", got, tc.want)
			}
			if len(got) > noteLimit {
				t.Errorf("eventNote() is %d bytes, more than %d", len(got), noteLimit)
			}
		})
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
