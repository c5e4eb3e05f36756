package bench

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// The admission benchmark's variants: how a pod gets created.
const (
	// VariantPlain creates one-container pods in a namespace no admission
	// webhook sees.
	VariantPlain = "A"
	// VariantFloor writes the pod the webhook would have stored, sidecars
	// and records included, directly in such a namespace: what any
	// injector pays at least for the bigger object. Goals are ratios to it.
	VariantFloor = "B"
	// VariantWebhook creates one-container pods that the mutating webhook
	// injects.
	VariantWebhook = "C"
	// VariantPolicy creates them where MutatingAdmissionPolicies inject.
	VariantPolicy = "D"
)

// LoadBulk names the phase where many clients create pods as fast as the
// apiserver takes them; the others are named by their offered rate.
const LoadBulk = "bulk"

// RateLoad names the phase at an offered rate: "200/s".
func RateLoad(perSecond int) string {
	return fmt.Sprintf("%d/s", perSecond)
}

// The goals, as ratios to the floor, judged at GoalRate.
const (
	GoalRate = 200
	// MaxP50OverheadMS is how much later the median create may answer.
	MaxP50OverheadMS = 1.0
	// MaxP99Ratio bounds the 99th percentile's ratio to the floor's.
	MaxP99Ratio = 1.5
	// MinBulkRatio is the least share of the floor's bulk rate.
	MinBulkRatio = 0.8
	// MaxManagerCPUMicros is the manager's CPU per admitted pod.
	MaxManagerCPUMicros = 150.0
)

// Phase is one measured step of the admission benchmark: one variant's
// creates at one load, in one round, with one number of SidecarSets.
type Phase struct {
	Sets    int    `json:"sets"`
	Round   int    `json:"round"`
	Variant string `json:"variant"`
	Load    string `json:"load"`
	// Clients is how many create at once in bulk; 0 at an offered rate,
	// where each create runs on its own as its time comes.
	Clients int `json:"clients,omitempty"`
	// Pods is how many creates were sent, Errors how many failed.
	Pods   int `json:"pods"`
	Errors int `json:"errors"`
	// FirstError is the first failed create's error.
	FirstError string `json:"first_error,omitempty"`
	// Seconds is from the first create sent to the last answer.
	Seconds float64 `json:"seconds"`
	// AchievedPerSecond counts the creates that succeeded.
	AchievedPerSecond float64 `json:"achieved_per_s"`
	Latencies
	APIServerCPUSeconds float64 `json:"apiserver_cpu_s"`
	ManagerCPUSeconds   float64 `json:"manager_cpu_s"`
	// WebhookCalls is how often the apiserver called the pod webhook.
	WebhookCalls float64 `json:"webhook_calls"`
	// Samples are the latencies of the creates that succeeded.
	Samples []time.Duration `json:"-"`
}

// Created is how many creates succeeded.
func (p Phase) Created() int { return p.Pods - p.Errors }

// APIServerCPUMicrosPerCreate is the apiserver's CPU per successful create.
func (p Phase) APIServerCPUMicrosPerCreate() float64 {
	return perCreate(p.APIServerCPUSeconds, p.Created())
}

// ManagerCPUMicrosPerCreate is the manager's CPU per successful create.
func (p Phase) ManagerCPUMicrosPerCreate() float64 {
	return perCreate(p.ManagerCPUSeconds, p.Created())
}

func perCreate(seconds float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return seconds * 1e6 / float64(n)
}

// Pool merges the rounds of each (sets, variant, load): counts, seconds
// and CPU add up, the rate is what succeeded over the seconds, and the
// percentiles are those of every sample together. The result is sorted by
// sets, variant and load as first seen; Round is 0. Worked case: round 1
// made 100 pods in 2 s and round 2 made 100 in 3 s, so pooled: 200 pods in
// 5 s, 40/s.
func Pool(phases []Phase) []Phase {
	type key struct {
		sets          int
		variant, load string
	}
	var order []key
	pooled := map[key]*Phase{}
	for _, p := range phases {
		k := key{p.Sets, p.Variant, p.Load}
		q, ok := pooled[k]
		if !ok {
			q = &Phase{Sets: p.Sets, Variant: p.Variant, Load: p.Load, Clients: p.Clients}
			pooled[k] = q
			order = append(order, k)
		}
		q.Pods += p.Pods
		q.Errors += p.Errors
		q.FirstError = cmp.Or(q.FirstError, p.FirstError)
		q.Seconds += p.Seconds
		q.APIServerCPUSeconds += p.APIServerCPUSeconds
		q.ManagerCPUSeconds += p.ManagerCPUSeconds
		q.WebhookCalls += p.WebhookCalls
		q.Samples = append(q.Samples, p.Samples...)
	}
	loads := map[string]int{}
	for i, k := range order {
		if _, ok := loads[k.load]; !ok {
			loads[k.load] = i
		}
	}
	slices.SortStableFunc(order, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.sets, b.sets), cmp.Compare(a.variant, b.variant), cmp.Compare(loads[a.load], loads[b.load]))
	})
	out := make([]Phase, 0, len(order))
	for _, k := range order {
		q := pooled[k]
		if q.Seconds > 0 {
			q.AchievedPerSecond = float64(q.Created()) / q.Seconds
		}
		q.Latencies = Summarize(q.Samples)
		out = append(out, *q)
	}
	return out
}

