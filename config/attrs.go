package config

import (
	"fmt"
	"regexp"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/electd/electd/internal/attr"
)

// eventAttrs is how diagnostics name the attributes that may use `event`.
const eventAttrs = "command, env and dir of run, task and exec blocks, and url, body and headers of webhook blocks"

// attrs decodes the attributes of one block. Every helper appends its
// problems to diags and returns a usable value (the default) on error, so
// decoding goes on and one run reports every problem.
type attrs struct {
	a     hcl.Attributes
	ctx   fileCtx
	diags *hcl.Diagnostics
	l     *loader
	each  bool // inside a job block with for_each
}

func (l *loader) attrs(a hcl.Attributes, block *hcl.Block, diags *hcl.Diagnostics) attrs {
	return attrs{a: a, ctx: l.contexts(block.DefRange.Filename), diags: diags, l: l, each: l.inst != nil && l.inst.forEach()}
}

// refsOK reports the references of an attribute that its place does not
// allow, and whether there were none.
func (b attrs) refsOK(name string, a *hcl.Attribute, event bool) bool {
	d, ok := b.l.checkRefs(a.Expr.Variables(), scope{locals: true, each: b.each, event: event, what: fmt.Sprintf("The %q argument is", name)})
	b.add(d...)
	return ok
}

func (b attrs) add(d ...*hcl.Diagnostic) { *b.diags = append(*b.diags, d...) }

// rangeOf is the range of an attribute's expression, or fallback when unset.
func (b attrs) rangeOf(name string, fallback hcl.Range) hcl.Range {
	if a, ok := b.a[name]; ok {
		return a.Expr.Range()
	}
	return fallback
}

// value evaluates an attribute at load time, where var, local and each
// exist but event does not, and converts it to want. It returns a null value when the attribute is unset
// or null, and an unknown value when it could not be evaluated (the problem
// is reported).
func (b attrs) value(name string, want cty.Type) (cty.Value, *hcl.Attribute) {
	a, ok := b.a[name]
	if !ok {
		return cty.NullVal(want), nil
	}
	if !b.refsOK(name, a, false) {
		return cty.UnknownVal(want), a
	}
	v, d := a.Expr.Value(b.ctx.static)
	b.add(d...)
	if d.HasErrors() {
		return cty.UnknownVal(want), a
	}
	v, ok = b.convert(name, a, v, want)
	if !ok || !v.IsKnown() {
		return cty.UnknownVal(want), a
	}
	return v, a
}

// convert converts an attribute's value to want, or reports why it cannot.
func (b attrs) convert(name string, a *hcl.Attribute, v cty.Value, want cty.Type) (cty.Value, bool) {
	v, err := convert.Convert(v, want)
	if err != nil {
		b.add(errorf(a.Expr.Range(), "Incorrect attribute value type",
			"Inappropriate value for attribute %q: %s.", name, err))
		return cty.UnknownVal(want), false
	}
	return v, true
}

// source is the block as internal/attr reads it: the conversions of a value
// to a Go value and their diagnostics are shared with provider blocks; what
// is config's own is how a value is got (evaluated here, references checked).
type source struct{ b attrs }

func (s source) Value(name string, want cty.Type) cty.Value {
	v, _ := s.b.value(name, want)
	return v
}

// Error is only called on a value, so the attribute is written.
func (s source) Error(name, summary, detail string) {
	s.b.add(errorf(s.b.a[name].Expr.Range(), summary, "%s", detail))
}

func (b attrs) str(name, def string) string { return attr.String(source{b}, name, def) }

// has reports whether the attribute is written.
func (b attrs) has(name string) bool {
	_, ok := b.a[name]
	return ok
}

// known reports whether the attribute is written and its value known at
// load time (`check -no-env` leaves env() unknown).
func (b attrs) known(name string) bool {
	a, ok := b.a[name]
	if !ok {
		return false
	}
	if d, ok := b.l.checkRefs(a.Expr.Variables(), scope{locals: true, each: b.each}); !ok || len(d) > 0 {
		return false
	}
	v, d := a.Expr.Value(b.ctx.static)
	return !d.HasErrors() && v.IsWhollyKnown()
}

// line is a string attribute holding one line (attr.Line).
func (b attrs) line(name, def string) string { return attr.Line(source{b}, name, def) }

// enum is a string attribute that must be one of allowed.
func (b attrs) enum(name, def string, allowed ...string) string {
	return attr.Enum(source{b}, name, def, allowed...)
}

func (b attrs) boolean(name string, def bool) bool { return attr.Bool(source{b}, name, def) }

// integer is a whole number; ok is false when it is written but unknown or
// invalid. Each attribute's own bounds are checked by its caller, which says
// what the number counts.
func (b attrs) integer(name string, def int) (n int, ok bool) {
	return attr.Int(source{b}, name, def, attr.MinInt, attr.MaxInt)
}

