package realnode

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// lockPath is the machine's real-node lock: one real node at a time, and
// no tearing down of leftovers while another process's node starts. Its
// path is fixed, not under the temporary folder: runs with different
// TMPDIR share one machine, its cgroups and its bridge.
var lockPath = "/run/lock/sidecarset-realnode.lock"

// The lock is held by the process while a node of it runs or it recovers
// leftovers; holds nest. The file is opened close-on-exec: the node's
// processes never hold it, and a process that dies releases it.
var (
	lockMu    sync.Mutex
	lockFile  *os.File
	lockHolds int
)

// acquire takes the machine's real-node lock, waiting while another process
// holds it; out hears once that it waits.
func acquire(ctx context.Context, out io.Writer) error {
	lockMu.Lock()
	defer lockMu.Unlock()
	if lockHolds > 0 {
		lockHolds++
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return fmt.Errorf("make the folder of the real-node lock: %w", err)
	}
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("open the real-node lock: %w", err)
	}
	told := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return fmt.Errorf("take the real-node lock %s: %w", lockPath, err)
		}
		if !told && out != nil {
			fmt.Fprintf(out, "[realnode] another process runs a real node on this machine; waiting for %s\n", lockPath)
			told = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return fmt.Errorf("wait for the real-node lock %s: %w", lockPath, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	lockFile, lockHolds = f, 1
	return nil
}

// release gives back one hold of the lock.
func release() {
	lockMu.Lock()
	defer lockMu.Unlock()
	if lockHolds == 0 {
		return
	}
	if lockHolds--; lockHolds == 0 {
		lockFile.Close()
		lockFile = nil
	}
}
