package playground

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
)

// pacer holds the demo between steps until the user says go on: a line
// from in (Enter) takes the next step; "a" and Enter, or the end of in,
// runs the rest without stopping. Without in it never waits.
type pacer struct {
	lines <-chan string
	out   io.Writer
	auto  bool
}

func newPacer(in io.Reader, out io.Writer) *pacer {
	if in == nil {
		return &pacer{auto: true}
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(in)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	return &pacer{lines: lines, out: out}
}

// wait asks for the step named next and returns once the user answered,
// or at once when running the rest; ctx ending stops it.
func (p *pacer) wait(ctx context.Context, next string) error {
	if p.auto {
		return nil
	}
	fmt.Fprintf(p.out, "\n[Enter: step %s; a, Enter: all the rest without stopping] ", next)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case line, ok := <-p.lines:
		p.auto = !ok || strings.EqualFold(strings.TrimSpace(line), "a")
		if !ok {
			fmt.Fprintln(p.out)
		}
		return nil
	}
}
