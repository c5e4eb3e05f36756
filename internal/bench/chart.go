package bench

import (
	"fmt"
	"image/color"
	"io"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Chart is a line chart of a benchmark's results, written as a PNG.
type Chart struct {
	// File is its name under bench/results.
	File   string
	Title  string
	XLabel string
	YLabel string
	Lines  []Line
}

// Line is one line of a Chart: its legend, colour and whether it is
// dashed, and its points.
type Line struct {
	Name   string
	Color  color.Color
	Dashed bool
	Points plotter.XYs
}

// The colours of the controller's lines and the baseline's.
var (
	controllerColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	baselineColor   = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
)

// WritePNG draws the chart, 8 by 4.5 inches, as a PNG into w.
func (c Chart) WritePNG(w io.Writer) error {
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = c.YLabel
	p.Y.Min = 0
	// Top left: the lines start at the bottom left and end at the top right.
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	for _, l := range c.Lines {
		line, err := plotter.NewLine(l.Points)
		if err != nil {
			return fmt.Errorf("chart %s, line %s: %w", c.File, l.Name, err)
		}
		line.Color = l.Color
		line.Width = vg.Points(1.5)
		if l.Dashed {
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		p.Add(line)
		p.Legend.Add(l.Name, line)
	}
	to, err := p.WriterTo(8*vg.Inch, 4.5*vg.Inch, "png")
	if err != nil {
		return err
	}
	_, err = to.WriteTo(w)
	return err
}

// Charts returns, for the smaller size of the report, a chart per
// maxUnavailable of its first round: updated and updated-ready pods over
// time, the controller's against the baseline's. A pair whose phases are
// not both there gets no chart.
func (r RolloutReport) Charts() []Chart {
	if len(r.Sizes) == 0 {
		return nil
	}
	pods := r.Sizes[0]
	var charts []Chart
	var mus []string
	for _, p := range r.Phases {
		if p.Pods == pods && p.Round == 1 && !slices.Contains(mus, p.MaxUnavailable) {
			mus = append(mus, p.MaxUnavailable)
		}
	}
	for _, mu := range mus {
		var ctl, base *RolloutPhase
		for i, p := range r.Phases {
			if p.Pods != pods || p.Round != 1 || p.MaxUnavailable != mu {
				continue
			}
			switch p.Kind {
			case KindController:
				ctl = &r.Phases[i]
			case KindBaseline:
				base = &r.Phases[i]
			}
		}
		if ctl == nil || base == nil {
			continue
		}
		charts = append(charts, Chart{
			// Named, as the summary keys are, after the full scale's size.
			File:   fmt.Sprintf("rollout_1000_%spct.png", strings.TrimSuffix(mu, "%")),
			Title:  fmt.Sprintf("Rollout of %d pods, maxUnavailable %s, round 1 (scale %s)", pods, mu, r.Scale),
			XLabel: "seconds since the image change",
			YLabel: "pods",
			Lines: []Line{
				{Name: "controller: updated", Color: controllerColor, Dashed: true, Points: steps(ctl.Progress, func(p Progress) int { return p.Updated })},
				{Name: "controller: updated-ready", Color: controllerColor, Points: steps(ctl.Progress, func(p Progress) int { return p.UpdatedReady })},
				{Name: "baseline: updated", Color: baselineColor, Dashed: true, Points: steps(base.Progress, func(p Progress) int { return p.Updated })},
				{Name: "baseline: updated-ready", Color: baselineColor, Points: steps(base.Progress, func(p Progress) int { return p.UpdatedReady })},
			},
		})
	}
	return charts
}

// steps turns progress samples into the points of a step line: a count
// holds until the next sample, which starts from 0 at 0 s. Worked case:
// samples (1 s, 10) and (3 s, 40) give (0, 0) (1, 0) (1, 10) (3, 10) (3, 40).
func steps(progress []Progress, value func(Progress) int) plotter.XYs {
	pts := plotter.XYs{{X: 0, Y: 0}}
	for _, p := range progress {
		last := pts[len(pts)-1]
		pts = append(pts, plotter.XY{X: p.Seconds, Y: last.Y}, plotter.XY{X: p.Seconds, Y: float64(value(p))})
	}
	return pts
}