// duration is a Go duration string; negative durations are rejected.
// ok is false when the attribute was set but is unknown or invalid.
func (b attrs) duration(name string, def time.Duration) (d time.Duration, ok bool) {
	return attr.Duration(source{b}, name, def, false)
}

// eventValue checks an expression that is evaluated when an action fires:
// it may use `event` and nothing else, only the attributes `event` has, and
// must have the type wanted. It evaluates it with an unknown event so type
// errors show at check time, and returns the result (unknown where it
// depends on the event) with the expression to keep.
func (b attrs) eventValue(name string, want cty.Type) (expr, cty.Value, *hcl.Attribute) {
	a, ok := b.a[name]
	if !ok {
		return expr{}, cty.NullVal(want), nil
	}
	bad := !b.refsOK(name, a, true)
	x := expr{e: a.Expr, ctx: b.ctx.runtime}
	if bad {
		return x, cty.UnknownVal(want), a
	}
	ctx := b.ctx.static.NewChild()
	ctx.Variables = map[string]cty.Value{"event": cty.UnknownVal(EventType)}
	v, d := a.Expr.Value(ctx)
	b.add(d...)
	if d.HasErrors() {
		return x, cty.UnknownVal(want), a
	}
	v, ok = b.convert(name, a, v, want)
	if !ok {
		return x, cty.UnknownVal(want), a
	}
	if v.IsNull() {
		b.add(errorf(a.Expr.Range(), "Invalid value", "The %s must not be null.", name))
		return x, cty.UnknownVal(want), a
	}
	return x, v, a
}

func (b attrs) eventString(name string) (String, cty.Value, *hcl.Attribute) {
	x, v, a := b.eventValue(name, cty.String)
	return String{x}, v, a
}

// eventMap is a map(string) evaluated when an action fires, and its value
// now (unknown where it depends on the event).
func (b attrs) eventMap(name string) (StringMap, cty.Value) {
	x, v, a := b.eventValue(name, cty.Map(cty.String))
	if v.IsKnown() && !v.IsNull() {
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			if e.IsNull() {
				// The key is the operator's own name, not a value.
				b.add(errorf(a.Expr.Range(), "Invalid value", "The value of %q in %s must not be null.", k.AsString(), name))
			}
		}
	}
	return StringMap{x}, v
}

// command checks the argv list of a run, task or exec block.
func (b attrs) command(block *hcl.Block) StringList {
	x, v, a := b.eventValue("command", cty.List(cty.String))
	if a == nil {
		return StringList{}
	}
	if v.IsKnown() && !v.IsNull() {
		if v.LengthInt() == 0 {
			b.add(errorf(a.Expr.Range(), "Empty command",
				"The command must list at least the program to run, such as [\"/usr/local/bin/sync\", \"--once\"]."))
		}
		for it := v.ElementIterator(); it.Next(); {
			if _, e := it.Element(); e.IsNull() {
				b.add(errorf(a.Expr.Range(), "Invalid value", "The elements of command must not be null."))
				break
			}
		}
	}
	return StringList{x}
}

func eventAttrList() string {
	var names []string
	for n := range EventType.AttributeTypes() {
		names = append(names, n)
	}
	return joinQuoted(sortedStrings(names), "and")
}

// quoteList is `"a", "b" or "c"`.
func quoteList(xs []string) string { return attr.JoinQuoted(xs, "or") }

func joinQuoted(xs []string, conj string) string { return attr.JoinQuoted(xs, conj) }

// TagNode is the tag every node has: its node_id.
const TagNode = "node"

// MaxTagsLen bounds the tags of a node as they travel in its membership
// record (names, values and punctuation).
const MaxTagsLen = 160

var tagNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// tags is a map of tag names to values known at load time: the agent's
// tags, a job's constraint and prefer.
func (b attrs) tags(name string) map[string]string {
	v, a := b.value(name, cty.Map(cty.String))
	if v.IsNull() || !v.IsKnown() {
		return nil
	}
	out := map[string]string{}
	size := 0
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		key := k.AsString()
		switch {
		case !tagNameRe.MatchString(key):
			b.add(errorf(a.Expr.Range(), "Invalid tag name",
				"The tag name %q in %s must start with a letter or digit and hold only letters, digits, \"_\", \".\" and \"-\".", key, name))
			continue
		case e.IsNull() || !e.IsKnown():
			b.add(errorf(a.Expr.Range(), "Invalid tag value", "The value of %q in %s must be a known string.", key, name))
			continue
		}
		val := e.AsString()
		if detail := attr.NotOneLine(name+"."+key, val); detail != "" {
			b.add(errorf(a.Expr.Range(), "Invalid tag value", "%s", detail))
			continue
		}
		out[key] = val
		size += len(key) + len(val) + 6
	}
	if size > MaxTagsLen {
		b.add(errorf(a.Expr.Range(), "Too many tags",
			"The %s take %d bytes; at most %d fit in the record other agents read.", name, size, MaxTagsLen))
	}
	return out
}
