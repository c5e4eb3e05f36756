package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// createTimeout bounds one create: longer than any webhook timeout.
const createTimeout = 30 * time.Second

// result is what a load measured.
type result struct {
	// latencies has one entry per create sent; ok those that succeeded.
	latencies, ok []time.Duration
	errors        int
	firstError    string
	// elapsed is from the first create sent to the last answer.
	elapsed time.Duration
}

// offered sends n creates at rate per second, each on its own goroutine
// when its time comes, whether or not earlier ones have answered: an open
// loop, so a slow answer delays no later create and hides no latency.
// Latency is from the moment a create is sent.
func offered(ctx context.Context, rate, n int, create func(context.Context, int) error) result {
	lat, errs := make([]time.Duration, n), make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))))
		wg.Go(func() {
			lat[i], errs[i] = timed(ctx, i, create)
		})
	}
	wg.Wait()
	return collect(lat, errs, time.Since(start))
}

// inBulk creates n pods with clients clients, each sending its next
// create as soon as its last one answered.
func inBulk(ctx context.Context, clients, n int, create func(context.Context, int) error) result {
	lat, errs := make([]time.Duration, n), make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				lat[i], errs[i] = timed(ctx, i, create)
			}
		})
	}
	wg.Wait()
	return collect(lat, errs, time.Since(start))
}

func timed(ctx context.Context, i int, create func(context.Context, int) error) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	began := time.Now()
	err := create(ctx, i)
	return time.Since(began), err
}

func collect(lat []time.Duration, errs []error, elapsed time.Duration) result {
	r := result{latencies: lat, elapsed: elapsed}
	for i, err := range errs {
		if err != nil {
			if r.errors == 0 {
				r.firstError = err.Error()
			}
			r.errors++
			continue
		}
		r.ok = append(r.ok, lat[i])
	}
	return r
}
