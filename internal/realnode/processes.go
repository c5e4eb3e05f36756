package realnode

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sidecarset/sidecarset/internal/childproc"
)

// errExitedCleanly is how a child that exited with status 0 before it was
// ready exited: exec reports no error for it.
var errExitedCleanly = errors.New("exit status 0")

// process is a child the node started, in its own process group, which the
// kernel kills when this process dies (childproc).
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

func startProcess(out io.Writer, name, bin string, args ...string) (*process, error) {
	cmd := exec.Command(bin, args...)
	w := &prefixWriter{prefix: "[" + name + "] ", w: out}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := childproc.Start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, SIGKILL after grace, and waits.
func (p *process) stop(grace time.Duration) {
	if p == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// prefixWriter writes each line with a prefix, so that the logs of
// containerd and the kubelet can share one output.
type prefixWriter struct {
	prefix string
	w      io.Writer
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		if _, err := fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf[:i]); err != nil {
			return len(b), err
		}
		p.buf = p.buf[i+1:]
	}
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// kubepodsCgroups lists the kubelet's top cgroup in every hierarchy.
func kubepodsCgroups() ([]string, error) {
	hierarchies, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil, fmt.Errorf("list cgroup hierarchies: %w", err)
	}
	var dirs []string
	for _, h := range hierarchies {
		d := filepath.Join("/sys/fs/cgroup", h.Name(), "kubepods")
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			dirs = append(dirs, d)
		}
	}
	return dirs, nil
}

// cgroupTree lists dir and the cgroups below it, deepest first.
func cgroupTree(dir string) []string {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	slices.Reverse(dirs)
	return dirs
}

