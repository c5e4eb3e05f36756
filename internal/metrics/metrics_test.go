package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/inject"
)

func TestInjectionResults(t *testing.T) {
	tests := []struct {
		name string
		res  inject.Result
		want map[string]string
	}{{
		name: "nothing matched",
		res:  inject.Result{},
		want: map[string]string{},
	}, {
		name: "injected, with a warning about it",
		res: inject.Result{Injected: []string{"a", "b"},
			Events: []inject.Event{{Set: "a", Reason: inject.ReasonInjectionWarning}}},
		want: map[string]string{"a": ResultInjected, "b": ResultInjected},
	}, {
		name: "skipped by a per-pod check",
		res: inject.Result{Injected: []string{"b"}, Skipped: []inject.Skip{{Set: "a", Reason: "volume x missing"}},
			Events: []inject.Event{{Set: "a", Reason: inject.ReasonInjectionSkipped}}},
		want: map[string]string{"a": ResultSkipped, "b": ResultInjected},
	}, {
		name: "not injected: a container name the pod uses, an invalid selector",
		res: inject.Result{Events: []inject.Event{
			{Set: "a", Reason: inject.ReasonNotInjected},
			{Set: "c", Reason: inject.ReasonNotInjected},
			{Set: "c", Reason: inject.ReasonInjectionWarning},
		}},
		want: map[string]string{"a": ResultNotInjected, "c": ResultNotInjected},
	}, {
		name: "a warning about a stale record names a set that is then injected afresh",
		res: inject.Result{Injected: []string{"a"},
			Events: []inject.Event{{Set: "a", Reason: inject.ReasonInjectionWarning}}},
		want: map[string]string{"a": ResultInjected},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, InjectionResults(tt.res)); diff != "" {
				t.Errorf("InjectionResults (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRecordStatus: the pod gauges are the status's counts, the info series
// follows the latest revision (one series per set), and ForgetSet deletes
// every controller series of the set and no other set's.
func TestRecordStatus(t *testing.T) {
	st := v1alpha1.SidecarSetStatus{
		LatestRevision: "s-1", MatchedPods: 12, UpdatedPods: 6, ReadyPods: 11, UpdatedReadyPods: 5,
		NotUpgradablePods: 1, DriftedPods: 2, UnmanagedPods: 3, SkippedPods: 4,
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue}},
	}
	RecordStatus("rs-a", st)
	RecordStatus("rs-other", v1alpha1.SidecarSetStatus{LatestRevision: "o-1", MatchedPods: 1})
	RolloutStalled("rs-a")
	PodUpdated("rs-a", 3*time.Second)

	want := map[string]float64{
		StateMatched: 12, StateUpdated: 6, StateReady: 11, StateUpdatedReady: 5,
		StateNotUpgradable: 1, StateDrifted: 2, StateUnmanaged: 3, StateSkipped: 4,
	}
	for state, n := range want {
		if got := testutil.ToFloat64(pods.WithLabelValues("rs-a", state)); got != n {
			t.Errorf("%s{state=%q} = %v, want %v", PodsName, state, got, n)
		}
	}
	if got := testutil.ToFloat64(stalled.WithLabelValues("rs-a")); got != 1 {
		t.Errorf("%s = %v, want 1", RolloutStalledName, got)
	}

	st.LatestRevision = "s-2"
	st.Conditions = nil
	RecordStatus("rs-a", st)
	if got := infoOf(t, "rs-a"); !cmp.Equal(got, []string{"s-2"}) {
		t.Errorf("%s revisions of rs-a = %v, want [s-2]", InfoName, got)
	}
	if got := testutil.ToFloat64(stalled.WithLabelValues("rs-a")); got != 0 {
		t.Errorf("%s after the stall ended = %v, want 0", RolloutStalledName, got)
	}

	ForgetSet("rs-a")
	for _, name := range []string{PodsName, InfoName, RolloutStalledName, RolloutStallsName, PodUpdateDurationName} {
		if n := seriesOf(t, name, "rs-a"); n != 0 {
			t.Errorf("%s has %d series of the deleted set", name, n)
		}
	}
	if n := seriesOf(t, PodsName, "rs-other"); n != 8 {
		t.Errorf("%s has %d series of the other set, want 8", PodsName, n)
	}
	ForgetSet("rs-other")
}

// TestAdmission: every call is timed and counted by result; only pods
// created (not dry runs, not errors) count per set.
func TestAdmission(t *testing.T) {
	requests := func(result string) float64 { return testutil.ToFloat64(injectionRequests.WithLabelValues(result)) }
	before := map[string]float64{}
	for _, r := range []string{RequestInjected, RequestUnchanged, RequestError} {
		before[r] = requests(r)
	}
	calls := testutil.CollectAndCount(injectionDuration)
	if calls != 1 {
		t.Fatalf("%s has %d series, want 1", InjectionDurationName, calls)
	}
	count := func() uint64 {
		var m dto.Metric
		if err := injectionDuration.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}
	c0 := count()

	injected := &inject.Result{Injected: []string{"adm-a"}, Skipped: []inject.Skip{{Set: "adm-b"}}}
	Admission(time.Millisecond, injected, false, false)
	Admission(time.Millisecond, injected, false, true)
	Admission(time.Millisecond, &inject.Result{}, false, false)
	Admission(time.Millisecond, nil, false, false)
	Admission(time.Millisecond, nil, true, false)

	for r, n := range map[string]float64{RequestInjected: 2, RequestUnchanged: 2, RequestError: 1} {
		if got := requests(r) - before[r]; got != n {
			t.Errorf("%s{result=%q} grew by %v, want %v", InjectionRequestsName, r, got, n)
		}
	}
	if got := testutil.ToFloat64(injections.WithLabelValues("adm-a", ResultInjected)); got != 1 {
		t.Errorf("%s{adm-a, injected} = %v, want 1 (the dry run not counted)", InjectionsName, got)
	}
	if got := testutil.ToFloat64(injections.WithLabelValues("adm-b", ResultSkipped)); got != 1 {
		t.Errorf("%s{adm-b, skipped} = %v, want 1", InjectionsName, got)
	}
	if got := count() - c0; got != 5 {
		t.Errorf("%s observed %d calls, want 5", InjectionDurationName, got)
	}
	ForgetInjections("adm-a")
	if n := seriesOf(t, InjectionsName, "adm-a"); n != 0 {
		t.Errorf("%s has %d series of adm-a after ForgetInjections", InjectionsName, n)
	}
	if n := seriesOf(t, InjectionsName, "adm-b"); n != 1 {
		t.Errorf("%s has %d series of adm-b, want 1", InjectionsName, n)
	}
}

// names are the names of every series the package defines, each as a
// query names it (a histogram's by its _bucket, _sum and _count series).
var names = []string{
	PodsName, InfoName, RolloutStalledName, RolloutStallsName,
	PodUpdateDurationName + "_bucket", PodUpdateDurationName + "_sum", PodUpdateDurationName + "_count",
	InjectionsName, InjectionRequestsName,
	InjectionDurationName + "_bucket", InjectionDurationName + "_sum", InjectionDurationName + "_count",
}

// TestNames: names lists exactly the series the registry holds under the
// package's prefix, once each has a sample.
func TestNames(t *testing.T) {
	RecordStatus("names", v1alpha1.SidecarSetStatus{LatestRevision: "n-1"})
	RolloutStalled("names")
	PodUpdated("names", time.Second)
	Admission(time.Millisecond, &inject.Result{Injected: []string{"names"}}, false, false)
	defer ForgetSet("names")
	defer ForgetInjections("names")

	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, "sidecarset_") {
			continue
		}
		if f.GetType().String() == "HISTOGRAM" {
			got = append(got, name+"_bucket", name+"_sum", name+"_count")
			continue
		}
		got = append(got, name)
	}
	if diff := cmp.Diff(names, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("names (-listed +registered):\n%s", diff)
	}
}

// series returns the registry's series named name whose sidecarset label is
// set.
func series(t *testing.T, name, set string) []*dto.Metric {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []*dto.Metric
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, labelSidecarSet) == set {
				out = append(out, m)
			}
		}
	}
	return out
}

func seriesOf(t *testing.T, name, set string) int {
	t.Helper()
	return len(series(t, name, set))
}

// infoOf returns the revisions of set's info series.
func infoOf(t *testing.T, set string) []string {
	t.Helper()
	var revs []string
	for _, m := range series(t, InfoName, set) {
		revs = append(revs, label(m, labelRevision))
	}
	return revs
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestDocumented: docs/metrics.md has a row for every series, and for none
// the manager does not define.
func TestDocumented(t *testing.T) {
	data, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(sidecarset_[a-z_]+)` \\|")
	var documented []string
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		documented = append(documented, m[1])
	}
	var defined []string
	for _, name := range names {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if !slices.Contains(defined, base) {
			defined = append(defined, base)
		}
	}
	if diff := cmp.Diff(defined, documented, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("series in docs/metrics.md's table (-defined +documented):\n%s", diff)
	}
}
