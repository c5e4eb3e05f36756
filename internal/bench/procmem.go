package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Memory is what the benchmarks read of a process's memory in
// /proc/<pid>/status, in bytes.
type Memory struct {
	// RSS (VmRSS) is the resident set: what `ps` and `top` show, and what
	// a container's memory limit counts, file pages aside.
	RSS uint64 `json:"rss_bytes"`
	// Anon (RssAnon) is the part of RSS that no file backs: the Go heap,
	// stacks and the runtime's own structures.
	Anon uint64 `json:"rss_anon_bytes"`
	// Peak (VmHWM) is the largest RSS the process has had.
	Peak uint64 `json:"rss_peak_bytes"`
}

// ProcessMemory returns what process pid holds in memory now, from
// /proc/<pid>/status.
func ProcessMemory(pid int) (Memory, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	m, err := ParseStatus(string(data))
	if err != nil {
		return Memory{}, fmt.Errorf("process %d: %w", pid, err)
	}
	return m, nil
}

// ParseStatus reads VmRSS, RssAnon and VmHWM from a /proc/<pid>/status
// text, whose lines are "Name:<whitespace>value", the sizes in kB (the
// kernel's kB are KiB). Worked case: "VmHWM:\t  2048 kB" gives a peak of
// 2,097,152 bytes. Each of the three must be there: a kernel thread or a
// process that has exited has no VmRSS.
func ParseStatus(status string) (Memory, error) {
	var m Memory
	fields := map[string]*uint64{"VmRSS": &m.RSS, "RssAnon": &m.Anon, "VmHWM": &m.Peak}
	found := 0
	for line := range strings.Lines(status) {
		name, value, ok := strings.Cut(line, ":")
		dst, want := fields[name]
		if !ok || !want {
			continue
		}
		number, ok := strings.CutSuffix(strings.TrimSpace(value), " kB")
		if !ok {
			return Memory{}, fmt.Errorf("status line %q: not a size in kB", abbreviate(strings.TrimSpace(line)))
		}
		kib, err := strconv.ParseUint(strings.TrimSpace(number), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("status line %q: %w", abbreviate(strings.TrimSpace(line)), err)
		}
		*dst = kib << 10
		found++
	}
	if found != len(fields) {
		return Memory{}, fmt.Errorf("status has %d of VmRSS, RssAnon and VmHWM", found)
	}
	return m, nil
}
