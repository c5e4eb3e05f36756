package bench

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// The two kinds of rollout phase: the manager's controller rolling a
// SidecarSet's new image out, and the raw baseline writing the same images
// into the same number of pods by itself.
const (
	KindController = "controller"
	KindBaseline   = "baseline"
)

// Progress is how far a rollout phase got, Seconds after it started:
// pods written with the new image (updated) and those of them back Ready on
// it (updated-ready).
type Progress struct {
	Seconds      float64 `json:"s"`
	Updated      int     `json:"updated"`
	UpdatedReady int     `json:"updated_ready"`
}

// RolloutPhase is one rollout, by the controller or by the baseline.
type RolloutPhase struct {
	Pods           int    `json:"pods"`
	MaxUnavailable string `json:"max_unavailable"`
	Round          int    `json:"round"`
	Kind           string `json:"kind"`
	// Seconds runs from the image change (the SidecarSet's, or the
	// baseline's first write) to the end: the controller's status saying
	// Complete, the baseline's last status write after every pod is back.
	Seconds float64 `json:"seconds"`
	// The writes the apiserver counted during the phase: pod patches (not
	// the nodes' status writes), SidecarSet status writes, and events
	// created through events.k8s.io (the controller's; the nodes write
	// theirs through the core API).
	PodPatches   float64 `json:"pod_patches"`
	StatusWrites float64 `json:"status_writes"`
	Events       float64 `json:"events"`
	// Conflicts counts the baseline's patches the apiserver refused for a
	// stale resourceVersion (written again once its cache caught up).
	Conflicts int        `json:"conflicts,omitempty"`
	Progress  []Progress `json:"progress"`
}

// RolloutComparison sets the controller against the baseline for one size
// and maxUnavailable, over the rounds.
type RolloutComparison struct {
	Pods           int    `json:"pods"`
	MaxUnavailable string `json:"max_unavailable"`
	// ControllerSeconds and BaselineSeconds are the medians over the
	// rounds of their Seconds; Ratio the first over the second.
	ControllerSeconds float64 `json:"controller_seconds"`
	BaselineSeconds   float64 `json:"baseline_seconds"`
	Ratio             float64 `json:"ratio"`
	Goal              Goal    `json:"goal"`
}

// RolloutReport is what the rollout benchmark writes to
// bench/results/rollout.json.
type RolloutReport struct {
	Scale   string `json:"scale"`
	Date    string `json:"date"`
	Machine string `json:"machine"`
	// Sizes are the pod counts measured, smaller first; the goals and the
	// summary keys go by position (RolloutGoals). Rounds are how many
	// times each was rolled out per maxUnavailable and kind, by position.
	Sizes       []int  `json:"sizes"`
	Rounds      []int  `json:"rounds"`
	LoadAverage string `json:"load_average"`
	// Concurrency is how many pod writes the baseline keeps in flight, as
	// the controller does within one reconcile.
	Concurrency int                 `json:"concurrency"`
	Phases      []RolloutPhase      `json:"phases"`
	Comparisons []RolloutComparison `json:"comparisons"`
}

// RolloutGoals are the ratio goals by the position of a size in
// RolloutReport.Sizes, and the name of its summary key: at full scale the
// sizes are 1,000 and 10,000 pods; a small run keeps the keys for its own
// two sizes and says which pods they measured (RolloutReport.Summary).
var RolloutGoals = []struct {
	Key string
	Max float64
}{
	{"rollout_1000_ratio", 1.15},
	{"rollout_10000_ratio", 1.3},
}

// Median returns the median of vs, the mean of the two middle values when
// there is an even number of them, and 0 for none. It does not change vs.
// Worked cases: [3 1 2] -> 2; [4 1 3 2] -> 2.5; [7] -> 7.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return (s[mid-1] + s[mid]) / 2
}

// CompareRollouts returns, for every size and maxUnavailable in phases,
// the medians of the controller's and the baseline's seconds to their
// last pod write (End) and their ratio, judged against the goal of the
// size's position in sizes (none for a size not listed), and the median of
// the controller's seconds to Complete. A pair that lacks either kind of
// phase is left out. Worked case: 1,000 pods at 100%, controller 12 s and
// 14 s, baseline 10 s and 12 s: medians 13 s and 11 s, ratio 1.18, over
// the goal of 1.15 (not met).
func CompareRollouts(phases []RolloutPhase, sizes []int) []RolloutComparison {
	type key struct {
		pods int
		mu   string
	}
	seconds := map[key]map[string][]float64{}
	var order []key
	for _, p := range phases {
		k := key{p.Pods, p.MaxUnavailable}
		if seconds[k] == nil {
			seconds[k] = map[string][]float64{}
			order = append(order, k)
		}
		seconds[k][p.Kind] = append(seconds[k][p.Kind], p.Seconds)
	}
	var out []RolloutComparison
	for _, k := range order {
		ctl, base := seconds[k][KindController], seconds[k][KindBaseline]
		if len(ctl) == 0 || len(base) == 0 {
			continue
		}
		c := RolloutComparison{Pods: k.pods, MaxUnavailable: k.mu, ControllerSeconds: Median(ctl),
			BaselineSeconds: Median(base)}
		c.Ratio = ratio(c.ControllerSeconds, c.BaselineSeconds)
		if i := slices.Index(sizes, k.pods); i >= 0 && i < len(RolloutGoals) {
			g := RolloutGoals[i]
			c.Goal = Goal{Name: fmt.Sprintf("time to the last pod write / baseline, %d pods", k.pods), Target: fmt.Sprintf("≤ %.2f", g.Max),
				Value: c.Ratio, Met: c.Ratio > 0 && c.Ratio <= g.Max}
		}
		out = append(out, c)
	}
	return out
}

