package realnode

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// chainCounters are the packet and byte counters on a chain line of
// iptables-save (":INPUT ACCEPT [12:3456]").
var chainCounters = regexp.MustCompile(` \[[0-9]+:[0-9]+\]$`)

// HostState is what a real node could leave behind on the machine: mounts,
// network interfaces, the pods' cgroups, node folders, entries in the fixed
// folders the kubelet, containerd and CNI write to, iptables rules (IPv4
// and IPv6, see iptablesRules), and their processes. Taken before New and
// after Stop, the two must be equal.
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
	for _, bin := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(bin).Output()
		if err != nil {
			state[bin] = []string{"failed: " + err.Error()}
			continue
		}
		state[bin] = iptablesRules(string(out))
	}
	node := []string{"containerd", "containerd-shim-runc-v2", "kubelet", "kube-proxy", "kube-scheduler", "runc"}
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

// iptablesRules are the lines of iptables-save's output that say what is
// set up: without comments (they carry the time) and without the counters
// on chain lines. A table that holds nothing but built-in chains accepting
// everything is left out: it filters nothing, and once the kubelet or
// kube-proxy has used a table, iptables (nft-backed) keeps it even after
// every chain and rule they added is gone, so it is the same as no table.
func iptablesRules(save string) []string {
	var rules, table []string
	empty := true
	for _, line := range strings.Split(save, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = chainCounters.ReplaceAllString(line, "")
		table = append(table, line)
		switch {
		case strings.HasPrefix(line, "*"):
			table, empty = table[len(table)-1:], true
		case line == "COMMIT":
			if !empty {
				rules = append(rules, table...)
			}
			table = nil
		case !builtinAccept(line):
			empty = false
		}
	}
	return append(rules, table...)
}

// builtinAccept tells whether line declares a built-in chain with policy
// ACCEPT (":INPUT ACCEPT"); a chain of someone's own is declared with "-".
func builtinAccept(line string) bool {
	name, policy, ok := strings.Cut(strings.TrimPrefix(line, ":"), " ")
	return strings.HasPrefix(line, ":") && ok && policy == "ACCEPT" && name == strings.ToUpper(name) && !strings.Contains(name, "-")
}
