package metrics

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
)

// dashboards are the chart's Grafana dashboards.
const dashboards = "../../charts/sidecarset/dashboards"

var (
	// seriesName is a name of ours in a PromQL expression.
	seriesName = regexp.MustCompile(`\bsidecarset_[a-z_]+\b`)
	// selector is a series with its label matchers.
	selector = regexp.MustCompile(`\b(sidecarset_[a-z_]+)\{([^}]*)\}`)
	matcher  = regexp.MustCompile(`^\s*([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*"([^"]*)"\s*$`)
	// grouping is the label list of by (...) or without (...).
	grouping = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	// labelValues is Grafana's label_values(series, label) query, the
	// series with or without matchers.
	labelValues = regexp.MustCompile(`^label_values\(\s*(\w+)\s*(?:\{[^}]*\})?\s*,\s*(\w+)\s*\)$`)
)

// labelCluster is a label that the Prometheus scraping the manager adds,
// not the manager (an external label, or a relabelling where one
// Prometheus or Thanos sees several clusters): a dashboard may match it.
const labelCluster = "cluster"

// exported returns, by series name as a query names it, the labels and
// their values of every series the registry holds under our prefix once
// each kind of sample was recorded.
func exported(t *testing.T) map[string]map[string]sets.Set[string] {
	t.Helper()
	RecordStatus("dash", v1alpha1.SidecarSetStatus{LatestRevision: "dash-1"})
	RolloutStalled("dash")
	PodUpdated("dash", time.Second)
	Admission(time.Millisecond, &inject.Result{Injected: []string{"dash"}, Skipped: []inject.Skip{{Set: "dash-b"}},
		Events: []inject.Event{{Set: "dash-c", Reason: inject.ReasonNotInjected}}}, false, false)
	t.Cleanup(func() {
		for _, set := range []string{"dash", "dash-b", "dash-c"} {
			ForgetSet(set)
			ForgetInjections(set)
		}
	})
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]sets.Set[string]{}
	add := func(name, label, value string) {
		if out[name] == nil {
			out[name] = map[string]sets.Set[string]{}
		}
		if out[name][label] == nil {
			out[name][label] = sets.New[string]()
		}
		out[name][label].Insert(value)
	}
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, "sidecarset_") {
			continue
		}
		names := []string{name}
		if f.GetType().String() == "HISTOGRAM" {
			names = []string{name + "_bucket", name + "_sum", name + "_count"}
		}
		for _, m := range f.GetMetric() {
			for _, n := range names {
				if out[n] == nil {
					out[n] = map[string]sets.Set[string]{}
				}
				for _, l := range m.GetLabel() {
					add(n, l.GetName(), l.GetValue())
				}
			}
			for _, b := range m.GetHistogram().GetBucket() {
				add(name+"_bucket", "le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
			}
		}
	}
	return out
}

// TestDashboards checks that every chart dashboard is valid JSON and that
// every expression in it names series the manager exports, with labels
// they carry and, where a matcher names a value, values they take.
func TestDashboards(t *testing.T) {
	series := exported(t)
	paths, err := filepath.Glob(filepath.Join(dashboards, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no dashboard in %s", dashboards)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var dash map[string]any
			if err := json.Unmarshal(data, &dash); err != nil {
				t.Fatalf("%s is not JSON: %v", path, err)
			}
			for _, field := range []string{"title", "uid"} {
				if s, _ := dash[field].(string); s == "" {
					t.Errorf("dashboard has no %s", field)
				}
			}
			exprs, queries := expressions(dash)
			if len(exprs) == 0 {
				t.Fatal("dashboard has no expression")
			}
			for _, e := range exprs {
				checkExpression(t, e, series)
				// Each series is of the cluster the variable picks.
				if n, m := len(seriesName.FindAllString(e, -1)), strings.Count(e, `{cluster=~"$cluster"`); n != m {
					t.Errorf("%q: %d of its %d series lack the matcher cluster=~\"$cluster\" first", e, n-m, n)
				}
			}
			for _, q := range queries {
				m := labelValues.FindStringSubmatch(q)
				if m == nil {
					t.Errorf("variable query %q: want label_values(series, label)", q)
					continue
				}
				if _, ok := series[m[1]][m[2]]; !ok && m[2] != labelCluster {
					t.Errorf("variable query %q: %s has no label %s", q, m[1], m[2])
				}
			}
		})
	}
}

// checkExpression checks one PromQL expression against series.
func checkExpression(t *testing.T, expr string, series map[string]map[string]sets.Set[string]) {
	t.Helper()
	names := seriesName.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%q names none of the manager's series", expr)
		return
	}
	labels := sets.New[string]()
	for _, name := range names {
		ls, ok := series[name]
		if !ok {
			t.Errorf("%q: the manager exports no series %s", expr, name)
			continue
		}
		for l := range ls {
			labels.Insert(l)
		}
	}
	for _, m := range selector.FindAllStringSubmatch(expr, -1) {
		name := m[1]
		for _, part := range strings.Split(m[2], ",") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			mm := matcher.FindStringSubmatch(part)
			if mm == nil {
				t.Errorf("%q: cannot read the matcher %q", expr, part)
				continue
			}
			values, ok := series[name][mm[1]]
			if !ok && mm[1] == labelCluster {
				continue
			}
			if !ok {
				t.Errorf("%q: %s has no label %s", expr, name, mm[1])
				continue
			}
			// A value without a template variable must be one the
			// series takes (set names are the cluster's, never fixed).
			if mm[2] == "=" && mm[1] != labelSidecarSet && !values.Has(mm[3]) {
				t.Errorf("%q: %s{%s} is never %q; it takes %v", expr, name, mm[1], mm[3], sets.List(values))
			}
		}
	}
	for _, m := range grouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !labels.Has(l) {
				t.Errorf("%q: groups by %s, which none of %v carries", expr, l, names)
			}
		}
	}
}

// expressions returns every target's expr in a dashboard, and every
// variable's query.
func expressions(dash map[string]any) (exprs, queries []string) {
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if e, ok := v["expr"].(string); ok {
				exprs = append(exprs, e)
			}
			for _, child := range v {
				walk(child)
			}
		case []any:
			for _, child := range v {
				walk(child)
			}
		}
	}
	walk(dash["panels"])
	templating, _ := dash["templating"].(map[string]any)
	list, _ := templating["list"].([]any)
	for _, v := range list {
		variable, _ := v.(map[string]any)
		if variable["type"] != "query" {
			continue
		}
		switch q := variable["query"].(type) {
		case string:
			queries = append(queries, q)
		case map[string]any:
			if s, ok := q["query"].(string); ok {
				queries = append(queries, s)
			}
		}
	}
	slices.Sort(exprs)
	return slices.Compact(exprs), queries
}

// TestAlerts checks the chart's alerts as TestDashboards checks the
// dashboards: every expression names series the manager exports, with
// labels they carry.
func TestAlerts(t *testing.T) {
	series := exported(t)
	data, err := os.ReadFile("../../charts/sidecarset/files/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules []struct {
		Alert string `json:"alert"`
		Expr  string `json:"expr"`
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 {
		t.Fatal("no alert in files/alerts.yaml")
	}
	for _, r := range rules {
		t.Run(r.Alert, func(t *testing.T) { checkExpression(t, r.Expr, series) })
	}
}
