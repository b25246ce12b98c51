// Package attr turns the value of one HCL attribute into a Go value, and a
// wrong value into the diagnostic it gets. The configuration's own blocks
// (config) and the provider blocks (providers.Block) both read through it, so
// a one-line string, a list, a number, a duration or a choice is judged and
// worded the same everywhere; each reader says only how it gets a value and
// where its diagnostics point (a Source).
//
// No function fails: a problem is reported and the default returned, so one
// run reports every problem. An unknown value (`electd check -no-env` leaves
// env() unknown) gives the default without a word: it cannot be judged.
package attr

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
	"unicode"

	"github.com/zclconf/go-cty/cty"
)

// Source is where a reader's values come from.
type Source interface {
	// Value is the attribute's value of type want: null when it is not
	// written (or written null), unknown when it cannot be known now (the
	// reader has reported why, if it is a problem).
	Value(name string, want cty.Type) cty.Value
	// Error reports a problem with the attribute's value. The detail never
	// repeats the value: it may be a secret.
	Error(name, summary, detail string)
}

// value is the attribute's value when it is known, not null and of type want.
func value(src Source, name string, want cty.Type) (cty.Value, bool) {
	v := src.Value(name, want)
	return v, !v.IsNull() && v.IsKnown() && v.Type().Equals(want)
}

// String is a string attribute.
func String(src Source, name, def string) string {
	v, ok := value(src, name, cty.String)
	if !ok {
		return def
	}
	return v.AsString()
}

// Line is a string attribute holding one line: a newline or another control
// character is refused. A token read with file() keeps the file's trailing
// newline, and would make every request fail without a word.
func Line(src Source, name, def string) string {
	v, ok := value(src, name, cty.String)
	if !ok {
		return def
	}
	s := v.AsString()
	checkLine(src, name, s)
	return s
}

func checkLine(src Source, name, s string) {
	if detail := NotOneLine(name, s); detail != "" {
		src.Error(name, "Invalid "+name, detail)
	}
}

// NotOneLine says why the value of attribute name is not one line, or "".
func NotOneLine(name, s string) string {
	i := strings.IndexFunc(s, unicode.IsControl)
	if i < 0 {
		return ""
	}
	what := "a control character"
	if s[i] == '\n' || s[i] == '\r' {
		what = "a line break"
	}
	return fmt.Sprintf("The %s holds %s. It must be one line; a value read with file() keeps the file's trailing newline: write trimspace(file(\"...\")).", name, what)
}

// Lines is a list of one-line strings; nil when unset or not wholly known.
func Lines(src Source, name string) []string {
	want := cty.List(cty.String)
	v := src.Value(name, want)
	if v.IsNull() || !v.IsWhollyKnown() || !(v.Type().IsListType() || v.Type().IsTupleType() || v.Type().IsSetType()) {
		return nil
	}
	out := []string{}
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() || !e.Type().Equals(cty.String) {
			src.Error(name, "Invalid list element", fmt.Sprintf("The elements of %s must be strings, not null.", name))
			return nil
		}
		checkLine(src, name, e.AsString())
		out = append(out, e.AsString())
	}
	return out
}

// Bool is a bool attribute.
func Bool(src Source, name string, def bool) bool {
	v, ok := value(src, name, cty.Bool)
	if !ok {
		return def
	}
	return v.True()
}

// MinInt and MaxInt bound a number that has no range of its own.
const (
	MinInt = math.MinInt32
	MaxInt = math.MaxInt32
)

// Int is a whole number from lo to hi. ok is false when the attribute is
// written but unknown or invalid.
func Int(src Source, name string, def, lo, hi int) (n int, ok bool) {
	v, ok := value(src, name, cty.Number)
	if !ok {
		return def, v.IsNull()
	}
	i, acc := v.AsBigFloat().Int64()
	if acc != big.Exact || i < int64(lo) || i > int64(hi) {
		detail := fmt.Sprintf("The %s must be a whole number from %d to %d.", name, lo, hi)
		if lo == MinInt && hi == MaxInt {
			detail = fmt.Sprintf("The %s must be a whole number.", name)
		}
		src.Error(name, "Invalid "+name, detail)
		return def, false
	}
	return int(i), true
}

// Duration is a Go duration string, never negative, and not zero either when
// positive. ok is false when the attribute is written but unknown or invalid.
func Duration(src Source, name string, def time.Duration, positive bool) (d time.Duration, ok bool) {
	v, ok := value(src, name, cty.String)
	if !ok {
		return def, v.IsNull()
	}
	d, err := time.ParseDuration(v.AsString())
	switch {
	case err != nil:
		src.Error(name, "Invalid duration",
			fmt.Sprintf("The %s must be a Go duration string such as \"500ms\", \"30s\", \"5m\" or \"1h30m\".", name))
	case positive && d <= 0:
		src.Error(name, "Invalid duration", fmt.Sprintf("The %s must be positive.", name))
	case d < 0:
		src.Error(name, "Invalid duration", fmt.Sprintf("The %s must not be negative.", name))
	default:
		return d, true
	}
	return def, false
}

// Enum is a string that must be one of allowed. The value itself is not
// repeated in the detail: it may have come from env().
func Enum(src Source, name, def string, allowed ...string) string {
	v, ok := value(src, name, cty.String)
	if !ok {
		return def
	}
	s := v.AsString()
	for _, a := range allowed {
		if s == a {
			return s
		}
	}
	src.Error(name, "Invalid "+name, fmt.Sprintf("The %s must be one of %s.", name, JoinQuoted(allowed, "or")))
	return def
}

// JoinQuoted is `"a", "b" or "c"` (conj "or").
func JoinQuoted(xs []string, conj string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	switch len(q) {
	case 0:
		return ""
	case 1:
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " " + conj + " " + q[len(q)-1]
}
