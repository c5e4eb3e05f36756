package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

// TestNothingOutlivesThePlayground starts the playground binary once for
// each way it can end and checks that no process it started (etcd,
// kube-apiserver, kube-controller-manager) outlives it: found by parent
// process ID before the end, each must be gone, or a zombie, a few seconds
// after the playground is. Ended gracefully, the playground must also exit
// as it says it does, having stopped everything and removed the
// kubeconfig; SIGKILLed, its children go with it, by their parent-death
// signal. The cases with stdout closed are what `make playground 2>&1 |
// tee log` met on Ctrl-C: tee went first, and the next write killed the
// playground before it stopped anything.
//
// Each case starts a whole playground, one after the other: 90 s in all on
// two cores shared with other builds (5 to 15 s a case, and 35 s to build
// the binary). -short skips it.
func TestNothingOutlivesThePlayground(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the playground five times")
	}
	if _, err := testenv.Assets(); err != nil {
		t.Fatal(err)
	}
	bin := buildPlayground(t)
	for _, tc := range []struct {
		name string
		// demo runs the demo, which writes as it goes.
		demo bool
		end  func(*testing.T, *playgroundProcess)
		// exit is the playground's exit status, -1 for a death by signal.
		exit int
		// graceful: the playground stops everything itself.
		graceful bool
		// says is what the playground writes on stdout (stdoutOpen) or
		// stderr as it stops.
		says       string
		stdoutOpen bool
	}{{
		name: "stdout closed while the demo writes",
		demo: true,
		end:  func(t *testing.T, p *playgroundProcess) { p.closeStdout(t) },
		exit: 1, graceful: true,
		says: "sidecarset-playground: stopped: nobody reads the output any more",
	}, {
		name: "SIGINT with stdout closed",
		end: func(t *testing.T, p *playgroundProcess) {
			p.closeStdout(t)
			p.signal(t, syscall.SIGINT)
		},
		exit: 0, graceful: true,
	}, {
		name: "SIGHUP",
		end:  func(t *testing.T, p *playgroundProcess) { p.signal(t, syscall.SIGHUP) },
		exit: 0, graceful: true,
		says: "==> stopping everything ...\n    done in", stdoutOpen: true,
	}, {
		name: "SIGTERM",
		end:  func(t *testing.T, p *playgroundProcess) { p.signal(t, syscall.SIGTERM) },
		exit: 0, graceful: true,
		says: "==> stopping everything ...\n    done in", stdoutOpen: true,
	}, {
		name: "SIGKILL",
		end:  func(t *testing.T, p *playgroundProcess) { p.signal(t, syscall.SIGKILL) },
		exit: -1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := startPlayground(t, bin, tc.demo)
			children := descendants(p.cmd.Process.Pid)
			t.Cleanup(func() {
				for _, c := range children {
					if c.alive() {
						_ = syscall.Kill(c.pid, syscall.SIGKILL)
					}
				}
			})
			var names []string
			for _, c := range children {
				names = append(names, c.comm)
			}
			for _, want := range []string{"etcd", "kube-apiserver", "kube-controller"} {
				if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
					t.Fatalf("the playground's processes are %v: no %s", names, want)
				}
			}

			tc.end(t, p)
			select {
			case <-p.exited:
			case <-time.After(time.Minute):
				t.Fatalf("the playground still runs a minute after the end\nstdout:\n%s\nstderr:\n%s", &p.out, &p.errOut)
			}
			if got := p.cmd.ProcessState.ExitCode(); got != tc.exit {
				t.Errorf("the playground ended with %v, want exit status %d\nstdout:\n%s\nstderr:\n%s", p.cmd.ProcessState, tc.exit, &p.out, &p.errOut)
			}
			deadline := time.Now().Add(5 * time.Second)
			for _, c := range children {
				for c.alive() && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				if c.alive() {
					t.Errorf("%s (process %d) outlived the playground", c.comm, c.pid)
				}
			}
			if !tc.graceful {
				return
			}
			if _, err := os.Stat(p.kubeconfig); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("kubeconfig left behind: %v", err)
			}
			said := p.errOut.String()
			if tc.stdoutOpen {
				select {
				case <-p.outDone:
				case <-time.After(5 * time.Second):
					t.Error("the playground's stdout is still open 5 s after it ended")
				}
				said = p.out.String()
			}
			if !strings.Contains(said, tc.says) {
				t.Errorf("the playground did not say %q as it stopped:\n%s", tc.says, said)
			}
		})
	}
}

