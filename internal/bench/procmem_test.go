package bench

import (
	"os"
	"strings"
	"testing"
)

func TestParseStatus(t *testing.T) {
	tests := []struct {
		name    string
		status  string
		want    Memory
		wantErr string
	}{
		{
			name: "the three sizes among the others",
			status: "Name:\tsidecarset-mana\nVmPeak:\t 1300000 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1536 kB\n" +
				"RssAnon:\t    1024 kB\nRssFile:\t     512 kB\nThreads:\t12\n",
			want: Memory{RSS: 1536 << 10, Anon: 1024 << 10, Peak: 2048 << 10},
		},
		{
			name:    "a kernel thread has no VmRSS",
			status:  "Name:\tkthreadd\nThreads:\t1\n",
			wantErr: "has 0 of VmRSS",
		},
		{
			name:    "not in kB",
			status:  "VmHWM:\t2048 MB\nVmRSS:\t1 kB\nRssAnon:\t1 kB\n",
			wantErr: "not a size in kB",
		},
		{
			name:    "not a number",
			status:  "VmHWM:\tmany kB\nVmRSS:\t1 kB\nRssAnon:\t1 kB\n",
			wantErr: "invalid syntax",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStatus(tt.status)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseStatus() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("ParseStatus() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestProcessMemoryOfThisProcess(t *testing.T) {
	m, err := ProcessMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS == 0 || m.Anon > m.RSS || m.Peak < m.RSS {
		t.Errorf("ProcessMemory(self) = %+v: want 0 < anon <= RSS <= peak", m)
	}
}