// Figures are what the goals compare of one variant with one number of
// SidecarSets, from its pooled phases.
type Figures struct {
	// P50MS, P99MS and Errors are at GoalRate.
	P50MS  float64 `json:"p50_ms"`
	P99MS  float64 `json:"p99_ms"`
	Errors int     `json:"errors"`
	// BulkPerSecond is the bulk phase's achieved rate.
	BulkPerSecond float64 `json:"bulk_per_s"`
	// ManagerCPUMicrosPerCreate is over every phase of the variant.
	ManagerCPUMicrosPerCreate float64 `json:"manager_cpu_us_per_create"`
}

// FiguresOf collects the Figures of variant with sets SidecarSets from
// pooled phases (Pool); false when the variant has no phase at GoalRate or
// none in bulk there.
func FiguresOf(pooled []Phase, sets int, variant string) (Figures, bool) {
	var f Figures
	var rate, bulk bool
	var cpu float64
	var created int
	for _, p := range pooled {
		if p.Sets != sets || p.Variant != variant {
			continue
		}
		cpu += p.ManagerCPUSeconds
		created += p.Created()
		switch p.Load {
		case RateLoad(GoalRate):
			f.P50MS, f.P99MS, f.Errors, rate = p.P50, p.P99, p.Errors, true
		case LoadBulk:
			f.BulkPerSecond, bulk = p.AchievedPerSecond, true
		}
	}
	f.ManagerCPUMicrosPerCreate = perCreate(cpu, created)
	return f, rate && bulk
}

// Comparison is one admission path measured against the floor.
type Comparison struct {
	Sets    int    `json:"sets"`
	Variant string `json:"variant"`
	// P50OverheadMS is the path's median minus the floor's, at GoalRate.
	P50OverheadMS float64 `json:"p50_overhead_ms"`
	// P99Ratio is the path's 99th percentile over the floor's.
	P99Ratio float64 `json:"p99_ratio"`
	// BulkRatio is the path's bulk rate over the floor's.
	BulkRatio float64 `json:"bulk_ratio"`
	Errors    int     `json:"errors"`
	// ManagerCPUMicrosPerCreate is the manager's CPU per pod created
	// through the path less its CPU per pod of the floor: the floor's pods
	// carry the same records and label, so the manager watches them as it
	// does the path's, and the difference is what admitting them costs.
	ManagerCPUMicrosPerCreate float64 `json:"manager_cpu_us_per_create"`
	// FloorManagerCPUMicrosPerCreate is the floor's, subtracted above.
	FloorManagerCPUMicrosPerCreate float64 `json:"floor_manager_cpu_us_per_create"`
	Goals                          []Goal  `json:"goals"`
}

// Goal is one target and whether the measured value meets it.
type Goal struct {
	Name   string  `json:"name"`
	Target string  `json:"target"`
	Value  float64 `json:"value"`
	Met    bool    `json:"met"`
}

// Compare measures path against the floor and judges the goals. Worked
// case: floor p50 2.0 ms, p99 6.0 ms, 1,200 pods/s in bulk, 100 µs of
// manager CPU per pod; the webhook p50 6.7 ms, p99 50 ms, 460 pods/s, no
// errors, 400 µs of manager CPU per pod: overhead 4.7 ms (not met),
// p99 × 8.33 (not met), bulk 0.38 (not met), 0 errors (met), 300 µs per
// admission (not met).
func Compare(sets int, variant string, floor, path Figures) Comparison {
	c := Comparison{
		Sets:                           sets,
		Variant:                        variant,
		P50OverheadMS:                  path.P50MS - floor.P50MS,
		P99Ratio:                       ratio(path.P99MS, floor.P99MS),
		BulkRatio:                      ratio(path.BulkPerSecond, floor.BulkPerSecond),
		Errors:                         path.Errors,
		ManagerCPUMicrosPerCreate:      path.ManagerCPUMicrosPerCreate - floor.ManagerCPUMicrosPerCreate,
		FloorManagerCPUMicrosPerCreate: floor.ManagerCPUMicrosPerCreate,
	}
	c.Goals = []Goal{
		{Name: fmt.Sprintf("errors at %d/s", GoalRate), Target: "0", Value: float64(c.Errors), Met: c.Errors == 0},
		{Name: "p50 overhead (ms)", Target: fmt.Sprintf("≤ +%.1f", MaxP50OverheadMS), Value: c.P50OverheadMS, Met: c.P50OverheadMS <= MaxP50OverheadMS},
		{Name: "p99 ratio", Target: fmt.Sprintf("≤ ×%.1f", MaxP99Ratio), Value: c.P99Ratio, Met: floor.P99MS > 0 && c.P99Ratio <= MaxP99Ratio},
		{Name: "bulk ratio", Target: fmt.Sprintf("≥ %.1f", MinBulkRatio), Value: c.BulkRatio, Met: c.BulkRatio >= MinBulkRatio},
		{Name: "manager CPU per admission (µs)", Target: fmt.Sprintf("≤ %.0f", MaxManagerCPUMicros), Value: c.ManagerCPUMicrosPerCreate, Met: c.ManagerCPUMicrosPerCreate <= MaxManagerCPUMicros},
	}
	return c
}

// UnmatchedGoal judges the webhook calls made for pods no SidecarSet can
// match: there must be none.
func UnmatchedGoal(calls float64) Goal {
	return Goal{Name: "webhook calls for pods no set matches", Target: "0", Value: calls, Met: calls == 0}
}

// ratio is a / b, 0 when b is 0: a floor that measured nothing gives no
// ratio rather than an infinite one (and meets no goal).
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
