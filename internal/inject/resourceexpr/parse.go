package resourceexpr

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/api/resource"
)

type tokKind int

const (
	tokEOF tokKind = iota
	tokLiteral
	tokName
	tokOp // one of + - * / ( ) ,
)

type token struct {
	kind tokKind
	text string
	pos  int
	// value is a literal's, in base units; quantity says it had a suffix.
	value    *big.Rat
	quantity bool
}

func (t token) String() string {
	if t.kind == tokEOF {
		return "end of expression"
	}
	return strconv.Quote(t.text)
}

// suffixes are the quantity suffixes a literal may carry, as OpenKruise
// takes them (no E or Ei: a trailing E reads as an exponent).
var suffixes = []string{"m", "k", "M", "G", "T", "P", "Ki", "Mi", "Gi", "Ti", "Pi"}

func lex(src string) ([]token, error) {
	var toks []token
	for i := 0; i < len(src); {
		c := rune(src[i])
		switch {
		case c >= 0x80:
			return nil, fmt.Errorf("unexpected character at offset %d", i)
		case unicode.IsSpace(c):
			i++
		case strings.ContainsRune("+-*/(),", c):
			toks = append(toks, token{kind: tokOp, text: string(c), pos: i})
			i++
		case isDigit(c) || c == '.':
			t, err := lexLiteral(src, i)
			if err != nil {
				return nil, err
			}
			toks = append(toks, t)
			i += len(t.text)
		case unicode.IsLetter(c) || c == '_':
			j := i
			for j < len(src) && (isDigit(rune(src[j])) || unicode.IsLetter(rune(src[j])) || src[j] == '_') {
				j++
			}
			toks = append(toks, token{kind: tokName, text: src[i:j], pos: i})
			i = j
		default:
			return nil, fmt.Errorf("unexpected %q at offset %d", c, i)
		}
	}
	return append(toks, token{kind: tokEOF, pos: len(src)}), nil
}

// lexLiteral reads the literal at src[start:]: digits with at most one
// dot, then an exponent, a percent sign or a suffix.
func lexLiteral(src string, start int) (token, error) {
	i := start
	digits := 0
	for dot := false; i < len(src); i++ {
		c := rune(src[i])
		if c == '.' && !dot {
			dot = true
			continue
		}
		if !isDigit(c) {
			break
		}
		digits++
	}
	if digits == 0 {
		return token{}, fmt.Errorf("a number needs a digit at offset %d", start)
	}
	mantissa := src[start:i]
	exp := 0
	hasExp := false
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		j := i + 1
		if j < len(src) && (src[j] == '+' || src[j] == '-') {
			j++
		}
		k := j
		for k < len(src) && isDigit(rune(src[k])) {
			k++
		}
		if k > j {
			n, err := strconv.Atoi(src[i+1 : k])
			if err != nil || abs(n) > maxExponent {
				return token{}, fmt.Errorf("the exponent of %q at offset %d is beyond ±%d", src[start:k], start, maxExponent)
			}
			exp, hasExp, i = n, true, k
		}
	}
	value, ok := new(big.Rat).SetString(mantissa)
	if !ok {
		return token{}, fmt.Errorf("%q at offset %d is not a number", mantissa, start)
	}
	value.Mul(value, pow10(exp))
	t := token{kind: tokLiteral, pos: start, value: value}
	switch {
	case i < len(src) && src[i] == '%':
		value.Quo(value, big.NewRat(100, 1))
		i++
	case i < len(src) && unicode.IsLetter(rune(src[i])):
		j := i
		for j < len(src) && unicode.IsLetter(rune(src[j])) {
			j++
		}
		suffix := src[i:j]
		if hasExp {
			return token{}, fmt.Errorf("%q at offset %d: a number with an exponent takes no suffix", src[start:j], start)
		}
		if !contains(suffixes, suffix) {
			return token{}, fmt.Errorf("%q at offset %d: unknown suffix %q (one of %s)", src[start:j], start, suffix, strings.Join(suffixes, " "))
		}
		q, err := resource.ParseQuantity(src[start:j])
		if err != nil {
			return token{}, fmt.Errorf("%q at offset %d: %w", src[start:j], start, err)
		}
		t.value, t.quantity = ratOf(q), true
		i = j
	}
	t.text = src[start:i]
	return t, nil
}

func isDigit(c rune) bool { return c >= '0' && c <= '9' }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// maxDepth bounds nesting, so that a deeply parenthesised input cannot
// exhaust the stack.
const maxDepth = 32

type parser struct {
	toks     []token
	next     int
	variable string
}

func (p *parser) peek() token { return p.toks[p.next] }

func (p *parser) take() token {
	t := p.toks[p.next]
	if t.kind != tokEOF {
		p.next++
	}
	return t
}

func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tokOp && t.text == op
}

func (p *parser) expect(op string) error {
	if t := p.take(); t.kind != tokOp || t.text != op {
		return fmt.Errorf("expected %q at offset %d, found %s", op, t.pos, t)
	}
	return nil
}

func (p *parser) expr(depth int) (node, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("the expression nests deeper than %d", maxDepth)
	}
	left, err := p.term(depth)
	if err != nil {
		return nil, err
	}
	for p.isOp("+") || p.isOp("-") {
		op := p.take()
		right, err := p.term(depth)
		if err != nil {
			return nil, err
		}
		left = &binary{op: op.text[0], left: left, right: right}
	}
	return left, nil
}

