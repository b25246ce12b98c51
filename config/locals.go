package config

import (
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// decodeLocals gathers the attributes of every locals block (one namespace
// across all files) and evaluates each once, after the locals it refers to.
// A local in a cycle is reported on its line and left unknown, as is one
// that cannot be evaluated, so that what refers to it reports nothing more.
func (l *loader) decodeLocals(blocks []*hcl.Block) hcl.Diagnostics {
	var diags hcl.Diagnostics
	l.localDecls = map[string]*hcl.Attribute{}
	var order []string // declaration order, for stable diagnostics
	for _, b := range blocks {
		attrs, d := b.Body.JustAttributes()
		diags = append(diags, d...)
		names := make([]string, 0, len(attrs))
		for n := range attrs {
			names = append(names, n)
		}
		sort.Slice(names, func(i, k int) bool { return attrs[names[i]].Range.Start.Byte < attrs[names[k]].Range.Start.Byte })
		for _, n := range names {
			a := attrs[n]
			if prev, ok := l.localDecls[n]; ok {
				diags = append(diags, errorf(a.NameRange, "Duplicate local value definition",
					"A local value named %q was already defined at %s. Local value names must be unique across all files.", n, prev.NameRange))
				continue
			}
			l.localDecls[n] = a
			order = append(order, n)
		}
	}

	values := make(map[string]cty.Value, len(order))
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	var stack []string
	inCycle := map[string]bool{}
	var visit func(n string)
	visit = func(n string) {
		switch state[n] {
		case done:
			return
		case visiting:
			// The stack from n's first visit is the cycle.
			i := len(stack) - 1
			for stack[i] != n {
				i--
			}
			cycle := stack[i:]
			for k, m := range cycle {
				if inCycle[m] {
					continue
				}
				inCycle[m] = true
				// The circle from m round to m.
				path := append(append(append([]string(nil), cycle[k:]...), cycle[:k]...), m)
				diags = append(diags, errorf(l.localDecls[m].NameRange, "Cycle in local values",
					"local.%s depends on itself: local.%s. A local value may refer to other locals, but not in a circle.", m, strings.Join(path, " → local.")))
			}
			return
		}
		state[n] = visiting
		stack = append(stack, n)
		a := l.localDecls[n]
		deps := map[string]cty.Value{}
		trs := a.Expr.Variables()
		d, ok := l.checkRefs(trs, scope{locals: true})
		diags = append(diags, d...)
		for _, tr := range trs {
			if name := refName(tr); tr.RootName() == rootLocal && name != "" {
				if _, declared := l.localDecls[name]; declared {
					visit(name)
					if v, ok := values[name]; ok {
						deps[name] = v
					} else {
						deps[name] = cty.DynamicVal // in a cycle with n, which is then not evaluated
					}
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
		if !ok || inCycle[n] {
			values[n] = cty.DynamicVal
			return
		}
		ctx := l.contexts(a.Range.Filename).static.NewChild()
		ctx.Variables = map[string]cty.Value{rootVar: l.varObj, rootLocal: cty.ObjectVal(deps)}
		v, d := a.Expr.Value(ctx)
		diags = append(diags, d...)
		if d.HasErrors() {
			v = cty.DynamicVal
		}
		values[n] = v
	}
	for _, n := range order {
		visit(n)
	}
	l.localObj = cty.ObjectVal(values)
	return diags
}

// refName is the NAME of a reference ROOT.NAME, or "".
func refName(tr hcl.Traversal) string {
	if len(tr) < 2 {
		return ""
	}
	if a, ok := tr[1].(hcl.TraverseAttr); ok {
		return a.Name
	}
	return ""
}
