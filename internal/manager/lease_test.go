package manager

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/sidecarset/sidecarset/internal/controller"
)

// recordingLock is a lock whose writes fail with err, and which records
// whether the fence let a pod write through at each write.
type recordingLock struct {
	resourcelock.Interface
	fence      *controller.Fence
	at         time.Time
	err        error
	writesOpen []bool
}

func (l *recordingLock) Identity() string { return "me" }

func (l *recordingLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	open := l.fence.Enter(l.at)
	if open {
		l.fence.Leave()
	}
	l.writesOpen = append(l.writesOpen, open)
	return l.err
}

func (l *recordingLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.Update(ctx, ler)
}

func TestFencedLease(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	fence := &controller.Fence{}
	inner := &recordingLock{fence: fence, at: t0}
	now := t0
	lease := fencedLease{Interface: inner, fence: fence, leaseDuration: LeaseDuration, now: func() time.Time { return now }}
	writeOpen := func(at time.Time) bool {
		open := fence.Enter(at)
		if open {
			fence.Leave()
		}
		return open
	}

	if err := lease.Create(t.Context(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	if !writeOpen(t0.Add(11*time.Second)) || writeOpen(t0.Add(12*time.Second)) {
		t.Errorf("acquired at t0: want writes until t0+11.5s")
	}
	// A renewal that fails moves nothing; one that lands does.
	now = t0.Add(2 * time.Second)
	inner.err = errors.New("timeout")
	_ = lease.Update(t.Context(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	if writeOpen(t0.Add(12 * time.Second)) {
		t.Error("a failed renewal let writes go on")
	}
	inner.err = nil
	if err := lease.Update(t.Context(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	if !writeOpen(t0.Add(13 * time.Second)) {
		t.Error("a renewal at t0+2s did not let writes go on past t0+11.5s")
	}
	// Another's record (a takeover written by this lock's candidate loop
	// never happens, but a record without this identity moves nothing).
	now = t0.Add(5 * time.Second)
	_ = lease.Update(t.Context(), resourcelock.LeaderElectionRecord{HolderIdentity: "other"})
	if writeOpen(t0.Add(14 * time.Second)) {
		t.Error("a record of another holder moved the limit")
	}
	// The release: the fence is closed before the lease is given up.
	_ = lease.Update(t.Context(), resourcelock.LeaderElectionRecord{})
	if got := inner.writesOpen[len(inner.writesOpen)-1]; got {
		t.Error("the lease was given up while pod writes could still start")
	}
	if writeOpen(t0.Add(3 * time.Second)) {
		t.Error("a write started after the lease was given up")
	}
}
