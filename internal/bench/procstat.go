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
	ticks, err := ParseCPUTicks(string(data))
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// ParseCPUTicks returns utime + stime, fields 14 and 15 of a
// /proc/<pid>/stat line, in clock ticks. The command name, field 2, is in
// parentheses and may itself hold spaces and parentheses, so the fields
// are counted from the last ")". Worked case: "42 (kube apiserver) S 1 …"
// with utime 300 and stime 45 gives 345.
func ParseCPUTicks(stat string) (uint64, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("stat line %q: no command name in parentheses", abbreviate(stat))
	}
	// Fields from the 3rd (state) on.
	fields := strings.Fields(stat[end+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("stat line %q: %d fields after the command name, want at least %d", abbreviate(stat), len(fields), stime+1)
	}
	var total uint64
	for _, i := range []int{utime, stime} {
		v, err := strconv.ParseUint(fields[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat line %q: field %d: %w", abbreviate(stat), i+3, err)
		}
		total += v
	}
	return total, nil
}

func abbreviate(s string) string {
	const limit = 80
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}
