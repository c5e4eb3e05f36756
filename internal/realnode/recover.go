package realnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cleanUp removes what a node left once its processes are gone: shims,
// mounts, what it created in the fixed folders outside its own, and its
// folder; kube-proxy's rules, the bridge and the pods' cgroups only when
// its state says it created them.
func cleanUp(dir string, st state) error {
	errs := []error{killShims(dir), unmount(dir, st.Outside)}
	if st.Proxy != "" {
		errs = append(errs, cleanUpProxy(st.ProxyFirewall))
	}
	if _, err := os.Stat("/sys/class/net/" + bridgeName); err == nil && st.Bridge {
		if out, err := exec.Command("ip", "link", "delete", bridgeName).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("delete bridge %s: %w: %s", bridgeName, err, out))
		}
	}
	if st.Kubepods {
		errs = append(errs, removeKubepods())
	}
	for _, o := range st.Outside {
		errs = append(errs, o.remove())
	}
	// Removing a folder with a mount inside would delete what is mounted.
	switch mounts, err := mountsUnder(dir); {
	case err != nil:
		errs = append(errs, fmt.Errorf("keep %s: list the mounts under it: %w", dir, err))
	case len(mounts) > 0:
		errs = append(errs, fmt.Errorf("keep %s: still mounted: %v", dir, mounts))
	default:
		errs = append(errs, os.RemoveAll(dir))
	}
	return errors.Join(errs...)
}

// RecoverLeftovers tears down the nodes whose tests ended before Stop (a
// timeout, an interrupt, a kill), and fails while another process runs a
// node. It ends only processes a node recorded itself and removes only
// what the node's state says it created; a node folder without a state
// file is removed only when nothing in it is mounted or in use. Start
// calls it; a test that checks what a node leaves behind calls it before
// it looks.
func RecoverLeftovers() error {
	if err := acquire(context.Background(), os.Stderr); err != nil {
		return err
	}
	defer release()
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), dirPattern+"*"))
	if err != nil {
		return err
	}
	for _, dir := range dirs {
		var st state
		data, err := os.ReadFile(filepath.Join(dir, stateFile))
		if errors.Is(err, fs.ErrNotExist) {
			// Start writes the state file right after making the
			// folder, before it starts anything: this one is not a
			// node's, or its node started nothing.
			removeIfUnused(dir)
			continue
		}
		if err == nil {
			err = json.Unmarshal(data, &st)
		}
		if err != nil {
			return fmt.Errorf("read what node %s left: %w", dir, err)
		}
		ownOwner := st.Owner == os.Getpid()
		if st.Owner != 0 && !ownOwner && ownerAlive(st) {
			return fmt.Errorf("process %d runs a real node (%s) on this machine: one at a time", st.Owner, dir)
		}
		// The last started first: kube-proxy, kube-scheduler, then the
		// kubelet, so that it restarts no container, and containerd.
		slices.Reverse(st.PIDs)
		for _, pid := range st.PIDs {
			killIfRunsIn(pid, dir)
		}
		if !ownOwner {
			// This process's own control plane still serves it.
			for _, p := range st.ControlPlane {
				p.kill()
				for _, d := range p.Dirs {
					removeIfUnused(d)
				}
			}
		}
		var errs []error
		if st.Kubepods {
			errs = append(errs, killKubepods())
		}
		errs = append(errs, cleanUp(dir, st))
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("tear down what node %s left: %w", dir, err)
		}
	}
	return nil
}

// ownerAlive says whether the process that started the node still runs.
func ownerAlive(st state) bool {
	if st.OwnerStart == 0 {
		return syscall.Kill(st.Owner, 0) == nil
	}
	return proc{PID: st.Owner, Start: st.OwnerStart}.alive()
}

// removeIfUnused removes dir unless something is mounted in it or a
// process uses it; then it says why it keeps it.
func removeIfUnused(dir string) {
	mounts, err := mountsUnder(dir)
	if err != nil || len(mounts) > 0 {
		fmt.Fprintf(os.Stderr, "[realnode] keep %s: mounted inside: %v %v\n", dir, mounts, err)
		return
	}
	if users := usersOf(dir); len(users) > 0 {
		fmt.Fprintf(os.Stderr, "[realnode] keep %s: processes %v use it\n", dir, users)
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintf(os.Stderr, "[realnode] remove %s: %v\n", dir, err)
	}
}

