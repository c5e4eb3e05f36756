package controller

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrFenced refuses a pod write of a manager that may no longer lead.
var ErrFenced = errors.New("not writing pods: this manager may no longer hold the leader lease")

// Fence keeps a manager's pod writes inside its lease, so that none lands
// after another manager took over and listed the pods. A write may start
// only until Until, which each renewal of the lease moves forward, and not
// at all once the lease is given up: Close waits for the writes in flight,
// and the lease is released after it. The zero Fence, for a manager
// without leader election, lets every write through.
type Fence struct {
	// inFlight is held shared by each write, and exclusively by Close.
	inFlight sync.RWMutex
	closed   bool
	// until is when writes stop without a renewal, read with the
	// monotonic clock as client-go's lease times are; nil: no lease, no
	// limit.
	until atomic.Pointer[time.Time]
}

// Renewed records that the lease was acquired or renewed by a request sent
// at sent: another manager may take over leaseDuration after it, so a
// write may start until then less the time it may take (WriteTimeout) and
// a second for the clocks' rates and the scheduler.
func (f *Fence) Renewed(sent time.Time, leaseDuration time.Duration) {
	until := sent.Add(leaseDuration - WriteTimeout - time.Second)
	f.until.Store(&until)
}

// Enter reports whether a pod write may start at now; when it may, the
// caller calls Leave once the write is over.
func (f *Fence) Enter(now time.Time) bool {
	f.inFlight.RLock()
	if until := f.until.Load(); f.closed || (until != nil && now.After(*until)) {
		f.inFlight.RUnlock()
		return false
	}
	return true
}

// Leave ends a write that Enter let start.
func (f *Fence) Leave() { f.inFlight.RUnlock() }

// Close refuses every later write and returns once the writes in flight
// are over: each ends within WriteTimeout.
func (f *Fence) Close() {
	f.inFlight.Lock()
	f.closed = true
	f.inFlight.Unlock()
}