// buildPlayground builds this package's binary into a folder of the test's.
func buildPlayground(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sidecarset-playground")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// playgroundProcess is a running playground binary, its stdout read from
// a pipe of the test's until closeStdout.
type playgroundProcess struct {
	cmd        *exec.Cmd
	kubeconfig string
	stdout     *os.File
	out        fixture.Logs
	errOut     fixture.Logs
	exited     chan struct{}
	// outDone is closed once stdout is read to its end or closed.
	outDone chan struct{}
}

// startPlayground starts the playground on one simulated node and returns
// once it says it is up.
func startPlayground(t *testing.T, bin string, demo bool) *playgroundProcess {
	t.Helper()
	p := &playgroundProcess{
		kubeconfig: filepath.Join(t.TempDir(), "playground.kubeconfig"),
		exited:     make(chan struct{}),
		outDone:    make(chan struct{}),
	}
	p.cmd = exec.Command(bin, "--nodes=1", "--demo="+strconv.FormatBool(demo), "--kubeconfig="+p.kubeconfig)
	// The control plane's folders (etcd's data, the certificates) go
	// here: a SIGKILLed playground leaves them behind.
	p.cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdout = r
	p.cmd.Stdout, p.cmd.Stderr = w, &p.errOut
	// Wait returns even if something the playground started holds its
	// stderr: the test then says what outlived it.
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		_ = r.Close()
	})
	up := make(chan struct{})
	go func() {
		defer close(p.outDone)
		lines := bufio.NewScanner(r)
		for lines.Scan() {
			_, _ = p.out.Write([]byte(lines.Text() + "\n"))
			if lines.Text() == "Press Ctrl-C to stop everything." {
				close(up)
			}
		}
	}()
	select {
	case <-up:
		return p
	case <-p.exited:
		t.Fatalf("the playground ended before it was up: %v\nstdout:\n%s\nstderr:\n%s", p.cmd.ProcessState, &p.out, &p.errOut)
	case <-time.After(2 * time.Minute):
		t.Fatalf("the playground was not up within 2 minutes\nstdout:\n%s\nstderr:\n%s", &p.out, &p.errOut)
	}
	return nil
}

// closeStdout closes the read end of the playground's stdout, as a
// stopped `| tee` does: its next write fails.
func (p *playgroundProcess) closeStdout(t *testing.T) {
	t.Helper()
	if err := p.stdout.Close(); err != nil {
		t.Fatal(err)
	}
}

func (p *playgroundProcess) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("send %v to the playground: %v", sig, err)
	}
}

// process is one process as /proc shows it; its start time tells it from
// a later process given the same ID.
type process struct {
	pid   int
	comm  string
	start string
}

// descendants returns the processes below root: its children, theirs, and
// so on.
func descendants(root int) []process {
	children := map[int][]process{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, ppid, _, ok := readStat(pid)
		if ok {
			children[ppid] = append(children[ppid], p)
		}
	}
	var all []process
	for queue := []int{root}; len(queue) > 0; queue = queue[1:] {
		for _, c := range children[queue[0]] {
			all = append(all, c)
			queue = append(queue, c.pid)
		}
	}
	return all
}

// alive says whether p still runs: its ID is not gone, not taken by a
// later process, and not a zombie's (a process killed with its parent
// may stay one under an init that reaps nothing).
func (p process) alive() bool {
	now, _, state, ok := readStat(p.pid)
	return ok && now.start == p.start && state != "Z" && state != "X"
}

// readStat reads /proc/PID/stat (proc(5)): the command name, within
// parentheses, may hold spaces and parentheses itself.
func readStat(pid int) (p process, ppid int, state string, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return p, 0, "", false
	}
	open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return p, 0, "", false
	}
	// From the third field, state; the fourth, the parent's ID; the
	// 22nd, the start time.
	fields := strings.Fields(string(data[end+1:]))
	if len(fields) < 20 {
		return p, 0, "", false
	}
	ppid, err = strconv.Atoi(fields[1])
	if err != nil {
		return p, 0, "", false
	}
	return process{pid: pid, comm: string(data[open+1 : end]), start: fields[19]}, ppid, fields[0], true
}
