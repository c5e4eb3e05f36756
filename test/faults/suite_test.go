// Package faults runs rollouts through faults: the manager killed at
// random points, the apiserver's answers failing. Its tests are long and
// load the machine, so `make test` leaves them out and `make test-faults`
// runs them alone, after it.
package faults

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecarset/sidecarset/internal/bench"
	"github.com/sidecarset/sidecarset/internal/fixture"
	"github.com/sidecarset/sidecarset/internal/testenv"
)

var cluster *fixture.Cluster

func TestMain(m *testing.M) {
	os.Exit(testenv.RunSuite(m, &cluster, fixture.Start, func(code int) int {
		if code != 0 {
			return code
		}
		if err := results.write(); err != nil {
			fmt.Fprintln(os.Stderr, "write the figures:", err)
			return 1
		}
		return 0
	}))
}

// SeedEnv names the environment variable that fixes the seed of the
// faults' randomness, to run a failing case again; without it the seed is
// the time, and each test prints the one it used.
const SeedEnv = "SIDECARSET_FAULT_SEED"

// newRand returns the test's source of randomness, and logs its seed.
func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(SeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", SeedEnv, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (%s=%d runs this case again)", seed, SeedEnv, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// createPods creates n pods of the fixture, p001..pNNN, a few at a time,
// and waits until all are Ready.
func createPods(f *fixture.F, n int) {
	f.T.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > n {
					return
				}
				pod := f.NewPod(fmt.Sprintf("p%03d", i))
				f.C.FitPod(&pod.Spec)
				if err := f.Client.Create(f.T.Context(), pod); err != nil {
					mu.Lock()
					failed = fmt.Errorf("create pod %s: %w", pod.Name, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if failed != nil {
		f.T.Fatal(failed)
	}
	f.WaitReady(n)
}

// ResultsEnv names the environment variable that holds the folder where a
// passing run writes its figures: faults.md, and its keys merged into
// summary.json (`make test-faults` sets it to bench/results).
const ResultsEnv = "SIDECARSET_FAULT_RESULTS"

// results gathers what the passing tests measured.
var results report

type report struct {
	mu      sync.Mutex
	summary map[string]any
	lines   []string
}

// add records summary keys and the lines of a section of faults.md.
func (r *report) add(summary map[string]any, lines ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.summary == nil {
		r.summary = map[string]any{}
	}
	maps.Copy(r.summary, summary)
	r.lines = append(append(r.lines, lines...), "")
}

// write writes the figures into dir, when ResultsEnv names one and some
// test recorded them.
func (r *report) write() error {
	dir := os.Getenv(ResultsEnv)
	r.mu.Lock()
	defer r.mu.Unlock()
	if dir == "" || len(r.lines) == 0 {
		return nil
	}
	head := []string{
		"# Fault tests",
		"",
		fmt.Sprintf("Written by `make test-faults` (test/faults) on %s, %d CPUs, %s.", time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), loadAverage()),
		"",
	}
	text := strings.Join(append(head, r.lines...), "\n")
	if err := os.WriteFile(filepath.Join(dir, "faults.md"), []byte(text), 0o644); err != nil {
		return err
	}
	return bench.MergeSummary(filepath.Join(dir, "summary.json"), r.summary)
}

// loadAverage says how loaded the machine was, from /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load average unknown"
	}
	fields := strings.Fields(string(b))
	if len(fields) < 3 {
		return "load average unknown"
	}
	return "load average " + strings.Join(fields[:3], " ")
}
