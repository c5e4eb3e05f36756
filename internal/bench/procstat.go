package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the times in /proc/<pid>/stat: the kernel reports
// them in clock ticks of USER_HZ, which is 100 on every architecture Go
// runs Linux on, whatever the kernel's own tick rate.
const userHZ = 100

// ProcessCPU returns the CPU time process pid has used so far, user and
// system, all its threads together, from /proc/<pid>/stat.
func ProcessCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read CPU time of process %d: %w", pid, err)
	}
	st, err := ParseStat(string(data))
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	return st.CPU(), nil
}

// Stat is what the benchmarks read of a /proc/<pid>/stat line.
type Stat struct {
	// Command is the executable's name, at most 15 bytes of it.
	Command string
	// Parent is the parent process's id.
	Parent int
	// Ticks is utime + stime, in clock ticks.
	Ticks uint64
}

// CPU is Ticks as a duration.
func (s Stat) CPU() time.Duration {
	return time.Duration(s.Ticks) * time.Second / userHZ
}

// ParseStat reads a /proc/<pid>/stat line: the command name (field 2), the
// parent (field 4), and utime + stime (fields 14 and 15). The command name
// is in parentheses and may itself hold spaces and parentheses, so the
// fields after it are counted from the last ")". Worked case:
// "42 (kube-apiserver) S 1 …" with utime 300 and stime 45 gives command
// kube-apiserver, parent 1, 345 ticks.
func ParseStat(stat string) (Stat, error) {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return Stat{}, fmt.Errorf("stat line %q: no command name in parentheses", abbreviate(stat))
	}
	// Fields from the 3rd (state) on.
	fields := strings.Fields(stat[end+1:])
	const parent, utime, stime = 4 - 3, 14 - 3, 15 - 3
	if len(fields) <= stime {
		return Stat{}, fmt.Errorf("stat line %q: %d fields after the command name, want at least %d", abbreviate(stat), len(fields), stime+1)
	}
	st := Stat{Command: stat[open+1 : end]}
	ppid, err := strconv.Atoi(fields[parent])
	if err != nil {
		return Stat{}, fmt.Errorf("stat line %q: field %d: %w", abbreviate(stat), parent+3, err)
	}
	st.Parent = ppid
	for _, i := range []int{utime, stime} {
		v, err := strconv.ParseUint(fields[i], 10, 64)
		if err != nil {
			return Stat{}, fmt.Errorf("stat line %q: field %d: %w", abbreviate(stat), i+3, err)
		}
		st.Ticks += v
	}
	return st, nil
}

func abbreviate(s string) string {
	const limit = 80
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}
