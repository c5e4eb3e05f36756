package childproc

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// The environment of a wrapper (Wrap) that this binary runs as: the
// binary it becomes and the process that must outlive it.
const (
	execEnv   = "SIDECARSET_CHILDPROC_EXEC"
	parentEnv = "SIDECARSET_CHILDPROC_PARENT"
)

// Wrap writes into dir an executable named as bin that runs bin, with
// the same arguments, as a child of this process with SIGKILL as its
// parent-death signal, and returns its path: for code that takes a
// binary's path and starts it itself, without that signal (envtest's etcd
// and kube-apiserver). Start it through Do.
//
// The wrapper is a shell script that runs this process's own executable,
// which sets the signal (init, before anything else of the program runs)
// and execs bin: the process keeps its ID, so signals sent to it reach bin.
func Wrap(dir, bin string) (string, error) {
	pid := strconv.Itoa(os.Getpid())
	// /proc/PID/exe is this process's executable even once its file is
	// replaced or removed (a rebuilt binary, a finished test's).
	script := fmt.Sprintf("#!/bin/sh\n# Runs %s with SIGKILL as its parent-death signal (internal/childproc).\n"+
		"export %s=%s %s=%s\nexec /proc/%s/exe \"$@\"\n",
		filepath.Base(bin), parentEnv, pid, execEnv, shellQuote(bin), pid)
	path := filepath.Join(dir, filepath.Base(bin))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("write a wrapper for %s: %w", bin, err)
	}
	return path, nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func init() {
	if bin := os.Getenv(execEnv); bin != "" {
		become(bin, os.Getenv(parentEnv))
	}
}

// become sets SIGKILL as this process's parent-death signal and execs bin
// with this process's arguments; it returns only by exiting. The signal
// outlives the exec (prctl(2): it is cleared only for a set-user-ID or
// set-group-ID binary).
func become(bin, parent string) {
	// The signal belongs to the thread that sets it, and only the thread
	// that execs survives the exec: one thread must do both. Init runs
	// locked to the main thread already; this says so.
	runtime.LockOSThread()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "childproc: set the parent-death signal for %s: %v\n", bin, errno)
		os.Exit(1)
	}
	// A parent that died before the signal was set is gone unnoticed.
	if strconv.Itoa(os.Getppid()) != parent {
		fmt.Fprintf(os.Stderr, "childproc: %s not started: process %s, which started it, is gone\n", bin, parent)
		os.Exit(1)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, execEnv+"=") || strings.HasPrefix(kv, parentEnv+"=")
	})
	err := syscall.Exec(bin, append([]string{bin}, os.Args[1:]...), env)
	fmt.Fprintf(os.Stderr, "childproc: exec %s: %v\n", bin, err)
	os.Exit(127)
}