// killKubepods kills every process left in the pods' cgroups, by PID, and
// waits until they are gone.
func killKubepods() error {
	tops, err := kubepodsCgroups()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []int
		for _, top := range tops {
			for _, d := range cgroupTree(top) {
				data, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
				for _, f := range strings.Fields(string(data)) {
					if pid, err := strconv.Atoi(f); err == nil {
						left = append(left, pid)
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes left in the pods' cgroups: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeKubepods removes the pods' cgroups, deepest first.
func removeKubepods() error {
	tops, err := kubepodsCgroups()
	if err != nil {
		return err
	}
	var errs []error
	for _, top := range tops {
		for _, d := range cgroupTree(top) {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// shimSocketDir is where containerd 1.6 puts its shims' sockets, for
// every containerd on the machine whatever its own state folder.
const shimSocketDir = "/run/containerd/s"

// killShims kills the containerd-shim-runc-v2 processes serving this
// node's containerd, found by the socket on their command lines, and
// removes their sockets in shimSocketDir: a shim killed with SIGKILL
// leaves its socket behind. The sockets of other containerds' shims stay.
func killShims(dir string) error {
	socket := containerdSocket(dir)
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("list processes: %w", err)
	}
	var shims []int
	sockets := bundleSockets(dir)
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
		if filepath.Base(args[0]) != "containerd-shim-runc-v2" {
			continue
		}
		if address, namespace, id := shimArgs(args[1:]); address == socket {
			shims = append(shims, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			if namespace != "" && id != "" {
				sockets = append(sockets, shimSocket(address, namespace, id))
			}
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range shims {
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				return fmt.Errorf("shim %d does not exit", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var errs []error
	for _, s := range sockets {
		if err := os.Remove(s); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove shim socket: %w", err))
		}
	}
	return errors.Join(errs...)
}

// shimArgs reads a shim's -address, -namespace and -id flags, given as
// "-flag value" or "-flag=value".
func shimArgs(args []string) (address, namespace, id string) {
	values := map[string]string{}
	for i := 0; i < len(args); i++ {
		name, value, found := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") {
			continue
		}
		if !found && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			value = args[i+1]
			i++
		}
		values[name] = value
	}
	return values["address"], values["namespace"], values["id"]
}

// shimSocket is the socket containerd 1.6 gives a shim: named by the
// sha256 of its containerd's address, namespace and id.
func shimSocket(address, namespace, id string) string {
	return filepath.Join(shimSocketDir, fmt.Sprintf("%x", sha256.Sum256([]byte(filepath.Join(address, namespace, id)))))
}

// bundleSockets are the shim sockets written in the task bundles in the
// node's containerd state (their "address" files), for shims that are
// gone already; only sockets in shimSocketDir count.
func bundleSockets(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "containerd", "state", "io.containerd.runtime.v2.task", "*", "*", "address"))
	var sockets []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if s := strings.TrimPrefix(strings.TrimSpace(string(data)), "unix://"); filepath.Dir(s) == shimSocketDir {
			sockets = append(sockets, s)
		}
	}
	return sockets
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	var mounts []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mounts = append(mounts, mp)
		}
	}
	slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(mounts), nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmount unmounts what is mounted in the node's folder and what the node
// mounted in the fixed folders outside it (network namespaces).
func unmount(dir string, outside []*outsidePath) error {
	roots := []string{dir}
	for _, o := range outside {
		roots = append(roots, o.created()...)
	}
	var errs []error
	for _, root := range roots {
		mounts, err := mountsUnder(root)
		if err != nil {
			return err
		}
		for _, m := range mounts {
			if err := syscall.Unmount(m, 0); err != nil {
				if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
					errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// outsidePath is a fixed folder outside the node's own that the kubelet,
// containerd or CNI write to. What the node created there is what did not
// exist before it started.
type outsidePath struct {
	Path string `json:"path"`
	// Root is the first missing folder on the way to Path, when Path did
	// not exist: the node created it and everything below.
	Root string `json:"root,omitempty"`
	// Before are the entries of Path when it existed.
	Before map[string]bool `json:"before,omitempty"`
}

// outsidePaths are the fixed folders outside the node's own. The shims'
// sockets in shimSocketDir, which other containerds share, are removed by
// killShims.
var outsidePaths = []string{
	"/var/log/containers",
	"/var/lib/kubelet/device-plugins",
	"/var/lib/cni",
	"/run/containerd",
	"/run/netns",
}

// watchOutside records what the fixed folders hold before the node starts.
func watchOutside() []*outsidePath {
	var outside []*outsidePath
	for _, p := range outsidePaths {
		o := &outsidePath{Path: p}
		if entries, err := os.ReadDir(p); err == nil {
			o.Before = map[string]bool{}
			for _, e := range entries {
				o.Before[e.Name()] = true
			}
		} else {
			o.Root = p
			for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
				if _, err := os.Stat(d); err == nil {
					break
				}
				o.Root = d
			}
		}
		outside = append(outside, o)
	}
	return outside
}

// created lists what the node created under the path.
func (o *outsidePath) created() []string {
	if o.Root != "" {
		if _, err := os.Lstat(o.Root); err == nil {
			return []string{o.Root}
		}
		return nil
	}
	entries, _ := os.ReadDir(o.Path)
	var paths []string
	for _, e := range entries {
		if !o.Before[e.Name()] {
			paths = append(paths, filepath.Join(o.Path, e.Name()))
		}
	}
	return paths
}

func (o *outsidePath) remove() error {
	var errs []error
	for _, p := range o.created() {
		if mounts, _ := mountsUnder(p); len(mounts) > 0 {
			errs = append(errs, fmt.Errorf("keep %s: still mounted: %v", p, mounts))
			continue
		}
		errs = append(errs, os.RemoveAll(p))
	}
	return errors.Join(errs...)
}

// killIfRunsIn kills pid and waits for it, if its command line names dir:
// a PID recorded by an earlier node may belong to another process by now.
func killIfRunsIn(pid int, dir string) {
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || !strings.Contains(string(cmdline), dir) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(pid, 0) == nil && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
}
