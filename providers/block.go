package providers

import (
	"fmt"
	"math/big"
	"strings"
	"time"
	"unicode"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
)

// Block is a provider block decoded by its Type's Spec, as the Type's Decode
// sees it: the values with the ranges diagnostics point at. The accessors
// never fail: a problem becomes a diagnostic and the accessor returns the
// default, so one run reports every problem. A value may be unknown (`electd
// check -no-env` leaves env() unknown): accessors then return the default and
// Check drops the rules that needed it.
type Block struct {
	Val      cty.Value      // an object of the Spec's implied type
	Attrs    hcl.Attributes // the attributes written, for their ranges
	DefRange hcl.Range      // the block header
	Missing  hcl.Range      // where a missing attribute would go
	Diags    hcl.Diagnostics

	unknown  map[string]bool
	reported map[string]bool // attributes that already have an error
}

// Has reports whether the attribute is written in the block.
func (b *Block) Has(name string) bool {
	_, ok := b.Attrs[name]
	return ok
}

// Range is the range of the attribute's expression, or the block header when
// it is not written.
func (b *Block) Range(name string) hcl.Range {
	if a, ok := b.Attrs[name]; ok {
		return a.Expr.Range()
	}
	return b.DefRange
}

func (b *Block) get(name string) cty.Value {
	v := b.Val
	if v.IsNull() || !v.IsKnown() || !v.Type().IsObjectType() || !v.Type().HasAttribute(name) {
		b.markUnknown(name)
		return cty.DynamicVal
	}
	v = v.GetAttr(name)
	if !v.IsWhollyKnown() {
		b.markUnknown(name)
	}
	return v
}

func (b *Block) markUnknown(name string) {
	if b.unknown == nil {
		b.unknown = map[string]bool{}
	}
	b.unknown[name] = true
}

// Known reports whether the attribute has a known, non-null value.
func (b *Block) Known(name string) bool {
	v := b.get(name)
	return v.IsWhollyKnown() && !v.IsNull()
}

// Errorf adds an error on the attribute (on the block header when name is
// empty or the attribute is not written). The detail must not repeat the
// value: it may be a secret.
func (b *Block) Errorf(name, summary, detail string, args ...any) {
	b.add(hcl.DiagError, name, summary, fmt.Sprintf(detail, args...))
}

// Warnf adds a warning, as Errorf.
func (b *Block) Warnf(name, summary, detail string, args ...any) {
	b.add(hcl.DiagWarning, name, summary, fmt.Sprintf(detail, args...))
}

func (b *Block) add(sev hcl.DiagnosticSeverity, name, summary, detail string) {
	if sev == hcl.DiagError {
		if b.reported == nil {
			b.reported = map[string]bool{}
		}
		b.reported[name] = true
	}
	rng := b.Range(name)
	if name == "" {
		rng = b.Missing
	}
	b.Diags = append(b.Diags, &hcl.Diagnostic{Severity: sev, Summary: summary, Detail: detail, Subject: rng.Ptr()})
}

// Check turns the field errors of a Validate into diagnostics. A rule on an
// unknown value cannot be judged, so its error is dropped; an error on the
// whole block (no attribute) is dropped when any value was unknown. An
// attribute that already has an error (a line break, say) gets no second.
func (b *Block) Check(err error) {
	for _, fe := range FieldErrors(err) {
		if b.unknown[fe.Attr] || (fe.Attr == "" && len(b.unknown) > 0) || (fe.Attr != "" && b.reported[fe.Attr]) {
			continue
		}
		b.add(hcl.DiagError, fe.Attr, fe.Summary, fe.Detail)
	}
}

// String is a string attribute holding one line: a newline or another
// control character is refused (a token read with file() keeps the file's
// trailing newline; trimspace(file(...)) removes it).
func (b *Block) String(name, def string) string {
	v := b.get(name)
	if v.IsNull() || !v.IsKnown() || !v.Type().Equals(cty.String) {
		return def
	}
	s := v.AsString()
	b.checkLine(name, s)
	return s
}

func (b *Block) checkLine(name, s string) {
	if detail := NotOneLine(name, s); detail != "" {
		b.Errorf(name, "Invalid "+name, "%s", detail)
	}
}

// NotOneLine says why the value of attribute name is not one line, or "".
// The configuration's one-line attributes outside provider blocks use it too.
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

// List is a list of one-line strings; nil when unset or unknown.
func (b *Block) List(name string) []string {
	v := b.get(name)
	if v.IsNull() || !v.IsWhollyKnown() || !(v.Type().IsListType() || v.Type().IsTupleType() || v.Type().IsSetType()) {
		return nil
	}
	out := []string{}
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() || !e.Type().Equals(cty.String) {
			b.Errorf(name, "Invalid list element", "The elements of %s must be strings, not null.", name)
			return nil
		}
		b.checkLine(name, e.AsString())
		out = append(out, e.AsString())
	}
	return out
}

// Bool is a bool attribute.
func (b *Block) Bool(name string, def bool) bool {
	v := b.get(name)
	if v.IsNull() || !v.IsKnown() || !v.Type().Equals(cty.Bool) {
		return def
	}
	return v.True()
}

// Int is a whole number from lo to hi.
func (b *Block) Int(name string, def, lo, hi int) int {
	v := b.get(name)
	if v.IsNull() || !v.IsKnown() || !v.Type().Equals(cty.Number) {
		return def
	}
	i, acc := v.AsBigFloat().Int64()
	if acc != big.Exact || i < int64(lo) || i > int64(hi) {
		b.Errorf(name, "Invalid "+name, "The %s must be a whole number from %d to %d.", name, lo, hi)
		return def
	}
	return int(i)
}

// Duration is a positive Go duration string.
func (b *Block) Duration(name string, def time.Duration) time.Duration {
	s := b.String(name, "")
	if s == "" && !b.Known(name) {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		b.Errorf(name, "Invalid duration", "The %s must be a positive Go duration string such as \"5s\".", name)
		return def
	}
	return d
}

// Enum is a string that must be one of allowed.
func (b *Block) Enum(name, def string, allowed ...string) string {
	s := b.String(name, def)
	for _, a := range allowed {
		if s == a {
			return s
		}
	}
	b.Errorf(name, "Invalid "+name, "The %s must be one of %s.", name, JoinQuoted(allowed, "or"))
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

// StringAttr is the hcldec spec of a string attribute.
func StringAttr(name string, required bool) hcldec.Spec {
	return &hcldec.AttrSpec{Name: name, Type: cty.String, Required: required}
}

// ListAttr is the hcldec spec of a list(string) attribute.
func ListAttr(name string, required bool) hcldec.Spec {
	return &hcldec.AttrSpec{Name: name, Type: cty.List(cty.String), Required: required}
}
