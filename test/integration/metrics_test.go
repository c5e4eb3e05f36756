package integration

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/metrics"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// TestMetrics scrapes the /metrics endpoint of the sidecarset-manager
// binary, run as a cluster runs it, through a SidecarSet's life: its pods
// created, a rollout, a stall, its deletion. The series must move as the
// status does.
func TestMetrics(t *testing.T) {
	// Readiness takes 3s: a pod written is back 3s later at the earliest.
	const pods, readyAfter = 4, 3
	f := newFixture(t)
	mgr := cluster.ManagerProcess(t)
	url := mgr.MetricsURL()
	set := f.SidecarSet("exporter:v1", readyAfter)
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = deadline(5)
	f.CreateSet(set)
	of := func(more ...string) map[string]string {
		labels := map[string]string{"sidecarset": f.Set}
		for i := 0; i+1 < len(more); i += 2 {
			labels[more[i]] = more[i+1]
		}
		return labels
	}
	state := func(s string) map[string]string { return of("state", s) }
	before := scrape(t, url)

	// Pods created: each injected once, each call timed.
	f.CreatePods(pods, nil, nil)
	st := f.WaitComplete(pods)
	v1 := st.LatestRevision
	m := scrapeUntil(t, url, "the status's counts", func(m scraped) bool {
		return m.value(metrics.PodsName, state(metrics.StateUpdatedReady)) == pods
	})
	for s, want := range map[string]float64{
		metrics.StateMatched: pods, metrics.StateUpdated: pods, metrics.StateReady: pods, metrics.StateUpdatedReady: pods,
		metrics.StateNotUpgradable: 0, metrics.StateDrifted: 0, metrics.StateUnmanaged: 0, metrics.StateSkipped: 0,
	} {
		if got := m.value(metrics.PodsName, state(s)); got != want {
			t.Errorf("%s{state=%q} = %v, want %v", metrics.PodsName, s, got, want)
		}
	}
	if got := m.value(metrics.InjectionsName, of("result", metrics.ResultInjected)); got != pods {
		t.Errorf("%s{result=injected} = %v after %d pods were created, want %d", metrics.InjectionsName, got, pods, pods)
	}
	requested := m.value(metrics.InjectionRequestsName, map[string]string{"result": metrics.RequestInjected}) -
		before.value(metrics.InjectionRequestsName, map[string]string{"result": metrics.RequestInjected})
	if requested < pods {
		t.Errorf("%s{result=injected} grew by %v, want at least %d", metrics.InjectionRequestsName, requested, pods)
	}
	if got := m.value(metrics.InjectionDurationName+"_count", nil) - before.value(metrics.InjectionDurationName+"_count", nil); got < pods {
		t.Errorf("%s observed %v calls, want at least %d", metrics.InjectionDurationName, got, pods)
	}
	if got := m.revisions(f.Set); !slices.Equal(got, []string{v1}) {
		t.Errorf("%s revisions = %v, want [%s]", metrics.InfoName, got, v1)
	}
	if got := m.value(metrics.PodUpdateDurationName+"_count", of()); got != 0 {
		t.Errorf("%s observed %v updates before any, want 0", metrics.PodUpdateDurationName, got)
	}

	// A rollout, one pod at a time (maxUnavailable 1, readiness after 3s):
	// the updated counts step up to the total, and never back.
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v2" })
	var steps []float64
	scrapeUntil(t, url, "every pod updated and ready", func(m scraped) bool {
		if revs := m.revisions(f.Set); len(revs) != 1 || revs[0] == v1 {
			// The old revision's counts, all updated.
			return false
		}
		n := m.value(metrics.PodsName, state(metrics.StateUpdatedReady))
		if len(steps) == 0 || steps[len(steps)-1] != n {
			steps = append(steps, n)
		}
		return n == pods && m.value(metrics.PodsName, state(metrics.StateUpdated)) == pods
	})
	if !slices.IsSorted(steps) || len(steps) < 3 || steps[0] >= pods {
		t.Errorf("%s{state=updated_ready} went %v on the new revision, want steps up from below %d", metrics.PodsName, steps, pods)
	}
	st = f.WaitComplete(pods)
	m = scrapeUntil(t, url, "one update duration per pod", func(m scraped) bool {
		return m.value(metrics.PodUpdateDurationName+"_count", of()) >= pods
	})
	if got := m.revisions(f.Set); !slices.Equal(got, []string{st.LatestRevision}) {
		t.Errorf("%s revisions = %v, want [%s]", metrics.InfoName, got, st.LatestRevision)
	}
	if got := m.value(metrics.PodUpdateDurationName+"_count", of()); got != pods {
		t.Errorf("%s observed %v updates, want %d, one per pod", metrics.PodUpdateDurationName, got, pods)
	}
	// Each pod was back only once its new sidecar was ready, 3s after it
	// started.
	if got := m.value(metrics.PodUpdateDurationName+"_bucket", of("le", "2")); got != 0 {
		t.Errorf("%s: %v updates took at most 2s, want none (readiness takes 3s)", metrics.PodUpdateDurationName, got)
	}
	t.Logf("%s{state=updated_ready} on the new revision: %v; update durations: %v in %.1fs", metrics.PodsName, steps,
		m.value(metrics.PodUpdateDurationName+"_count", of()), m.value(metrics.PodUpdateDurationName+"_sum", of()))

	// Each manager observes a write once, and its successor one it does
	// not read as released: let the set's releasedBefore pass the writes
	// of this rollout first.
	f.WaitSetFor(3*time.Minute, "releasedBefore past every write", func(s *v1alpha1.SidecarSet) bool {
		for _, p := range f.Pods() {
			state, _ := revision.Decode(p.Annotations)
			if w := state[f.Set].Write; w != nil && (s.Status.ReleasedBefore == nil || w.At == nil || !w.At.Before(s.Status.ReleasedBefore)) {
				return false
			}
		}
		return true
	})
	// The manager killed after its first write of a rollout, before that
	// pod is back: its successor, leading once the dead one's Lease
	// expired (15s), observes the pod's update from the time the write's
	// record carries, not from when it took over.
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter:v3" })
	scrapeUntil(t, url, "the first pod written", func(m scraped) bool {
		revs := m.revisions(f.Set)
		return len(revs) == 1 && revs[0] != st.LatestRevision && m.value(metrics.PodsName, state(metrics.StateUpdated)) >= 1
	})
	if err := mgr.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := mgr.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := mgr.WaitLeading(t.Context(), fixture.LeadTimeout); err != nil {
		t.Fatal(err)
	}
	lead := time.Since(killed)
	url = mgr.MetricsURL()
	st = f.WaitComplete(pods)
	m = scrapeUntil(t, url, "the rollout's update durations, observed by the new leader", func(m scraped) bool {
		return m.value(metrics.PodUpdateDurationName+"_count", of()) >= pods
	})
	if got := m.value(metrics.PodUpdateDurationName+"_count", of()); got != pods {
		t.Errorf("the new leader observed %v updates, want %d: the first pod, written by the killed manager, and the rest", got, pods)
	}
	if got := m.value(metrics.PodUpdateDurationName+"_bucket", of("le", "8")); got >= pods {
		t.Errorf("%s: all %v updates took at most 8s, want the one written before the kill to count from its write (the new leader took %v to lead)",
			metrics.PodUpdateDurationName, got, lead.Round(time.Millisecond))
	}
	if got := m.revisions(f.Set); !slices.Equal(got, []string{st.LatestRevision}) {
		t.Errorf("%s revisions after the restart = %v, want [%s]", metrics.InfoName, got, st.LatestRevision)
	}
	t.Logf("after the kill the new leader led in %v; %v of %d updates took more than 8s, %.1fs in all", lead.Round(time.Millisecond),
		pods-m.value(metrics.PodUpdateDurationName+"_bucket", of("le", "8")), pods, m.value(metrics.PodUpdateDurationName+"_sum", of()))

	// A stall: a sidecar that never gets ready, no progress for the deadline.
	f.UpdateSet(func(s *v1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "exporter-never-ready:v2" })
	f.WaitStatus("Stalled", func(s v1alpha1.SidecarSetStatus) bool {
		return fixture.Condition(s, v1alpha1.ConditionStalled) == metav1.ConditionTrue
	})
	m = scrapeUntil(t, url, "the stall counted", func(m scraped) bool {
		return m.value(metrics.RolloutStallsName, of()) == 1 && m.value(metrics.RolloutStalledName, of()) == 1
	})
	// Once per stall: the paused rollout does not stall again.
	time.Sleep(2 * time.Second)
	if got := scrape(t, url).value(metrics.RolloutStallsName, of()); got != 1 {
		t.Errorf("%s = %v 2s after the stall, want 1", metrics.RolloutStallsName, got)
	}
	if got := m.value(metrics.PodUpdateDurationName+"_count", of()); got != pods {
		t.Errorf("%s observed %v updates after the stall, want still %d (the stuck pod is not back)", metrics.PodUpdateDurationName, got, pods)
	}

	// Deleted: the set's series go, on the controller's side and the
	// webhook's. The restarted process has injected no pod yet: one pod
	// created now gives its webhook side a series of the set to forget.
	f.CreatePod(f.NewPod("after-restart"))
	scrapeUntil(t, url, "the restarted process's injection series", func(m scraped) bool {
		return m.value(metrics.InjectionsName, of("result", metrics.ResultInjected)) >= 1
	})
	if err := f.Client.Delete(t.Context(), f.GetSet()); err != nil {
		t.Fatal(err)
	}
	scrapeUntil(t, url, "the deleted set's series gone", func(m scraped) bool {
		return m.count(f.Set) == 0
	})
}

