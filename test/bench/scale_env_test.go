package bench

import (
	"strings"
	"testing"
)

// TestFromEnv: BENCH_SCALE picks a scale by name, full when unset, and a
// name no scale has is an error that names the variable and the choices.
func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		value, want, err string
	}{
		{value: "", want: "full"},
		{value: "full", want: "full"},
		{value: "small", want: "small"},
		{value: "huge", err: `BENCH_SCALE="huge": want full or small`},
	} {
		t.Run(tc.value, func(t *testing.T) {
			t.Setenv(ScaleEnv, tc.value)
			for kind, got := range map[string]func() (string, error){
				"admission": func() (string, error) { s, err := scaleFromEnv(); return s.name, err },
				"rollout":   func() (string, error) { s, err := rolloutScaleFromEnv(); return s.name, err },
				"memory":    func() (string, error) { s, err := memoryScaleFromEnv(); return s.name, err },
			} {
				name, err := got()
				switch {
				case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
					t.Errorf("%s: error %v, want %q", kind, err, tc.err)
				case tc.err == "" && err != nil:
					t.Errorf("%s: %v", kind, err)
				case tc.err == "" && name != tc.want:
					t.Errorf("%s: scale %q, want %q", kind, name, tc.want)
				}
			}
		})
	}
}