// Summary returns the keys the report adds to bench/results/summary.json:
// for each size of RolloutGoals, the worst ratio over its maxUnavailable
// values (Key), each one's own (Key_100pct, Key_10pct for "100%", "10%"),
// and the pods the size measured (rollout_1000_pods ...), which a small run
// makes fewer. A size with no comparison gets NotAvailable.
func (r RolloutReport) Summary() map[string]any {
	s := map[string]any{}
	for i, g := range RolloutGoals {
		pods := strings.TrimSuffix(g.Key, "_ratio") + "_pods"
		s[g.Key], s[pods] = NotAvailable, NotAvailable
		if i >= len(r.Sizes) {
			continue
		}
		s[pods] = r.Sizes[i]
		worst := math.Inf(-1)
		for _, c := range r.Comparisons {
			if c.Pods != r.Sizes[i] {
				continue
			}
			s[g.Key+"_"+strings.TrimSuffix(c.MaxUnavailable, "%")+"pct"] = round(c.Ratio, 3)
			worst = max(worst, c.Ratio)
		}
		if !math.IsInf(worst, -1) {
			s[g.Key] = round(worst, 3)
		}
	}
	return s
}

// WriteMarkdown writes the report as bench/results/rollout.md: the goals
// met or not, then every phase.
func (r RolloutReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Rollout benchmark\n\n")
	fmt.Fprintf(&b, "Scale %s, %s, %s with the controller and the baseline interleaved; %s.\n", r.Scale, r.Date, r.roundsText(), r.Machine)
	fmt.Fprintf(&b, "One-minute load average %s.\n\n", r.LoadAverage)
	fmt.Fprintf(&b, "One SidecarSet's image changes over all its pods on simulated nodes that act at once. The controller's time runs ")
	fmt.Fprintf(&b, "from the SidecarSet's update to its status saying Complete, after its last pod write: a pod back from its write ")
	fmt.Fprintf(&b, "needs no write of its own, the set's status.releasedBefore passing that write. The baseline does the job with the same client settings ")
	fmt.Fprintf(&b, "(no client-side rate limit) and nothing else: it keeps as many pods disrupted as maxUnavailable allows, writes each ")
	fmt.Fprintf(&b, "pod's image and a record of the same size in one patch carrying the pod's resourceVersion, %d at a time, waits on a ", r.Concurrency)
	fmt.Fprintf(&b, "watch for the pod to be Ready on a new imageID, and writes a SidecarSet's status as often as the controller did in the ")
	fmt.Fprintf(&b, "round before; its time runs from its first write to its last status write. Its pods are copies of the controller's, ")
	fmt.Fprintf(&b, "on the same nodes, in another namespace. Times are medians over the rounds. ")
	fmt.Fprintf(&b, "Its SidecarSet has minReadySeconds 0, as the baseline waits for no pod.\n\n")

	fmt.Fprintf(&b, "## Goals\n\n")
	fmt.Fprintf(&b, "| pods | maxUnavailable | controller s | baseline s | ratio | goal | met |\n|---|---|---|---|---|---|---|\n")
	for _, c := range r.Comparisons {
		goal, verdict := "", ""
		if c.Goal.Name != "" {
			goal, verdict = c.Goal.Target, met(c.Goal.Met)
		}
		fmt.Fprintf(&b, "| %d | %s | %.1f | %.1f | %.3f | %s | %s |\n", c.Pods, c.MaxUnavailable, c.ControllerSeconds,
			c.BaselineSeconds, c.Ratio, goal, verdict)
	}

	fmt.Fprintf(&b, "\n## Phases\n\n")
	fmt.Fprintf(&b, "Writes as the apiserver counted them during the phase: pod patches, SidecarSet status writes, events.k8s.io events.\n\n")
	fmt.Fprintf(&b, "| pods | maxUnavailable | round | kind | seconds | pods/s | pod patches | status writes | events | conflicts |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|\n")
	phases := slices.Clone(r.Phases)
	slices.SortStableFunc(phases, func(a, c RolloutPhase) int {
		return cmp.Or(cmp.Compare(a.Pods, c.Pods), cmp.Compare(c.MaxUnavailable, a.MaxUnavailable), cmp.Compare(a.Round, c.Round))
	})
	for _, p := range phases {
		fmt.Fprintf(&b, "| %d | %s | %d | %s | %.1f | %.0f | %.0f | %.0f | %.0f | %d |\n", p.Pods, p.MaxUnavailable, p.Round, p.Kind,
			p.Seconds, ratio(float64(p.Pods), p.Seconds), p.PodPatches, p.StatusWrites, p.Events, p.Conflicts)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// roundsText says how many rounds each size had: "5 rounds of 1000 pods,
// 2 of 10000".
func (r RolloutReport) roundsText() string {
	var parts []string
	for i, pods := range r.Sizes {
		if i >= len(r.Rounds) {
			break
		}
		if i == 0 {
			parts = append(parts, fmt.Sprintf("%d rounds of %d pods", r.Rounds[i], pods))
		} else {
			parts = append(parts, fmt.Sprintf("%d of %d", r.Rounds[i], pods))
		}
	}
	return strings.Join(parts, ", ")
}
