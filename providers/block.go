package providers

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/electd/electd/internal/attr"
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

// The accessors below are internal/attr's conversions, shared with the
// configuration's own blocks; what is the Block's own is where a value comes
// from (the decoded object) and where its diagnostics point.

// source is the Block as internal/attr reads it.
type source struct{ b *Block }

// Value ignores want: the Spec already gave the attribute its type.
func (s source) Value(name string, _ cty.Type) cty.Value { return s.b.get(name) }

func (s source) Error(name, summary, detail string) { s.b.add(hcl.DiagError, name, summary, detail) }

// String is a string attribute holding one line: a newline or another
// control character is refused (a token read with file() keeps the file's
// trailing newline; trimspace(file(...)) removes it).
func (b *Block) String(name, def string) string { return attr.Line(source{b}, name, def) }

// List is a list of one-line strings; nil when unset or unknown.
func (b *Block) List(name string) []string { return attr.Lines(source{b}, name) }

// Bool is a bool attribute.
func (b *Block) Bool(name string, def bool) bool { return attr.Bool(source{b}, name, def) }

// Int is a whole number from lo to hi.
func (b *Block) Int(name string, def, lo, hi int) int {
	n, _ := attr.Int(source{b}, name, def, lo, hi)
	return n
}

// Duration is a positive Go duration string.
func (b *Block) Duration(name string, def time.Duration) time.Duration {
	d, _ := attr.Duration(source{b}, name, def, true)
	return d
}

// Enum is a string that must be one of allowed.
func (b *Block) Enum(name, def string, allowed ...string) string {
	return attr.Enum(source{b}, name, def, allowed...)
}

// StringAttr is the hcldec spec of a string attribute.
func StringAttr(name string, required bool) hcldec.Spec {
	return &hcldec.AttrSpec{Name: name, Type: cty.String, Required: required}
}

// ListAttr is the hcldec spec of a list(string) attribute.
func ListAttr(name string, required bool) hcldec.Spec {
	return &hcldec.AttrSpec{Name: name, Type: cty.List(cty.String), Required: required}
}
