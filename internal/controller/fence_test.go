package controller

import (
	"testing"
	"time"
)

func TestFenceLimit(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var f Fence
	if !f.Enter(t0) {
		t.Fatal("a fence without a lease refused a write")
	}
	f.Leave()
	// Renewed at t0 for 15 s: writes of 2.5 s may start until t0+11.5s.
	f.Renewed(t0, 15*time.Second)
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {11 * time.Second, true}, {11500 * time.Millisecond, true}, {11600 * time.Millisecond, false}, {time.Minute, false}} {
		got := f.Enter(t0.Add(c.at))
		if got {
			f.Leave()
		}
		if got != c.want {
			t.Errorf("a write at t0+%v: let through %v, want %v", c.at, got, c.want)
		}
	}
	f.Renewed(t0.Add(time.Minute), 15*time.Second)
	if !f.Enter(t0.Add(time.Minute + time.Second)) {
		t.Error("a renewal did not let writes start again")
	} else {
		f.Leave()
	}
}

func TestFenceCloseWaitsForWritesInFlight(t *testing.T) {
	var f Fence
	now := time.Now()
	if !f.Enter(now) {
		t.Fatal("refused the first write")
	}
	closed := make(chan struct{})
	go func() {
		f.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while a write was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	f.Leave()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return once the write was over")
	}
	if f.Enter(now) {
		f.Leave()
		t.Error("a write started after Close")
	}
}
