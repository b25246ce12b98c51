package config

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Expressions that may use `event` are kept unevaluated and evaluated when the
// action fires. These small types hide the HCL expression from the agent.
// Their zero value is "not set": Eval returns the zero result.

type expr struct {
	e   hcl.Expression
	ctx *hcl.EvalContext // functions and everything but `event`
}

func (x expr) IsSet() bool { return x.e != nil }

func (x expr) eval(ev Event, want cty.Type) (cty.Value, error) {
	ctx := x.ctx.NewChild()
	ctx.Variables = map[string]cty.Value{"event": ev.Value()}
	v, diags := x.e.Value(ctx)
	if diags.HasErrors() {
		return cty.NilVal, diagsError(diags)
	}
	v, err := convert.Convert(v, want)
	if err != nil {
		return cty.NilVal, fmt.Errorf("%s: %w", x.e.Range(), err)
	}
	if !v.IsWhollyKnown() || v.IsNull() {
		return cty.NilVal, fmt.Errorf("%s: value is null or unknown", x.e.Range())
	}
	return v, nil
}

// String is an expression of type string.
type String struct{ expr }

func (s String) Eval(ev Event) (string, error) {
	if !s.IsSet() {
		return "", nil
	}
	v, err := s.eval(ev, cty.String)
	if err != nil {
		return "", err
	}
	return v.AsString(), nil
}

// StringList is an expression of type list(string).
type StringList struct{ expr }

func (s StringList) Eval(ev Event) ([]string, error) {
	if !s.IsSet() {
		return nil, nil
	}
	v, err := s.eval(ev, cty.List(cty.String))
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() {
			return nil, fmt.Errorf("%s: list element is null", s.e.Range())
		}
		out = append(out, e.AsString())
	}
	return out, nil
}

// StringMap is an expression of type map(string).
type StringMap struct{ expr }

func (s StringMap) Eval(ev Event) (map[string]string, error) {
	if !s.IsSet() {
		return nil, nil
	}
	v, err := s.eval(ev, cty.Map(cty.String))
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if e.IsNull() {
			return nil, fmt.Errorf("%s: map value %q is null", s.e.Range(), k.AsString())
		}
		out[k.AsString()] = e.AsString()
	}
	return out, nil
}

// EventType is the cty object type of `event`; check rejects references to
// attributes it does not have.
var EventType = cty.Object(map[string]cty.Type{
	"type":            cty.String,
	"job":             cty.String,
	"node":            cty.String,
	"leader":          cty.String,
	"previous_leader": cty.String,
	"token":           cty.String,
	"time":            cty.String,
	"reason":          cty.String,
	// A task run's fields (on_task_failed, on_task_succeeded); "" for
	// leadership events.
	"slot":       cty.String,
	"started_at": cty.String,
	"ended_at":   cty.String,
	"exit_code":  cty.String,
	"result":     cty.String,
	"why":        cty.String,
	"trigger":    cty.String,
	"output":     cty.String,
})

// Value is the event as the cty object expressions see.
func (e Event) Value() cty.Value {
	t := ""
	if !e.Time.IsZero() {
		t = e.Time.UTC().Format(time.RFC3339)
	}
	v := map[string]cty.Value{
		"type":            cty.StringVal(e.Type),
		"job":             cty.StringVal(e.Job),
		"node":            cty.StringVal(e.Node),
		"leader":          cty.StringVal(e.Leader),
		"previous_leader": cty.StringVal(e.PreviousLeader),
		"token":           cty.StringVal(e.TokenString()),
		"time":            cty.StringVal(t),
		"reason":          cty.StringVal(e.Reason),
	}
	for k, f := range e.Run.Fields() {
		v[k] = cty.StringVal(f)
	}
	return cty.ObjectVal(v)
}

// diagsError turns evaluation diagnostics into an error without source
// snippets (which could carry secrets).
func diagsError(diags hcl.Diagnostics) error {
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			if d.Subject != nil {
				return fmt.Errorf("%s: %s: %s", d.Subject, d.Summary, d.Detail)
			}
			return fmt.Errorf("%s: %s", d.Summary, d.Detail)
		}
	}
	return nil
}
