package bench

import (
	"strings"
	"testing"
)

const exposition = `# HELP apiserver_admission_webhook_request_total Admission webhook request total.
# TYPE apiserver_admission_webhook_request_total counter
apiserver_admission_webhook_request_total{code="200",name="pods.sidecarset.dev",operation="CREATE",rejected="false",type="admit"} 120
apiserver_admission_webhook_request_total{code="500",name="pods.sidecarset.dev",operation="CREATE",rejected="true",type="admit"} 3
apiserver_admission_webhook_request_total{code="200",name="sidecarsets.sidecarset.dev",operation="CREATE",rejected="false",type="admit"} 20
# HELP apiserver_request_duration_seconds Latency.
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{le="1"} 4
apiserver_request_duration_seconds_bucket{le="+Inf"} 4
apiserver_request_duration_seconds_sum 0.5
apiserver_request_duration_seconds_count 4
`

func TestCounterSum(t *testing.T) {
	tests := []struct {
		name    string
		metric  string
		labels  map[string]string
		want    float64
		wantErr string
	}{
		{"every series of one webhook", "apiserver_admission_webhook_request_total", map[string]string{"name": "pods.sidecarset.dev"}, 123, ""},
		{"two labels narrow it", "apiserver_admission_webhook_request_total", map[string]string{"name": "pods.sidecarset.dev", "rejected": "true"}, 3, ""},
		{"no labels: every series", "apiserver_admission_webhook_request_total", nil, 143, ""},
		{"a label no series has", "apiserver_admission_webhook_request_total", map[string]string{"name": "other"}, 0, ""},
		{"a counter not registered yet", "apiserver_admission_step_total", nil, 0, ""},
		{"not a counter", "apiserver_request_duration_seconds", nil, 0, "is a HISTOGRAM, not a counter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CounterSum(strings.NewReader(exposition), tt.metric, tt.labels)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("CounterSum() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("CounterSum() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCounterSumRejectsGarbage(t *testing.T) {
	if _, err := CounterSum(strings.NewReader("not { a metric"), "x", nil); err == nil {
		t.Fatal("CounterSum accepted text that is no exposition")
	}
}

func TestGauge(t *testing.T) {
	const memstats = `# HELP go_memstats_heap_inuse_bytes Heap in use.
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 4.2991616e+07
# TYPE workqueue_depth gauge
workqueue_depth{name="a"} 1
workqueue_depth{name="b"} 2
`
	tests := []struct {
		name, metric string
		want         float64
		wantErr      string
	}{
		{"one series", "go_memstats_heap_inuse_bytes", 42991616, ""},
		{"several series", "workqueue_depth", 0, "want one gauge series, got 2"},
		{"missing", "go_memstats_heap_alloc_bytes", 0, "no metric"},
		{"a counter", "apiserver_admission_webhook_request_total", 0, "of COUNTER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Gauge(strings.NewReader(memstats+exposition), tt.metric)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Gauge() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Gauge() = %v, want %v", got, tt.want)
			}
		})
	}
}
