// Package childproc starts child processes that the kernel kills when the
// starting process dies, however it dies: a SIGKILL, a panic, a test
// binary's timeout. Without it a kubelet, containerd or
// kube-controller-manager outlives the test that started it.
//
// Start starts a command so. A child that other code starts (envtest's
// etcd and kube-apiserver) gets the same signal from a wrapper (Wrap)
// started through Do.
package childproc

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// Start starts cmd with SIGKILL as its parent-death signal, keeping the
// other SysProcAttr settings it has (a process group of its own, say).
// Wait for it as for any command.
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	var err error
	Do(func() { err = cmd.Start() })
	return err
}

// Do runs f on a thread that lives as long as the process and returns once
// f has. A child that f starts with a parent-death signal dies with the
// process, not before.
//
// Linux delivers the parent-death signal when the thread that forked the
// child exits, not when the process does (see prctl(2),
// PR_SET_PDEATHSIG). The Go runtime ends a thread only when a goroutine
// locked to it returns, so a child started from an ordinary goroutine is
// safe only while no other code happens to lock that thread and return.
// Do's threads are locked by goroutines that never return. Callers that
// overlap get a thread each, so that a slow f (a control plane's start)
// holds no other start back.
func Do(f func()) {
	w := takeThread()
	var panicked any
	done := make(chan struct{})
	w <- func() {
		defer func() {
			panicked = recover()
			close(done)
		}()
		f()
	}
	<-done
	idle.Lock()
	idle.threads = append(idle.threads, w)
	idle.Unlock()
	if panicked != nil {
		panic(panicked)
	}
}

// idle holds the locked threads no call to Do uses, each as the channel
// its goroutine takes work from.
var idle struct {
	sync.Mutex
	threads []chan func()
}

func takeThread() chan func() {
	idle.Lock()
	defer idle.Unlock()
	if n := len(idle.threads); n > 0 {
		w := idle.threads[n-1]
		idle.threads = idle.threads[:n-1]
		return w
	}
	w := make(chan func())
	go func() {
		runtime.LockOSThread()
		for f := range w {
			f()
		}
	}()
	return w
}
