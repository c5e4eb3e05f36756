package bench

import (
	"fmt"
	"io"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The memory goals, per pod in the cluster.
const (
	// ManagedGoalBytes is the most RSS a managed pod may cost: 8 KiB.
	ManagedGoalBytes = 8 << 10
	// UnmanagedGoalBytes stands for "about nothing": a 32nd of the
	// managed goal, which over 40,000 pods is 10 MiB, about what the
	// RSS of an idle manager moves by between two readings.
	UnmanagedGoalBytes = ManagedGoalBytes / 32
)

// MemoryStep is the manager process measured with a given population of
// pods, after it has counted all of them in the SidecarSet's status.
type MemoryStep struct {
	Name          string `json:"name"`
	ManagedPods   int    `json:"managed_pods"`
	UnmanagedPods int    `json:"unmanaged_pods"`
	// Memory is the process's, from /proc, once it has settled.
	Memory Memory `json:"memory"`
	// HeapInuse is the Go heap in use after a collection
	// (go_memstats_heap_inuse_bytes).
	HeapInuse uint64 `json:"heap_inuse_bytes"`
	// ResyncSeconds is how long from the process's start until its
	// status counted every pod.
	ResyncSeconds float64 `json:"resync_seconds"`
}

// Pods is every pod in the cluster at this step.
func (s MemoryStep) Pods() int { return s.ManagedPods + s.UnmanagedPods }

// MemoryReport is what the memory benchmark writes to
// bench/results/memory.json.
type MemoryReport struct {
	Scale       string `json:"scale"`
	Date        string `json:"date"`
	Machine     string `json:"machine"`
	LoadAverage string `json:"load_average"`
	// Unmanaged says which pods the unmanaged ones are.
	Unmanaged string       `json:"unmanaged"`
	Steps     []MemoryStep `json:"steps"`
	// The slopes between steps (PerPod), in bytes per pod.
	RSSPerManagedPod    float64 `json:"rss_bytes_per_managed_pod"`
	RSSPerUnmanagedPod  float64 `json:"rss_bytes_per_unmanaged_pod"`
	HeapPerManagedPod   float64 `json:"heap_bytes_per_managed_pod"`
	HeapPerUnmanagedPod float64 `json:"heap_bytes_per_unmanaged_pod"`
	Goals               []Goal  `json:"goals"`
}

// PerPod is the cost of one more pod between steps from and to: the
// difference of value over the difference of pods. Worked case: 120 MiB
// RSS with 1,000 managed pods, 190 MiB with 10,000 (the same unmanaged
// pods in both): 70 MiB / 9,000 = 8,155.6 bytes per managed pod. From and
// to must differ in pods, and only in one kind of them.
func PerPod(from, to MemoryStep, value func(MemoryStep) uint64) (float64, error) {
	dm, du := to.ManagedPods-from.ManagedPods, to.UnmanagedPods-from.UnmanagedPods
	if (dm == 0) == (du == 0) {
		return 0, fmt.Errorf("steps %q and %q: want a change in managed or in unmanaged pods, not both or neither", from.Name, to.Name)
	}
	return (float64(value(to)) - float64(value(from))) / float64(dm+du), nil
}

// Judge fills the report's slopes and goals from its steps: unmanaged
// pods from the first step to the second (the same managed pods in
// both), managed pods from the third to the last.
func (r *MemoryReport) Judge() error {
	if len(r.Steps) < 4 {
		return fmt.Errorf("%d steps measured, want 4: none, unmanaged, and two counts of managed pods", len(r.Steps))
	}
	rss := func(s MemoryStep) uint64 { return s.Memory.RSS }
	heap := func(s MemoryStep) uint64 { return s.HeapInuse }
	unmanagedFrom, unmanagedTo := r.Steps[0], r.Steps[1]
	managedFrom, managedTo := r.Steps[2], r.Steps[len(r.Steps)-1]
	for _, slope := range []struct {
		dst      *float64
		from, to MemoryStep
		value    func(MemoryStep) uint64
	}{
		{&r.RSSPerUnmanagedPod, unmanagedFrom, unmanagedTo, rss},
		{&r.HeapPerUnmanagedPod, unmanagedFrom, unmanagedTo, heap},
		{&r.RSSPerManagedPod, managedFrom, managedTo, rss},
		{&r.HeapPerManagedPod, managedFrom, managedTo, heap},
	} {
		v, err := PerPod(slope.from, slope.to, slope.value)
		if err != nil {
			return err
		}
		*slope.dst = round(v, 1)
	}
	r.Goals = []Goal{
		{Name: "RSS per managed pod", Target: fmt.Sprintf("≤ %d B", ManagedGoalBytes), Value: r.RSSPerManagedPod,
			Met: r.RSSPerManagedPod <= ManagedGoalBytes},
		{Name: "RSS per unmanaged pod", Target: fmt.Sprintf("≈ 0 (≤ %d B)", UnmanagedGoalBytes), Value: r.RSSPerUnmanagedPod,
			Met: r.RSSPerUnmanagedPod <= UnmanagedGoalBytes},
	}
	return nil
}

// Summary returns the keys the report adds to bench/results/summary.json.
func (r MemoryReport) Summary() map[string]any {
	return map[string]any{
		"rss_bytes_per_managed_pod":   r.RSSPerManagedPod,
		"rss_bytes_per_unmanaged_pod": r.RSSPerUnmanagedPod,
	}
}

// WriteMarkdown writes the report as bench/results/memory.md: the goals
// met or not, then every step.
func (r MemoryReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Memory benchmark\n\n")
	fmt.Fprintf(&b, "Scale %s, %s; %s. One-minute load average %s.\n\n", r.Scale, r.Date, r.Machine, r.LoadAverage)
	fmt.Fprintf(&b, "The manager runs as its own process, started afresh at each step so that it lists every pod: ")
	fmt.Fprintf(&b, "its RSS (VmRSS of /proc/<pid>/status) is read once the SidecarSet's status counts every pod, ")
	fmt.Fprintf(&b, "its heap has been collected and the RSS has stopped falling. Unmanaged pods: %s. ", r.Unmanaged)
	fmt.Fprintf(&b, "A figure per pod is the slope between two steps that differ in one kind of pod only.\n\n")
	fmt.Fprintf(&b, "## Goals\n\n| goal | target | value | met |\n|---|---|---|---|\n")
	for _, g := range r.Goals {
		fmt.Fprintf(&b, "| %s | %s | %.0f B | %s |\n", g.Name, g.Target, g.Value, met(g.Met))
	}
	fmt.Fprintf(&b, "\nGo heap in use per managed pod: %.0f B; per unmanaged pod: %.0f B.\n", r.HeapPerManagedPod, r.HeapPerUnmanagedPod)
	fmt.Fprintf(&b, "\n## Steps\n\n| step | managed pods | unmanaged pods | RSS MiB | anonymous MiB | peak MiB | heap in use MiB | resync s |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "| %s | %d | %d | %.1f | %.1f | %.1f | %.1f | %.1f |\n", s.Name, s.ManagedPods, s.UnmanagedPods,
			mib(s.Memory.RSS), mib(s.Memory.Anon), mib(s.Memory.Peak), mib(s.HeapInuse), s.ResyncSeconds)
	}
	fmt.Fprintf(&b, "\n![memory vs pods](memory.png)\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func mib(bytes uint64) float64 { return float64(bytes) / (1 << 20) }

// WritePNG draws bench/results/memory.png: the RSS and the heap in use
// against the pods in the cluster, step by step, and the RSS the managed
// goal allows over the steps with unmanaged pods only.
func (r MemoryReport) WritePNG(w io.Writer) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("sidecarset-manager memory (scale %s)", r.Scale)
	p.X.Label.Text = "pods in the cluster (unmanaged first, then managed)"
	p.Y.Label.Text = "MiB"
	p.Legend.Top, p.Legend.Left = true, true
	rss, heap := make(plotter.XYs, len(r.Steps)), make(plotter.XYs, len(r.Steps))
	for i, s := range r.Steps {
		rss[i] = plotter.XY{X: float64(s.Pods()), Y: mib(s.Memory.RSS)}
		heap[i] = plotter.XY{X: float64(s.Pods()), Y: mib(s.HeapInuse)}
	}
	for i, series := range []struct {
		name string
		xys  plotter.XYs
	}{{"RSS", rss}, {"Go heap in use", heap}} {
		line, points, err := plotter.NewLinePoints(series.xys)
		if err != nil {
			return err
		}
		line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
		points.Shape = draw.CircleGlyph{}
		p.Add(line, points)
		p.Legend.Add(series.name, line, points)
	}
	if len(r.Steps) >= 2 {
		base := r.Steps[1]
		last := r.Steps[len(r.Steps)-1]
		goal, err := plotter.NewLine(plotter.XYs{
			{X: float64(base.Pods()), Y: mib(base.Memory.RSS)},
			{X: float64(last.Pods()), Y: mib(base.Memory.RSS + uint64(last.ManagedPods-base.ManagedPods)*ManagedGoalBytes)},
		})
		if err != nil {
			return err
		}
		goal.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		goal.Color = plotutil.Color(2)
		p.Add(goal)
		p.Legend.Add(fmt.Sprintf("RSS goal: %d KiB per managed pod", ManagedGoalBytes>>10), goal)
	}
	p.Add(plotter.NewGrid())
	to, err := p.WriterTo(8*vg.Inch, 5*vg.Inch, "png")
	if err != nil {
		return err
	}
	_, err = to.WriteTo(w)
	return err
}
