package realnode

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// HostState is what a real node could leave behind on the machine: mounts,
// network interfaces, the pods' cgroups, node folders, entries in the fixed
// folders the kubelet, containerd and CNI write to, and their processes.
// Taken before Start and after Stop, the two must be equal.
func HostState() map[string][]string {
	state := map[string][]string{}
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 4 {
				state["mounts"] = append(state["mounts"], f[4])
			}
		}
	}
	state["interfaces"] = dirNames("/sys/class/net")
	state["cgroups"], _ = filepath.Glob("/sys/fs/cgroup/*/kubepods")
	state["node folders"], _ = filepath.Glob(filepath.Join(os.TempDir(), dirPattern+"*"))
	for _, d := range []string{"/var/log/containers", "/var/lib/kubelet", "/var/lib/cni", "/run/containerd", "/run/netns", "/etc/cni", "/opt/containerd"} {
		if _, err := os.Stat(d); err != nil {
			state[d] = []string{"absent"}
			continue
		}
		_ = filepath.WalkDir(d, func(p string, _ os.DirEntry, err error) error {
			if err == nil {
				state[d] = append(state[d], p)
			}
			return nil
		})
	}
	node := []string{"containerd", "containerd-shim-runc-v2", "kubelet", "runc"}
	for _, pid := range dirNames("/proc") {
		cmdline, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if slices.Contains(node, filepath.Base(args[0])) || strings.Contains(string(cmdline), dirPattern) {
			state["processes"] = append(state["processes"], pid+" "+strings.Join(args, " "))
		}
	}
	slices.Sort(state["mounts"])
	return state
}

func dirNames(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
