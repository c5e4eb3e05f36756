// Package childproc starts child processes that the kernel kills when the
// starting process dies, however it dies: a SIGKILL, a panic, a test
// binary's timeout. Without it a kubelet, containerd or
// kube-controller-manager outlives the test that started it.
package childproc

import (
	"os/exec"
	"runtime"
	"syscall"
)

// starts carries each command to the thread that starts it.
var starts = make(chan start)

type start struct {
	cmd  *exec.Cmd
	done chan error
}

func init() {
	go func() {
		// Linux delivers the parent-death signal when the thread that
		// forked the child exits, not when the process does (see
		// prctl(2), PR_SET_PDEATHSIG). The Go runtime ends a thread only
		// when a goroutine locked to it returns, so a command started
		// from an ordinary goroutine is safe only while no caller
		// happens to run locked. This goroutine locks its thread and
		// never returns: the thread lives as long as the process.
		runtime.LockOSThread()
		for s := range starts {
			s.done <- s.cmd.Start()
		}
	}()
}

// Start starts cmd with SIGKILL as its parent-death signal, keeping the
// other SysProcAttr settings it has (a process group of its own, say).
// Wait for it as for any command.
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	s := start{cmd: cmd, done: make(chan error, 1)}
	starts <- s
	return <-s.done
}
