package rollout_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// A draw is one value the model drew, under its label: an int, the index
// of what it picked, or a list of groups.
//
// Every draw of the model goes through intn, coin, pick and groups, which
// draw from rapid and append to the model's trace. A trace replayed
// (TestModelKept) gives each draw the next value recorded under its label,
// so a kept case outlives changes to the generator that a seed would not:
// a draw the trace lacks (one added since, or one past its end) takes its
// quiet value, the one that leaves the model as it was before that draw
// was added: its first, unless intnOr says otherwise.
type draw struct{ label, value string }

// formatTrace writes trace as "label=value label=value …".
func formatTrace(trace []draw) string {
	words := make([]string, len(trace))
	for i, d := range trace {
		words[i] = d.label + "=" + d.value
	}
	return strings.Join(words, " ")
}

// parseTrace reads what formatTrace wrote.
func parseTrace(text string) ([]draw, error) {
	var trace []draw
	for word := range strings.FieldsSeq(text) {
		label, value, ok := strings.Cut(word, "=")
		if !ok {
			return nil, fmt.Errorf("trace word %q is not label=value", word)
		}
		trace = append(trace, draw{label, value})
	}
	return trace, nil
}

// next returns the value the replayed trace holds for label, or def when
// the trace's next draw is another one's.
func (m *model) next(label, def string) string {
	if len(m.replay) == 0 || m.replay[0].label != label {
		return def
	}
	v := m.replay[0].value
	m.replay = m.replay[1:]
	return v
}

func (m *model) note(label, value string) { m.trace = append(m.trace, draw{label, value}) }

// intn draws an int in [lo, hi].
func (m *model) intn(lo, hi int, label string) int { return m.intnOr(lo, hi, lo, label) }

// intnOr draws an int in [lo, hi] that a replay the trace lacks takes as
// def: for a draw whose first value is not the quiet one.
func (m *model) intnOr(lo, hi, def int, label string) int {
	var v int
	if m.replay != nil {
		v, _ = strconv.Atoi(m.next(label, strconv.Itoa(def)))
		v = min(max(v, lo), hi)
	} else {
		v = rapid.IntRange(lo, hi).Draw(m.t, label)
	}
	m.note(label, strconv.Itoa(v))
	return v
}

// coin draws a bool.
func (m *model) coin(label string) bool {
	var v bool
	if m.replay != nil {
		v = m.next(label, "0") == "1"
	} else {
		v = rapid.Bool().Draw(m.t, label)
	}
	m.note(label, map[bool]string{false: "0", true: "1"}[v])
	return v
}

// pick draws one of from, recorded by its index.
func pick[V comparable](m *model, from []V, label string) V {
	var i int
	if m.replay != nil {
		i, _ = strconv.Atoi(m.next(label, "0"))
		i = min(max(i, 0), len(from)-1)
	} else {
		i = slices.Index(from, rapid.SampledFrom(from).Draw(m.t, label))
	}
	m.note(label, strconv.Itoa(i))
	return from[i]
}

// groups draws one to three distinct groups.
func (m *model) groups(label string) []string {
	var v []string
	if m.replay != nil {
		v = strings.Split(m.next(label, groups[0]), ",")
	} else {
		v = rapid.SliceOfNDistinct(rapid.SampledFrom(groups), 1, 3, rapid.ID[string]).Draw(m.t, label)
	}
	m.note(label, strings.Join(v, ","))
	return v
}

// TestTrace: a trace reads back as written, and a replay gives each draw
// the value recorded under its label, or the first value to a draw the
// trace lacks.
func TestTrace(t *testing.T) {
	text := "sets=2 s0-groups=a,c steps=7"
	trace, err := parseTrace(text)
	if err != nil {
		t.Fatal(err)
	}
	if got := formatTrace(trace); got != text {
		t.Errorf("formatTrace(parseTrace(%q)) = %q", text, got)
	}
	if _, err := parseTrace("sets"); err == nil {
		t.Error("parseTrace(\"sets\"): no error")
	}
	rapid.Check(t, func(rt *rapid.T) {
		m := &model{t: rt, replay: slices.Clone(trace)}
		got := fmt.Sprintf("%v %v %v %v %v", m.coin("mirror"), m.intn(1, 3, "sets"), m.groups("s0-groups"), pick(m, []string{"x", "y"}, "new"), m.intn(1, 5, "steps"))
		if want := "false 2 [a c] x 5"; got != want {
			rt.Fatalf("replayed %s, want %s", got, want)
		}
		if want := "mirror=0 sets=2 s0-groups=a,c new=0 steps=5"; formatTrace(m.trace) != want {
			rt.Fatalf("trace %q, want %q", formatTrace(m.trace), want)
		}
	})
}
