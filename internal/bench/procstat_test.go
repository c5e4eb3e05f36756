package bench

import (
	"os"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name    string
		stat    string
		want    Stat
		wantErr string
	}{
		{
			name: "utime plus stime",
			stat: "42 (kube-apiserver) S 1 42 42 0 -1 4194560 8127 0 0 0 300 45 0 0 20 0 12 0 1234 0 0",
			want: Stat{Command: "kube-apiserver", Parent: 1, Ticks: 345},
		},
		{
			name: "a command name with spaces and parentheses",
			stat: "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 10 5 0 0 20 0",
			want: Stat{Command: "a (b) c", Parent: 1, Ticks: 15},
		},
		{
			name:    "no command name",
			stat:    "7 a R 1",
			wantErr: "no command name",
		},
		{
			name:    "cut short",
			stat:    "7 (a) R 1 7 7",
			wantErr: "4 fields after the command name, want at least 13",
		},
		{
			name:    "no parent",
			stat:    "7 (a) R x 7 7 0 -1 0 0 0 0 0 1 5 0",
			wantErr: "field 4",
		},
		{
			name:    "not a number",
			stat:    "7 (a) R 1 7 7 0 -1 0 0 0 0 0 x 5 0",
			wantErr: "field 14",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat(tt.stat)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseStat() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("ParseStat() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestProcessCPUOfItself reads this test's own process: the time it has
// used can only grow.
func TestProcessCPUOfItself(t *testing.T) {
	before, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 200_000_000 {
		x ^= i
	}
	after, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Errorf("CPU time went from %v to %v after a busy loop (%d)", before, after, x)
	}
}
