package playground

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// TestPacer: each line takes one step; "a" or the end of the input runs
// the rest; without an input nothing waits; a cancelled context stops a
// wait.
func TestPacer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    io.Reader
		steps int
		// prompts is how many times it asks.
		prompts int
	}{
		{"no input", nil, 4, 0},
		{"a line per step", strings.NewReader("\n\n\n"), 3, 3},
		{"a runs the rest", strings.NewReader("\na\n\n"), 5, 2},
		{"the input ends", strings.NewReader("\n"), 5, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			p := newPacer(tc.in, &out)
			for i := range tc.steps {
				if err := p.wait(t.Context(), "step"); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			if got := strings.Count(out.String(), "[Enter: step"); got != tc.prompts {
				t.Errorf("asked %d times, want %d:\n%s", got, tc.prompts, out.String())
			}
		})
	}

	r, w := io.Pipe()
	defer w.Close()
	p := newPacer(r, io.Discard)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := p.wait(ctx, "step"); err == nil {
		t.Error("wait with no line and a cancelled context returned nil")
	}
}
