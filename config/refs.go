package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// The names an expression may refer to, by the root of the reference:
// var.NAME (variable blocks), local.NAME (locals blocks), each.key and
// each.value (in a job block with for_each) and event (in the expressions
// evaluated when an action fires).
const (
	rootVar   = "var"
	rootLocal = "local"
	rootEach  = "each"
	rootEvent = "event"
)

// scope says which of the roots beyond var an expression may use.
type scope struct {
	locals bool // not in variable validations (evaluated before locals)
	each   bool // inside a job block with for_each
	event  bool // evaluated when an action fires
	// what names the argument in "Variables not allowed" for event: `the
	// "ttl" argument`, "Provider arguments".
	what string
}

// checkRefs reports each reference of trs that scope sc does not allow,
// and whether all were allowed. An expression with a bad reference is not
// evaluated: HCL would report the same reference again, less clearly.
func (l *loader) checkRefs(trs []hcl.Traversal, sc scope) (hcl.Diagnostics, bool) {
	var diags hcl.Diagnostics
	for _, tr := range trs {
		if d := l.checkRef(tr, sc); d != nil {
			diags = append(diags, d)
		}
	}
	return diags, len(diags) == 0
}

func (l *loader) checkRef(tr hcl.Traversal, sc scope) *hcl.Diagnostic {
	attr, attrRange := "", tr.SourceRange()
	if len(tr) > 1 {
		attrRange = tr[1].SourceRange()
		switch s := tr[1].(type) {
		case hcl.TraverseAttr:
			attr = s.Name
		case hcl.TraverseIndex:
			if s.Key.Type() == cty.String && s.Key.IsKnown() && !s.Key.IsNull() {
				attr = s.Key.AsString()
			}
		}
	}
	switch root := tr.RootName(); root {
	case rootVar:
		if attr == "" {
			return errorf(tr.SourceRange(), "Invalid reference", "A reference to an input variable is var.NAME, such as var.queue_url.")
		}
		if _, ok := l.vars[attr]; !ok {
			return errorf(attrRange, "Reference to undeclared input variable",
				"An input variable named %q has not been declared. Declare it with a variable %q {} block.", attr, attr)
		}
	case rootLocal:
		if !sc.locals {
			return errorf(tr.SourceRange(), "Local values not allowed",
				"A variable's validation is checked before the locals are evaluated; it may refer only to input variables (var.NAME).")
		}
		if attr == "" {
			return errorf(tr.SourceRange(), "Invalid reference", "A reference to a local value is local.NAME, such as local.shards.")
		}
		if _, ok := l.localDecls[attr]; !ok {
			return errorf(attrRange, "Reference to undeclared local value",
				"A local value named %q has not been declared. Declare it in a locals block: locals { %s = ... }.", attr, attr)
		}
	case rootEach:
		if !sc.each {
			return errorf(tr.SourceRange(), "Reference to \"each\" without for_each",
				"The each object exists only inside a job block that sets for_each, and not in the for_each argument itself.")
		}
		if attr != "key" && attr != "value" {
			return errorf(attrRange, "Unsupported attribute", "The each object has the attributes \"key\" and \"value\".")
		}
	case rootEvent:
		if !sc.event {
			return errorf(tr.SourceRange(), "Variables not allowed",
				"%s evaluated when the configuration is loaded, where no event exists yet. The event object is only available in %s.", sc.what, eventAttrs)
		}
		if len(tr) > 1 && !EventType.HasAttribute(attr) {
			return errorf(attrRange, "Unsupported attribute",
				"The event object has no attribute %q. Its attributes are %s.", attr, eventAttrList())
		}
	default:
		detail := "There is no variable named %q. An expression may refer to input variables (var.NAME), local values (local.NAME)"
		switch {
		case sc.event:
			detail += ", each.key and each.value inside a job with for_each, and the event object"
		default:
			detail += " and, inside a job with for_each, each.key and each.value"
		}
		return errorf(tr.SourceRange(), "Unknown variable", detail+".", root)
	}
	return nil
}
