package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// This file builds the runtime specs in memory, for the commands that take
// no configuration file (`electd lock`): the values a file would hold,
// checked by the rules a file's are.

// ListOf is a StringList whose value is xs whatever the event: a command
// given as an argv on the command line rather than written in a file.
func ListOf(xs ...string) StringList {
	vals := make([]cty.Value, len(xs))
	for i, x := range xs {
		vals[i] = cty.StringVal(x)
	}
	v := cty.ListValEmpty(cty.String)
	if len(vals) > 0 {
		v = cty.ListVal(vals)
	}
	return StringList{expr{e: hcl.StaticExpr(v, hcl.Range{Filename: "<command line>"}), ctx: &hcl.EvalContext{}}}
}

// ValidJobName reports whether name may name a job (it is the lease key in
// every store): a letter or digit, then letters, digits, "_", "." and "-".
func ValidJobName(name string) bool { return jobNameRe.MatchString(name) }

// DefaultNodeID is the node_id of an agent block that sets none: the host
// name.
func DefaultNodeID() string { return defaultNodeID() }
