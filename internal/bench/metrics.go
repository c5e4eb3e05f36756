package bench

import (
	"fmt"
	"io"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// CounterSum reads a Prometheus text exposition (a component's /metrics)
// and returns the sum of counter name over every series whose labels
// include labels (Exposition.CounterSum).
func CounterSum(exposition io.Reader, name string, labels map[string]string) (float64, error) {
	e, err := ParseExposition(exposition)
	if err != nil {
		return 0, err
	}
	return e.CounterSum(name, labels)
}

// Exposition is a Prometheus text exposition read once, to sum several of
// its series: the apiserver's runs to megabytes.
type Exposition map[string]*dto.MetricFamily

// ParseExposition reads a Prometheus text exposition.
func ParseExposition(exposition io.Reader) (Exposition, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(exposition)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return families, nil
}

// CounterSum returns the sum of counter name over every series whose labels
// include labels. A counter that is not there, or has no such series, sums
// to 0: the apiserver registers a webhook's counter only once it has called
// the webhook.
func (e Exposition) CounterSum(name string, labels map[string]string) (float64, error) {
	family, ok := e[name]
	if !ok {
		return 0, nil
	}
	var sum float64
	for _, m := range family.GetMetric() {
		if m.GetCounter() == nil {
			return 0, fmt.Errorf("metric %s is a %s, not a counter", name, family.GetType())
		}
		if hasLabels(m.GetLabel(), labels) {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum, nil
}

func hasLabels(pairs []*dto.LabelPair, want map[string]string) bool {
	found := 0
	for _, p := range pairs {
		if v, ok := want[p.GetName()]; ok {
			if v != p.GetValue() {
				return false
			}
			found++
		}
	}
	return found == len(want)
}

// Gauge reads a Prometheus text exposition and returns the value of the
// gauge name, which must have a single series, as the Go runtime's
// go_memstats_* gauges do.
func Gauge(exposition io.Reader, name string) (float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(exposition)
	if err != nil {
		return 0, fmt.Errorf("parse metrics: %w", err)
	}
	family, ok := families[name]
	if !ok {
		return 0, fmt.Errorf("no metric %s", name)
	}
	series := family.GetMetric()
	if len(series) != 1 || series[0].GetGauge() == nil {
		return 0, fmt.Errorf("metric %s: want one gauge series, got %d of %s", name, len(series), family.GetType())
	}
	return series[0].GetGauge().GetValue(), nil
}
