//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// hostState is what a real node could leave behind on the machine: mounts,
// network interfaces, the pods' cgroups, node folders, entries in the fixed
// folders the kubelet, containerd and CNI write to, and their processes.
func hostState() map[string][]string {
	state := map[string][]string{}
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 4 {
				state["mounts"] = append(state["mounts"], f[4])
			}
		}
	}
	state["interfaces"] = names("/sys/class/net")
	state["cgroups"], _ = filepath.Glob("/sys/fs/cgroup/*/kubepods")
	state["node folders"], _ = filepath.Glob(filepath.Join(os.TempDir(), "ssnode-*"))
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
	for _, pid := range names("/proc") {
		cmdline, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if slices.Contains(node, filepath.Base(args[0])) || strings.Contains(string(cmdline), "ssnode-") {
			state["processes"] = append(state["processes"], pid+" "+strings.Join(args, " "))
		}
	}
	slices.Sort(state["mounts"])
	return state
}

func names(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
