package realnode

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLock: the real-node lock waits while another holder has it, says so
// once, gives up with the context, and nests within the process.
func TestLock(t *testing.T) {
	saved := lockPath
	// A folder that does not exist yet: acquire makes it.
	lockPath = filepath.Join(t.TempDir(), "lock", "node.lock")
	t.Cleanup(func() { lockPath = saved })

	if err := acquire(context.Background(), nil); err != nil {
		t.Fatalf("acquire where the lock's folder is missing: %v", err)
	}
	release()

	// Another open file description of the lock conflicts as another
	// process would.
	other, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := acquire(ctx, &out); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire while another holds the lock: %v, want the context's deadline", err)
	}
	if n := strings.Count(out.String(), "waiting for"); n != 1 {
		t.Errorf("told %d times that it waits, want once: %q", n, out.String())
	}
	if lockHolds != 0 {
		t.Fatalf("a failed acquire left %d holds", lockHolds)
	}

	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := acquire(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if lockHolds != 2 {
		t.Fatalf("%d holds after two acquires, want 2", lockHolds)
	}
	release()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Fatal("the lock was free with one hold left")
	}
	release()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("the lock is still held after the last release: %v", err)
	}
}
