package bench

import (
	"fmt"
	"os"
	"time"
)

// ScaleEnv names the environment variable that picks the scale: "full"
// (the default) or "small", a run of about two minutes that CI makes so
// the benchmark keeps working.
const ScaleEnv = "BENCH_SCALE"

// scale is how much the admission benchmark does.
type scale struct {
	name string
	// rates are the offered rates, creates per second, each held for
	// rateFor.
	rates   []int
	rateFor time.Duration
	// bulkPods are created by bulkClients clients at once.
	bulkPods, bulkClients int
	rounds                int
	// sets is how many SidecarSets there are (2 of them match the pods);
	// manySets the larger variant, measured at manyRates and in bulk.
	sets, manySets int
	manyRates      []int
	// unmatchedPods are created where no SidecarSet matches, to count the
	// webhook calls they cause.
	unmatchedPods int
}

var scales = map[string]scale{
	"full": {
		name: "full", rates: []int{50, 100, 200}, rateFor: 15 * time.Second,
		bulkPods: 3000, bulkClients: 64, rounds: 2,
		sets: 20, manySets: 200, manyRates: []int{200}, unmatchedPods: 500,
	},
	"small": {
		name: "small", rates: []int{50, 200}, rateFor: 2 * time.Second,
		bulkPods: 300, bulkClients: 64, rounds: 2,
		sets: 20, manySets: 200, manyRates: []int{200}, unmatchedPods: 100,
	},
}

// fromEnv returns the scale of scales that ScaleEnv names, "full" when it
// is unset.
func fromEnv[S any](scales map[string]S) (S, error) {
	name := os.Getenv(ScaleEnv)
	if name == "" {
		name = "full"
	}
	s, ok := scales[name]
	if !ok {
		var zero S
		return zero, fmt.Errorf("%s=%q: want full or small", ScaleEnv, name)
	}
	return s, nil
}

func scaleFromEnv() (scale, error) { return fromEnv(scales) }

// rolloutScale is how much the rollout benchmark does: sizes, pods in each
// namespace, smaller first (see bench.RolloutGoals), each rolled out as
// many times per maxUnavailable and kind as rounds says at its position:
// the smaller size's phases last seconds, in which the machine's noise
// weighs most, and are cheap to repeat.
type rolloutScale struct {
	name   string
	sizes  []int
	rounds []int
}

var rolloutScales = map[string]rolloutScale{
	"full":  {name: "full", sizes: []int{1000, 10000}, rounds: []int{5, 2}},
	"small": {name: "small", sizes: []int{50, 200}, rounds: []int{2, 2}},
}

func rolloutScaleFromEnv() (rolloutScale, error) { return fromEnv(rolloutScales) }
