package bench

import (
	"bytes"
	"image/png"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func step(name string, managed, unmanaged int, rssMiB, heapMiB uint64) MemoryStep {
	return MemoryStep{Name: name, ManagedPods: managed, UnmanagedPods: unmanaged,
		Memory: Memory{RSS: rssMiB << 20, Anon: rssMiB << 20, Peak: rssMiB << 20}, HeapInuse: heapMiB << 20}
}

func rssOf(s MemoryStep) uint64 { return s.Memory.RSS }

func TestPerPod(t *testing.T) {
	tests := []struct {
		name     string
		from, to MemoryStep
		want     float64
		wantErr  string
	}{
		{
			name: "the doc comment's case: 70 MiB over 9,000 managed pods",
			from: step("1k", 1000, 40000, 120, 0), to: step("10k", 10000, 40000, 190, 0),
			want: 70.0 * (1 << 20) / 9000,
		},
		{
			name: "unmanaged pods that cost nothing",
			from: step("none", 0, 0, 50, 0), to: step("unmanaged", 0, 40000, 50, 0),
			want: 0,
		},
		{
			name: "memory that fell reads as a negative cost",
			from: step("none", 0, 0, 52, 0), to: step("unmanaged", 0, 1024, 51, 0),
			want: -1024,
		},
		{
			name: "no change in pods",
			from: step("a", 10, 10, 1, 0), to: step("b", 10, 10, 2, 0),
			wantErr: "not both or neither",
		},
		{
			name: "both kinds changed",
			from: step("a", 0, 0, 1, 0), to: step("b", 10, 10, 2, 0),
			wantErr: "not both or neither",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PerPod(tt.from, tt.to, rssOf)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("PerPod() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("PerPod() = %v, want %v", got, tt.want)
			}
		})
	}
}

// A process whose memory grows by a fixed amount per pod shows that
// amount as its slope, whatever it held before.
func TestPerPodRecoversALinearCost(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := rapid.Uint64Range(0, 1<<34).Draw(t, "base")
		perPod := rapid.Uint64Range(0, 1<<16).Draw(t, "perPod")
		from := rapid.IntRange(0, 100_000).Draw(t, "from")
		to := rapid.IntRange(0, 100_000).Filter(func(n int) bool { return n != from }).Draw(t, "to")
		at := func(n int) MemoryStep {
			return MemoryStep{ManagedPods: n, UnmanagedPods: 7, Memory: Memory{RSS: base + uint64(n)*perPod}}
		}
		got, err := PerPod(at(from), at(to), rssOf)
		if err != nil {
			t.Fatal(err)
		}
		if diff := got - float64(perPod); diff > 1e-6*float64(perPod)+1e-9 || diff < -1e-6*float64(perPod)-1e-9 {
			t.Fatalf("PerPod() = %v, want %d", got, perPod)
		}
	})
}

func TestJudge(t *testing.T) {
	tests := []struct {
		name        string
		steps       []MemoryStep
		want        MemoryReport
		wantErr     string
		wantSummary map[string]any
	}{
		{
			name: "both goals met",
			steps: []MemoryStep{
				step("none", 0, 0, 60, 20), step("unmanaged", 0, 40000, 61, 20),
				step("1k", 1000, 40000, 70, 24), step("10k", 10000, 40000, 130, 54),
			},
			want: MemoryReport{
				RSSPerUnmanagedPod: 26.2, HeapPerUnmanagedPod: 0,
				RSSPerManagedPod: 6990.5, HeapPerManagedPod: 3495.3,
				Goals: []Goal{
					{Name: "RSS per managed pod", Target: "≤ 8192 B", Value: 6990.5, Met: true},
					{Name: "RSS per unmanaged pod", Target: "≈ 0 (≤ 256 B)", Value: 26.2, Met: true},
				},
			},
			wantSummary: map[string]any{"rss_bytes_per_managed_pod": 6990.5, "rss_bytes_per_unmanaged_pod": 26.2},
		},
		{
			name: "OpenKruise's 23 KiB per pod, managed or not, meets neither",
			steps: []MemoryStep{
				step("none", 0, 0, 60, 20), step("unmanaged", 0, 1024, 83, 30),
				step("1k", 1024, 1024, 106, 40), step("2k", 2048, 1024, 129, 50),
			},
			want: MemoryReport{
				RSSPerUnmanagedPod: 23552, HeapPerUnmanagedPod: 10240,
				RSSPerManagedPod: 23552, HeapPerManagedPod: 10240,
				Goals: []Goal{
					{Name: "RSS per managed pod", Target: "≤ 8192 B", Value: 23552, Met: false},
					{Name: "RSS per unmanaged pod", Target: "≈ 0 (≤ 256 B)", Value: 23552, Met: false},
				},
			},
			wantSummary: map[string]any{"rss_bytes_per_managed_pod": 23552.0, "rss_bytes_per_unmanaged_pod": 23552.0},
		},
		{
			name:    "a step missing",
			steps:   []MemoryStep{step("none", 0, 0, 60, 20), step("unmanaged", 0, 40000, 61, 20), step("1k", 1000, 40000, 70, 24)},
			wantErr: "3 steps measured, want 4",
		},
		{
			name: "steps out of order",
			steps: []MemoryStep{
				step("none", 0, 0, 60, 20), step("1k", 1000, 40000, 70, 24),
				step("unmanaged", 0, 40000, 61, 20), step("10k", 10000, 40000, 130, 54),
			},
			wantErr: "not both or neither",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := MemoryReport{Steps: tt.steps}
			err := r.Judge()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Judge() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Steps = tt.steps
			if diff := cmp.Diff(tt.want, r); diff != "" {
				t.Errorf("Judge() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSummary, r.Summary()); diff != "" {
				t.Errorf("Summary() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMemoryReportWrites(t *testing.T) {
	r := MemoryReport{Scale: "small", Unmanaged: "pods the set selects that opted out", Steps: []MemoryStep{
		step("none", 0, 0, 60, 20), step("unmanaged", 0, 2000, 61, 20),
		step("managed-100", 100, 2000, 62, 21), step("managed-1000", 1000, 2000, 70, 25),
	}}
	if err := r.Judge(); err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| RSS per managed pod | ≤ 8192 B | 9321 B | **not met** |",
		"| RSS per unmanaged pod | ≈ 0 (≤ 256 B) | 524 B | **not met** |",
		"| managed-1000 | 1000 | 2000 | 70.0 | 70.0 | 70.0 | 25.0 | 0.0 |",
		"opted out",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("memory.md lacks %q:\n%s", want, md.String())
		}
	}
	var img bytes.Buffer
	if err := r.WritePNG(&img); err != nil {
		t.Fatal(err)
	}
	decoded, err := png.Decode(&img)
	if err != nil {
		t.Fatalf("memory.png is not a PNG: %v", err)
	}
	if b := decoded.Bounds(); b.Dx() < 400 || b.Dy() < 200 {
		t.Errorf("memory.png is %v, want a chart of at least 400×200", b)
	}
}
