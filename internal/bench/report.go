package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// NotAvailable stands for the figures of an admission path the manager
// binary does not offer.
const NotAvailable = "not available"

// AdmissionReport is what the admission benchmark writes to
// bench/results/admission.json.
type AdmissionReport struct {
	Scale string `json:"scale"`
	Date  string `json:"date"`
	// Machine says what ran it: CPUs, Go and control-plane versions.
	Machine string `json:"machine"`
	Rounds  int    `json:"rounds"`
	// LoadAverage is the machine's one-minute load average at the start
	// and at the end: how much else ran beside the benchmark.
	LoadAverage string `json:"load_average"`
	// PolicyPath is "available", or NotAvailable when the manager has no
	// policy injection.
	PolicyPath string `json:"policy_path"`
	// Phases are every round's; Pooled merges the rounds (Pool).
	Phases      []Phase      `json:"phases"`
	Pooled      []Phase      `json:"pooled"`
	Comparisons []Comparison `json:"comparisons"`
	Unmatched   []Unmatched  `json:"unmatched"`
}

// Unmatched is how often the apiserver called the pod webhook for pods
// that no SidecarSet can match, with one admission path in place.
type Unmatched struct {
	Sets         int     `json:"sets"`
	Variant      string  `json:"variant"`
	Pods         int     `json:"pods"`
	WebhookCalls float64 `json:"webhook_calls"`
	Goal         Goal    `json:"goal"`
}

// Summary returns the keys the report adds to bench/results/summary.json,
// from its comparisons with sets SidecarSets: the webhook's (C) and the
// policy path's (D, NotAvailable without it), the errors of every phase
// of every variant, the webhook calls for unmatched pods with the webhook
// in place, and the manager's CPU per create through the webhook.
func (r AdmissionReport) Summary(sets int) map[string]any {
	errors := 0
	for _, p := range r.Phases {
		errors += p.Errors
	}
	s := map[string]any{"admission_errors": errors}
	for _, path := range []struct{ variant, name string }{{VariantWebhook, "webhook"}, {VariantPolicy, "policy"}} {
		var found *Comparison
		for i, c := range r.Comparisons {
			if c.Sets == sets && c.Variant == path.variant {
				found = &r.Comparisons[i]
			}
		}
		keys := map[string]func(Comparison) float64{
			"admission_" + path.name + "_p50_overhead_ms": func(c Comparison) float64 { return round(c.P50OverheadMS, 3) },
			"admission_" + path.name + "_p99_ratio":       func(c Comparison) float64 { return round(c.P99Ratio, 3) },
			"admission_" + path.name + "_bulk_ratio":      func(c Comparison) float64 { return round(c.BulkRatio, 3) },
		}
		for key, value := range keys {
			if found == nil {
				s[key] = NotAvailable
			} else {
				s[key] = value(*found)
			}
		}
		if path.variant == VariantWebhook {
			s["admission_manager_cpu_us_per_create"] = NotAvailable
			if found != nil {
				s["admission_manager_cpu_us_per_create"] = round(found.ManagerCPUMicrosPerCreate, 1)
			}
		}
	}
	s["admission_unmatched_webhook_calls"] = NotAvailable
	for _, u := range r.Unmatched {
		if u.Sets == sets && u.Variant == VariantWebhook {
			s["admission_unmatched_webhook_calls"] = u.WebhookCalls
		}
	}
	return s
}

func round(v float64, digits int) float64 {
	scale := math.Pow(10, float64(digits))
	return math.Round(v*scale) / scale
}

var variantNames = map[string]string{
	VariantPlain:   "A: no admission, one container",
	VariantFloor:   "B: no admission, injected pod written (floor)",
	VariantWebhook: "C: webhook",
	VariantPolicy:  "D: policy",
}

// WriteMarkdown writes the report as bench/results/admission.md: the goals
// met or not, then every pooled phase.
func (r AdmissionReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Admission benchmark\n\n")
	fmt.Fprintf(&b, "Scale %s, %s, %d rounds with the variants interleaved; %s.\n", r.Scale, r.Date, r.Rounds, r.Machine)
	fmt.Fprintf(&b, "One-minute load average %s. Policy path (D): %s.\n\n", r.LoadAverage, r.PolicyPath)
	fmt.Fprintf(&b, "Pods are created through the apiserver. A: one-container pods where no webhook is called; ")
	fmt.Fprintf(&b, "B (the floor): the pod the webhook stores, written directly there; C: one-container pods the webhook injects; ")
	fmt.Fprintf(&b, "D: the same, injected by MutatingAdmissionPolicies. 2 SidecarSets match the pods, the rest do not. ")
	fmt.Fprintf(&b, "Latencies and goals are at %d/s and in bulk, pooled over the rounds; CPU is the process's user + system time ", GoalRate)
	fmt.Fprintf(&b, "during the phase, per pod created; the manager's CPU per admission is the path's less the floor's, whose pods carry the ")
	fmt.Fprintf(&b, "same label and records, so that the manager's cache holds them just the same.\n\n")

	fmt.Fprintf(&b, "## Goals, against the floor B\n\n")
	fmt.Fprintf(&b, "| sets | path | goal | target | value | met |\n|---|---|---|---|---|---|\n")
	for _, c := range r.Comparisons {
		for _, g := range c.Goals {
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %.3g | %s |\n", c.Sets, variantNames[c.Variant], g.Name, g.Target, g.Value, met(g.Met))
		}
	}
	for _, u := range r.Unmatched {
		fmt.Fprintf(&b, "| %d | %s | %s (%d pods) | %s | %.0f | %s |\n", u.Sets, variantNames[u.Variant], u.Goal.Name, u.Pods, u.Goal.Target, u.Goal.Value, met(u.Goal.Met))
	}
	if r.PolicyPath != "available" {
		fmt.Fprintf(&b, "| | %s | every goal | | %s | |\n", variantNames[VariantPolicy], NotAvailable)
	}

	fmt.Fprintf(&b, "\n## Phases\n\n")
	fmt.Fprintf(&b, "| sets | variant | load | pods | errors | achieved/s | p50 ms | p90 ms | p99 ms | apiserver µs/pod | manager µs/pod | webhook calls |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.Pooled {
		fmt.Fprintf(&b, "| %d | %s | %s | %d | %d | %.0f | %.2f | %.2f | %.2f | %.0f | %.0f | %.0f |\n",
			p.Sets, p.Variant, p.Load, p.Pods, p.Errors, p.AchievedPerSecond, p.P50, p.P90, p.P99,
			p.APIServerCPUMicrosPerCreate(), p.ManagerCPUMicrosPerCreate(), p.WebhookCalls)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}