func (p *parser) term(depth int) (node, error) {
	left, err := p.unary(depth)
	if err != nil {
		return nil, err
	}
	for p.isOp("*") || p.isOp("/") {
		op := p.take()
		right, err := p.unary(depth)
		if err != nil {
			return nil, err
		}
		switch {
		case op.text == "*" && left.quantity() && right.quantity():
			return nil, fmt.Errorf("\"*\" at offset %d multiplies two quantities: one side must be a plain number", op.pos)
		case op.text == "/" && right.quantity():
			return nil, fmt.Errorf("\"/\" at offset %d divides by a quantity: the divisor must be a plain number", op.pos)
		case op.text == "/" && isZero(right):
			return nil, fmt.Errorf("\"/\" at offset %d divides by zero", op.pos)
		}
		left = &binary{op: op.text[0], left: left, right: right}
	}
	return left, nil
}

func (p *parser) unary(depth int) (node, error) {
	if p.isOp("-") {
		if depth > maxDepth {
			return nil, fmt.Errorf("the expression nests deeper than %d", maxDepth)
		}
		p.take()
		n, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		return &neg{n}, nil
	}
	return p.factor(depth)
}

func (p *parser) factor(depth int) (node, error) {
	t := p.take()
	switch {
	case t.kind == tokLiteral:
		return &literal{value: t.value, qty: t.quantity}, nil
	case t.kind == tokOp && t.text == "(":
		n, err := p.expr(depth + 1)
		if err != nil {
			return nil, err
		}
		return n, p.expect(")")
	case t.kind != tokName:
		return nil, fmt.Errorf("expected a number, %s or a function at offset %d, found %s", p.variable, t.pos, t)
	}
	name := strings.ToLower(t.text)
	if !p.isOp("(") {
		if name != p.variable {
			return nil, fmt.Errorf("unknown name %q at offset %d: this expression may use only %s", t.text, t.pos, p.variable)
		}
		return variable{}, nil
	}
	if name != "max" && name != "min" {
		return nil, fmt.Errorf("unknown function %q at offset %d: only max and min", t.text, t.pos)
	}
	p.take()
	a, err := p.expr(depth + 1)
	if err != nil {
		return nil, err
	}
	if !p.isOp(",") {
		return nil, fmt.Errorf("%s at offset %d takes two arguments", name, t.pos)
	}
	p.take()
	b, err := p.expr(depth + 1)
	if err != nil {
		return nil, err
	}
	if err := p.expect(")"); err != nil {
		return nil, err
	}
	return &call{max: name == "max", a: a, b: b}, nil
}

// isZero reports whether n is a constant that equals zero.
func isZero(n node) bool {
	v, err := n.eval(nil)
	return err == nil && v != nil && v.Sign() == 0
}

// errNotConstant is what a variable evaluates to without a value.
var errNotConstant = errors.New("not a constant")

// node is a parsed expression. eval computes it for the variable's value
// x; a nil x evaluates constants only.
type node interface {
	eval(x *big.Rat) (*big.Rat, error)
	// quantity reports whether the value is a quantity rather than a
	// plain number.
	quantity() bool
}

type literal struct {
	value *big.Rat
	qty   bool
}

func (l *literal) eval(*big.Rat) (*big.Rat, error) { return l.value, nil }
func (l *literal) quantity() bool                  { return l.qty }

type variable struct{}

func (variable) eval(x *big.Rat) (*big.Rat, error) {
	if x == nil {
		return nil, errNotConstant
	}
	return x, nil
}
func (variable) quantity() bool { return true }

type neg struct{ n node }

func (n *neg) eval(x *big.Rat) (*big.Rat, error) {
	v, err := n.n.eval(x)
	if err != nil {
		return nil, err
	}
	return new(big.Rat).Neg(v), nil
}
func (n *neg) quantity() bool { return n.n.quantity() }

type binary struct {
	op          byte
	left, right node
}

func (b *binary) eval(x *big.Rat) (*big.Rat, error) {
	l, err := b.left.eval(x)
	if err != nil {
		return nil, err
	}
	r, err := b.right.eval(x)
	if err != nil {
		return nil, err
	}
	out := new(big.Rat)
	switch b.op {
	case '+':
		return out.Add(l, r), nil
	case '-':
		return out.Sub(l, r), nil
	case '*':
		return out.Mul(l, r), nil
	}
	if r.Sign() == 0 {
		return nil, errors.New("division by zero")
	}
	return out.Quo(l, r), nil
}

// quantity: a sum, difference, product or quotient is a quantity when
// either side is (Parse refuses the products and quotients where that
// would be ambiguous).
func (b *binary) quantity() bool { return b.left.quantity() || b.right.quantity() }

type call struct {
	max  bool
	a, b node
}

func (c *call) eval(x *big.Rat) (*big.Rat, error) {
	a, err := c.a.eval(x)
	if err != nil {
		return nil, err
	}
	b, err := c.b.eval(x)
	if err != nil {
		return nil, err
	}
	if (a.Cmp(b) >= 0) == c.max {
		return a, nil
	}
	return b, nil
}
func (c *call) quantity() bool { return c.a.quantity() || c.b.quantity() }
