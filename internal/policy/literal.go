package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// literal returns a CEL expression for the JSON of v, for a JSONPatch value
// at the field path typePath ("Object.spec.containers"): JSON objects become
// Object initializers named by their field path, which the apiserver checks
// and which may mix field types; maps whose keys are not identifiers become
// map literals, and lists list literals. Kubernetes CEL refuses a list or
// map literal whose elements differ in type, so such a value is an
// *Unsupported.
func literal(typePath string, v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", typePath, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var value any
	if err := dec.Decode(&value); err != nil {
		return "", fmt.Errorf("decode %s: %w", typePath, err)
	}
	var b strings.Builder
	if err := writeLiteral(&b, typePath, value); err != nil {
		return "", err
	}
	return b.String(), nil
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reserved are CEL's reserved words, which cannot name a field in an
// initializer.
var reserved = map[string]bool{
	"as": true, "break": true, "const": true, "continue": true, "else": true, "false": true, "for": true,
	"function": true, "if": true, "import": true, "in": true, "let": true, "loop": true, "package": true,
	"namespace": true, "null": true, "return": true, "true": true, "var": true, "void": true, "while": true,
}

func writeLiteral(b *strings.Builder, typePath string, v any) error {
	switch v := v.(type) {
	case map[string]any:
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range v {
				if !yield(k) {
					return
				}
			}
		})
		fields := !slices.ContainsFunc(keys, func(k string) bool { return !identifier.MatchString(k) || reserved[k] })
		if fields {
			b.WriteString(typePath + "{")
		} else {
			if err := sameKind(typePath, mapValues(v, keys)); err != nil {
				return err
			}
			b.WriteString("{")
		}
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			if fields {
				b.WriteString(k + ": ")
				if err := writeLiteral(b, typePath+"."+k, v[k]); err != nil {
					return err
				}
				continue
			}
			b.WriteString(strconv.Quote(k) + ": ")
			// The apiserver names an object inside a map by the map's path.
			if err := writeLiteral(b, typePath, v[k]); err != nil {
				return err
			}
		}
		b.WriteString("}")
	case []any:
		if err := sameKind(typePath, v); err != nil {
			return err
		}
		b.WriteString("[")
		for i, e := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writeLiteral(b, typePath, e); err != nil {
				return err
			}
		}
		b.WriteString("]")
	case string:
		b.WriteString(strconv.Quote(v))
	case json.Number:
		s := v.String()
		if _, err := strconv.ParseInt(s, 10, 64); err != nil && !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		b.WriteString(s)
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	default:
		return fmt.Errorf("%s: unexpected JSON value %T", typePath, v)
	}
	return nil
}

func mapValues(m map[string]any, keys []string) []any {
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// sameKind refuses a list or map whose elements are not all of one JSON
// kind; objects count as one kind, as they all get the same type name.
func sameKind(typePath string, vs []any) error {
	kind := func(v any) string {
		switch v := v.(type) {
		case json.Number:
			if _, err := strconv.ParseInt(v.String(), 10, 64); err == nil {
				return "int"
			}
			return "double"
		default:
			return fmt.Sprintf("%T", v)
		}
	}
	for _, v := range vs[min(1, len(vs)):] {
		if kind(v) != kind(vs[0]) {
			return unsupported("%s mixes values of different types (%s and %s), which a CEL literal cannot hold", strings.TrimPrefix(typePath, "Object."), kind(vs[0]), kind(v))
		}
	}
	return nil
}
