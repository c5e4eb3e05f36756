package childproc

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

const childEnv = "SIDECARSET_CHILDPROC_TEST_CHILD"

// TestKilledWithParent: commands started from goroutines that locked
// their threads and returned (the threads are gone: the case the
// parent-death signal would fire for) keep running while their parent
// does, and die once the parent is SIGKILLed. Several goroutines: the Go
// runtime keeps the main thread alive when a goroutine locked to it
// returns, and one of them may have had it. One of the commands is
// started as envtest starts etcd, without the signal, through a wrapper
// (Wrap).
func TestKilledWithParent(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		child()
		return
	}
	parent := exec.Command(os.Args[0], "-test.run=^TestKilledWithParent$", "-test.timeout=1m")
	parent.Env = append(os.Environ(), childEnv+"=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = parent.Process.Kill(); _ = parent.Wait() }()
	lines := bufio.NewScanner(out)
	var pids []int
	for said := 0; said < grandchildren && lines.Scan(); said++ {
		var pid int
		if _, err := fmt.Sscanf(lines.Text(), "running %d", &pid); err == nil {
			pids = append(pids, pid)
		} else {
			t.Log(lines.Text())
		}
	}
	if len(pids) < grandchildren {
		t.Fatalf("the child process said %d grandchildren run, want %d", len(pids), grandchildren)
	}
	for _, pid := range pids {
		defer func() { _ = syscall.Kill(pid, syscall.SIGKILL) }()
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for running(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("grandchild %d outlived its parent's SIGKILL", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

const grandchildren = 4

// child starts the grandchildren as described above, waits long enough
// for the threads to be gone, and says which grandchildren still run.
func child() {
	started := make(chan int)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "childproc-test-")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	wrapped, err := Wrap(dir, sleep)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	for i := range grandchildren {
		go func() {
			runtime.LockOSThread()
			cmd := exec.Command(sleep, "60")
			start := Start
			if i == 0 {
				cmd = exec.Command(wrapped, "60")
				start = func(cmd *exec.Cmd) (err error) {
					Do(func() { err = cmd.Start() })
					return err
				}
			}
			if err := start(cmd); err != nil {
				fmt.Println("start:", err)
				os.Exit(1)
			}
			started <- cmd.Process.Pid
		}()
	}
	var pids []int
	for range grandchildren {
		pids = append(pids, <-started)
	}
	time.Sleep(300 * time.Millisecond)
	// The parent is SIGKILLed: the wrapper goes now, as it has run.
	_ = os.RemoveAll(dir)
	for _, pid := range pids {
		// The wrapper has become sleep by now.
		if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); string(comm) != "sleep\n" {
			fmt.Printf("grandchild %d runs %q, not sleep\n", pid, comm)
		} else if running(pid) {
			fmt.Println("running", pid)
		} else {
			fmt.Println("grandchild", pid, "died with the thread that asked for it")
		}
	}
	time.Sleep(time.Minute)
}

// running says whether pid runs and is no zombie.
func running(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	for i := len(data) - 1; i >= 0; i-- {
		if data[i] == ')' {
			return i+2 < len(data) && data[i+2] != 'Z'
		}
	}
	return false
}
