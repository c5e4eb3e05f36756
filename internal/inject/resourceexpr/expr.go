// Package resourceexpr parses and evaluates the expressions of a sidecar's
// resourcesPolicy: arithmetic over one variable (cpu or memory, the app
// containers' aggregate) that yields the sidecar's request or limit.
//
// # Grammar
//
//	expr   = term { ("+" | "-") term }
//	term   = unary { ("*" | "/") unary }
//	unary  = "-" unary | factor
//	factor = literal | variable | call | "(" expr ")"
//	call   = ("max" | "min") "(" expr "," expr ")"
//
// Names are case-insensitive and spaces are free, as in OpenKruise. A
// literal is a number (2, 0.5, 1e3), a percentage (50% is 0.5) or a
// Kubernetes quantity with one of the suffixes m k M G T P Ki Mi Gi Ti Pi
// (200m, 64Mi). A number with an exponent takes no suffix, and an exponent
// above 18 is refused: the arithmetic is exact, and such numbers only make
// it costly.
//
// # Values
//
// Every value is a rational number of the resource's base unit: cores for
// cpu, bytes for memory. A bare number counts in that unit where it meets a
// quantity, so "cpu + 1" adds a core and "max(memory, 100)" is at least 100
// bytes, as in OpenKruise. Two rules keep an expression meaningful, and
// Parse checks them without any value: a product needs a plain number on
// one side ("cpu * cpu" is refused), and a divisor must be a plain number
// ("1 / cpu" is refused). A divisor that is a constant zero is refused too.
//
// Eval computes exactly and rounds once, up, to the resource's precision:
// whole millicores for cpu, whole bytes for memory. OpenKruise truncates to
// milli-units after each * and /, so a result can differ from Kruise's by
// one millicore (or one milli-byte, which it then keeps as a fraction of a
// byte). A result below zero, or a divisor that evaluates to zero, is an
// error.
//
// Worked cases, cpu = 1500m, memory = 1Gi:
//
//	cpu * 50%             → 750m
//	max(cpu * 10%, 200m)  → 200m
//	cpu / 3               → 500m
//	cpu / 7               → 215m (214.28…m rounded up)
//	memory / 4 + 16Mi     → 272Mi
//	min(memory, 512Mi)    → 512Mi
//	cpu - 2               → error: the result is negative
package resourceexpr

import (
	"fmt"
	"math/big"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// MaxLength is the longest expression Parse takes.
const MaxLength = 256

// maxExponent bounds the exponent of a number literal.
const maxExponent = 18

// Expr is a parsed expression over one variable.
type Expr struct {
	root node
}

// Parse parses src, an expression over the variable named variable ("cpu"
// or "memory"), and checks it. The error says what is wrong and where.
func Parse(src, variable string) (*Expr, error) {
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("the expression is empty")
	}
	if len(src) > MaxLength {
		return nil, fmt.Errorf("the expression is longer than %d characters", MaxLength)
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, variable: strings.ToLower(variable)}
	root, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, fmt.Errorf("unexpected %s at offset %d", t, t.pos)
	}
	return &Expr{root: root}, nil
}

// Eval returns the expression's value for the variable's value v, rounded
// up to scale (resource.Milli for cpu, 0 for memory) and written in format.
func (e *Expr) Eval(v resource.Quantity, scale resource.Scale, format resource.Format) (resource.Quantity, error) {
	r, err := e.root.eval(ratOf(v))
	if err != nil {
		return resource.Quantity{}, err
	}
	if r.Sign() < 0 {
		return resource.Quantity{}, fmt.Errorf("the result %s is negative", r.FloatString(3))
	}
	// r counted in units of 10^scale: for milli, r * 1000.
	units := ceil(new(big.Rat).Mul(r, pow10(-int(scale))))
	if !units.IsInt64() {
		return resource.Quantity{}, fmt.Errorf("the result %s is too large", r.FloatString(0))
	}
	q := resource.NewScaledQuantity(units.Int64(), scale)
	q.Format = format
	return *q, nil
}

// ratOf returns q's exact value.
func ratOf(q resource.Quantity) *big.Rat {
	d := q.AsDec()
	r := new(big.Rat).SetInt(d.UnscaledBig())
	return r.Mul(r, pow10(-int(d.Scale())))
}

// pow10 returns 10^n.
func pow10(n int) *big.Rat {
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(n))), nil)
	if n < 0 {
		return new(big.Rat).SetFrac(big.NewInt(1), p)
	}
	return new(big.Rat).SetInt(p)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// ceil returns the least integer not below r.
func ceil(r *big.Rat) *big.Int {
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}