// usersOf lists the processes whose command line names dir, or whose
// working folder, root, executable or an open file is in it.
func usersOf(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var users []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		base := filepath.Join("/proc", e.Name())
		links := []string{filepath.Join(base, "cwd"), filepath.Join(base, "root"), filepath.Join(base, "exe")}
		fds, _ := os.ReadDir(filepath.Join(base, "fd"))
		for _, fd := range fds {
			links = append(links, filepath.Join(base, "fd", fd.Name()))
		}
		cmdline, _ := os.ReadFile(filepath.Join(base, "cmdline"))
		uses := strings.Contains(string(cmdline), dir)
		for _, l := range links {
			if target, err := os.Readlink(l); err == nil && within(target, dir) {
				uses = true
			}
		}
		if uses {
			users = append(users, pid)
		}
	}
	return users
}

// within says whether path is dir or below it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// proc names a process so that a later one given the same PID is not
// taken for it.
type proc struct {
	PID int `json:"pid"`
	// Start is when it started, in clock ticks after boot: field 22 of
	// /proc/PID/stat.
	Start uint64 `json:"start"`
	// Name is its executable's name.
	Name string `json:"name,omitempty"`
	// Dirs are the folders of its own, removed once it is gone.
	Dirs []string `json:"dirs,omitempty"`
}

// self is this process.
func self() (proc, error) {
	_, start, err := procStat(os.Getpid())
	if err != nil {
		return proc{}, err
	}
	return proc{PID: os.Getpid(), Start: start}, nil
}

// procStat reads a process's parent and start time from /proc/PID/stat;
// a zombie, which has ended and waits for its parent to reap it, reads as
// gone.
func procStat(pid int) (ppid int, start uint64, err error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, err
	}
	// The second field, the command in parentheses, may hold spaces and
	// parentheses: the fields that follow start after the last ')'.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("read /proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state), f[1] field 4 (ppid), f[19] field 22.
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("read /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	if f[0] == "Z" {
		return 0, 0, fmt.Errorf("process %d has ended", pid)
	}
	if ppid, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, fmt.Errorf("read /proc/%d/stat: parent: %w", pid, err)
	}
	if start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("read /proc/%d/stat: start time: %w", pid, err)
	}
	return ppid, start, nil
}

func (p proc) alive() bool {
	_, start, err := procStat(p.PID)
	return err == nil && start == p.Start
}

// kill kills the process, if it still runs, and waits until it is gone.
func (p proc) kill() {
	if !p.alive() {
		return
	}
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	for deadline := time.Now().Add(5 * time.Second); p.alive() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
}

// controlPlaneChildren finds this process's own kube-apiserver and etcd
// (the apiserver first, to be ended first), with the temporary folders
// envtest made for them: envtest starts them without a parent-death
// signal and does not tell their PIDs.
func controlPlaneChildren() []proc {
	entries, _ := os.ReadDir("/proc")
	var found []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, start, err := procStat(pid)
		if err != nil || ppid != os.Getpid() {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		name := filepath.Base(exe)
		if err != nil || (name != "kube-apiserver" && name != "etcd") {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		found = append(found, proc{PID: pid, Start: start, Name: name, Dirs: envtestDirs(strings.Split(string(cmdline), "\x00"))})
	}
	slices.SortStableFunc(found, func(a, b proc) int {
		return strings.Compare(b.Name, a.Name)
	})
	return found
}

// envtestDirs picks from a control-plane command line the folders made for
// it: a --data-dir or --cert-dir directly in the temporary folder, named
// k8s_test_framework_* (envtest's) or sidecarset-testenv-* (testenv's, which
// holds the apiserver's certificates when it serves a real node).
func envtestDirs(args []string) []string {
	var dirs []string
	for i, a := range args {
		for _, flag := range []string{"--data-dir", "--cert-dir"} {
			var v string
			switch {
			case strings.HasPrefix(a, flag+"="):
				v = strings.TrimPrefix(a, flag+"=")
			case a == flag && i+1 < len(args):
				v = args[i+1]
			default:
				continue
			}
			if filepath.Dir(v) == filepath.Clean(os.TempDir()) && controlPlaneDir(filepath.Base(v)) && !slices.Contains(dirs, v) {
				dirs = append(dirs, v)
			}
		}
	}
	return dirs
}

// controlPlaneDir says whether a folder's name is one envtest or testenv
// gives a control plane's folders.
func controlPlaneDir(name string) bool {
	return strings.HasPrefix(name, "k8s_test_framework_") || strings.HasPrefix(name, "sidecarset-testenv-")
}