// scraped is one scrape of a metrics endpoint, by series name.
type scraped map[string]*dto.MetricFamily

// scrape reads the metrics served at url.
func scrape(t *testing.T, url string) scraped {
	t.Helper()
	m, err := scrapeOnce(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func scrapeOnce(ctx context.Context, url string) (scraped, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	// The text format: the parser reads no other.
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse the metrics of %s: %w", url, err)
	}
	return families, nil
}

// scrapeUntil scrapes url every 100ms until cond holds, and returns that
// scrape.
func scrapeUntil(t *testing.T, url, what string, cond func(scraped) bool) scraped {
	t.Helper()
	var last scraped
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		m, err := scrapeOnce(ctx, url)
		if err != nil {
			return false, err
		}
		last = m
		return cond(m), nil
	})
	if err != nil {
		t.Fatalf("wait for the metrics to show %s: %v\nlast scrape, sidecarset series:\n%s", what, err, last.ours())
	}
	return last
}

// value returns the value of the series named name whose labels include
// labels, 0 when there is none. A histogram is named by its _count, _sum or
// _bucket series (with label le).
func (s scraped) value(name string, labels map[string]string) float64 {
	family, part := name, ""
	for _, suffix := range []string{"_count", "_sum", "_bucket"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && s[base].GetType() == dto.MetricType_HISTOGRAM {
			family, part = base, suffix
		}
	}
	f, ok := s[family]
	if !ok {
		return 0
	}
	for _, m := range f.GetMetric() {
		if !hasLabels(m, labels, part == "_bucket") {
			continue
		}
		switch {
		case part == "_count":
			return float64(m.GetHistogram().GetSampleCount())
		case part == "_sum":
			return m.GetHistogram().GetSampleSum()
		case part == "_bucket":
			for _, b := range m.GetHistogram().GetBucket() {
				if fmt.Sprint(b.GetUpperBound()) == labels["le"] {
					return float64(b.GetCumulativeCount())
				}
			}
			return 0
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		default:
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// revisions returns the revisions set's info series name.
func (s scraped) revisions(set string) []string {
	var out []string
	for _, m := range s[metrics.InfoName].GetMetric() {
		if labelOf(m, "sidecarset") == set && m.GetGauge().GetValue() == 1 {
			out = append(out, labelOf(m, "revision"))
		}
	}
	return out
}

// count returns how many series carry the label sidecarset=set.
func (s scraped) count(set string) int {
	n := 0
	for _, f := range s {
		for _, m := range f.GetMetric() {
			if labelOf(m, "sidecarset") == set {
				n++
			}
		}
	}
	return n
}

// ours prints the scrape's sidecarset_ series, for a failure's message.
func (s scraped) ours() string {
	var b strings.Builder
	for name, f := range s {
		if !strings.HasPrefix(name, "sidecarset_") {
			continue
		}
		for _, m := range f.GetMetric() {
			fmt.Fprintf(&b, "%s %s\n", name, m.String())
		}
	}
	return b.String()
}

func hasLabels(m *dto.Metric, labels map[string]string, skipLe bool) bool {
	for k, v := range labels {
		if skipLe && k == "le" {
			continue
		}
		if labelOf(m, k) != v {
			return false
		}
	}
	return true
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
