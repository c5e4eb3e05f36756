package resourceexpr

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestEval: the package documentation's worked cases and the grammar's
// corners, cpu = 1500m and memory = 1Gi.
func TestEval(t *testing.T) {
	tests := []struct {
		expr, variable, want string
	}{
		{"cpu * 50%", "cpu", "750m"},
		{"max(cpu * 10%, 200m)", "cpu", "200m"},
		{"cpu / 3", "cpu", "500m"},
		{"cpu / 7", "cpu", "215m"},
		{"memory / 4 + 16Mi", "memory", "272Mi"},
		{"min(memory, 512Mi)", "memory", "512Mi"},
		{"cpu", "cpu", "1500m"},
		{"CPU*2", "cpu", "3"},
		{"cpu + 1", "cpu", "2500m"},           // a bare number counts in cores
		{"max(memory, 100)", "memory", "1Gi"}, // and in bytes
		{"100", "memory", "100"},
		{"0.25", "cpu", "250m"},
		{".5", "cpu", "500m"},
		{"1e-3", "cpu", "1m"},
		{"1.5e1%", "cpu", "150m"},
		{"-(-cpu)", "cpu", "1500m"},
		{"cpu - 500m - 500m", "cpu", "500m"}, // left to right
		{"cpu - (500m - 500m)", "cpu", "1500m"},
		{"2 * cpu / 4", "cpu", "750m"},
		{"cpu * 1 / 3 * 3", "cpu", "1500m"}, // exact: Kruise's truncation would give 1499m
		{"Max(cpu, 2) - Min(cpu, 2)", "cpu", "500m"},
		{"memory * 0.1", "memory", "107374183"}, // 107374182.4 bytes, rounded up
		{"1Ki + 1k", "memory", "2024"},
		{"cpu - 1500m", "cpu", "0"},
	}
	values := map[string]resource.Quantity{"cpu": resource.MustParse("1500m"), "memory": resource.MustParse("1Gi")}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			e, err := Parse(tt.expr, tt.variable)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			scale, format := resource.Scale(0), resource.BinarySI
			if tt.variable == "cpu" {
				scale, format = resource.Milli, resource.DecimalSI
			}
			got, err := e.Eval(values[tt.variable], scale, format)
			if err != nil {
				t.Fatalf("Eval: %v", err)
			}
			if got.String() != tt.want {
				t.Errorf("got %s, want %s", got.String(), tt.want)
			}
		})
	}
}

// TestEvalErrors: what only the value can tell.
func TestEvalErrors(t *testing.T) {
	tests := []struct {
		expr, value, want string
	}{
		{"cpu - 2", "1500m", "the result -0.500 is negative"},
		{"cpu / (1 - 1 + 0 * cpu)", "1", ""}, // refused by Parse: divides by a quantity
		{"cpu * 100000000000000000", "100P", "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			e, err := Parse(tt.expr, "cpu")
			if tt.want == "" {
				if err == nil {
					t.Fatalf("Parse took %q", tt.expr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			_, err = e.Eval(resource.MustParse(tt.value), resource.Milli, resource.DecimalSI)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestParseErrors: each refusal says why, and where.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		expr, variable, want string
	}{
		{"", "cpu", "the expression is empty"},
		{"   ", "cpu", "the expression is empty"},
		{"memory * 2", "cpu", `unknown name "memory" at offset 0: this expression may use only cpu`},
		{"cpu", "memory", `unknown name "cpu" at offset 0: this expression may use only memory`},
		{"cpu * cpu", "cpu", `"*" at offset 4 multiplies two quantities`},
		{"100m * 2m", "cpu", `"*" at offset 5 multiplies two quantities`},
		{"1 / cpu", "cpu", `"/" at offset 2 divides by a quantity`},
		{"cpu / 0", "cpu", `"/" at offset 4 divides by zero`},
		{"cpu / (2 - 2)", "cpu", `"/" at offset 4 divides by zero`},
		{"cpu +", "cpu", "expected a number, cpu or a function at offset 5, found end of expression"},
		{"cpu cpu", "cpu", `unexpected "cpu" at offset 4`},
		{"(cpu", "cpu", `expected ")" at offset 4`},
		{"cpu)", "cpu", `unexpected ")" at offset 3`},
		{"max(cpu)", "cpu", "max at offset 0 takes two arguments"},
		{"max(cpu, 1, 2)", "cpu", `expected ")" at offset 10`},
		{"avg(cpu, 1)", "cpu", `unknown function "avg" at offset 0: only max and min`},
		{"cpu * 2x", "cpu", `unknown suffix "x"`},
		{"cpu * 1Ei", "cpu", `unknown suffix "Ei"`},
		{"1e3m", "cpu", "a number with an exponent takes no suffix"},
		{"1e19", "cpu", "beyond ±18"},
		{"1e-99999999999", "cpu", "beyond ±18"},
		{"cpu % 2", "cpu", `unexpected '%' at offset 4`},
		{".", "cpu", "a number needs a digit at offset 0"},
		{"cpu ^ 2", "cpu", `unexpected '^' at offset 4`},
		{"cpu × 2", "cpu", "unexpected character at offset 4"},
		{strings.Repeat("(", 40) + "cpu" + strings.Repeat(")", 40), "cpu", "nests deeper than 32"},
		{strings.Repeat("-", 40) + "cpu", "cpu", "nests deeper than 32"},
		{strings.Repeat("cpu+", 64) + "cpu", "cpu", "longer than 256 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, err := Parse(tt.expr, tt.variable)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// FuzzParse: nothing panics, and what Parse takes evaluates without a
// panic for any value.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"max(cpu*50%, 50m)", "memory/4+16Mi", "-(cpu-1e-3)", "min(1Ki, memory) * 2.5", "cpu/(1-1)", "((cpu))"} {
		f.Add(s, int64(1500))
	}
	f.Fuzz(func(t *testing.T, src string, milli int64) {
		for _, v := range []string{"cpu", "memory"} {
			e, err := Parse(src, v)
			if err != nil {
				if err.Error() == "" {
					t.Fatalf("an empty error for %q", src)
				}
				continue
			}
			q, err := e.Eval(*resource.NewMilliQuantity(milli, resource.DecimalSI), resource.Milli, resource.DecimalSI)
			if err == nil && q.Sign() < 0 {
				t.Fatalf("%q gave %s, below zero", src, q.String())
			}
		}
	})
}
