package config

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// A job block with for_each is a job per element of a map or a set of
// strings: each an instance with a name of its own, its block's label, a
// dot and the element's key ("consumer.3", "consumer.eu"). The name is the
// lease key, the name in the API, in metrics labels, in status and history,
// and what a reload compares: an instance whose key stays keeps its
// leader. A dot, rather than Terraform's consumer["eu"], keeps the name
// within the characters of every job name, which every store takes as a
// key and NATS as a subject token (brackets and quotes are not).

const forEachAttr = "for_each"

// InstanceSeparator joins a job block's label and an instance's key.
const InstanceSeparator = "."

var forEachSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: forEachAttr}}}

// instanceKeyRe is what a for_each key may hold: the label before it is a
// valid job name, so the whole name is one.
var instanceKeyRe = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// instance is one job of a job block: the block itself (each is NilVal),
// or one element of its for_each.
type instance struct {
	name string
	key  string
	each cty.Value // the each object: key and value
	// unknown: the for_each is not known now (`check -no-env`); the block
	// is checked once, with each.key and each.value unknown.
	unknown bool
	ctxs    map[string]fileCtx
}

func (in *instance) forEach() bool { return in.each != cty.NilVal }

// contexts are the file's contexts with each in scope.
func (in *instance) contexts(filename string, file fileCtx) fileCtx {
	if c, ok := in.ctxs[filename]; ok {
		return c
	}
	vars := map[string]cty.Value{rootEach: in.each}
	c := fileCtx{static: file.static.NewChild(), runtime: file.runtime.NewChild()}
	c.static.Variables, c.runtime.Variables = vars, vars
	if in.ctxs == nil {
		in.ctxs = map[string]fileCtx{}
	}
	in.ctxs[filename] = c
	return c
}

// expandJob lists the instances of a job block: one, named by its label,
// without for_each; one per element with it.
func (l *loader) expandJob(block *hcl.Block) ([]*instance, hcl.Diagnostics) {
	label := block.Labels[0]
	content, _, _ := block.Body.PartialContent(forEachSchema)
	a, ok := content.Attributes[forEachAttr]
	if !ok {
		return []*instance{{name: label}}, nil
	}
	diags, ok := l.checkRefs(a.Expr.Variables(), scope{locals: true, what: `The "for_each" argument is`})
	if !ok {
		return nil, diags
	}
	v, diags := a.Expr.Value(l.contexts(a.Expr.Range().Filename).static)
	if diags.HasErrors() {
		return nil, diags
	}
	invalid := func(detail string, args ...any) ([]*instance, hcl.Diagnostics) {
		return nil, hcl.Diagnostics{errorf(a.Expr.Range(), "Invalid for_each argument", detail, args...)}
	}
	ty := v.Type()
	switch {
	case v.IsNull():
		return invalid("The for_each value is null. Give a map, or a set of strings such as toset([\"eu\", \"us\"]).")
	case ty.IsListType() || ty.IsTupleType():
		return invalid("The for_each value is a %s; give a map, or a set of strings: toset(...) turns a list into a set, such as toset(range(16)).", ty.FriendlyName())
	case !(ty.IsMapType() || ty.IsObjectType() || ty.IsSetType() || ty == cty.DynamicPseudoType):
		return invalid("The for_each value is a %s; give a map, or a set of strings such as toset([\"eu\", \"us\"]).", ty.FriendlyName())
	}
	if !v.IsWhollyKnown() {
		// Only without the environment: elsewhere, what made it unknown
		// was reported where it came from.
		var diags hcl.Diagnostics
		if l.opts.NoEnv {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "Instances not known",
				Detail:   "The for_each value depends on a variable or env() that check -no-env does not read, so the block was checked once, with each.key and each.value unknown, and the names of its instances were not checked. Give the values with -var or -var-file to check each instance.",
				Subject:  a.Expr.Range().Ptr(),
			})
		}
		each := cty.ObjectVal(map[string]cty.Value{"key": cty.UnknownVal(cty.String), "value": cty.DynamicVal})
		return []*instance{{name: label, each: each, unknown: true}}, diags
	}
	if ty.IsSetType() {
		s, err := convert.Convert(v, cty.Set(cty.String))
		if err != nil {
			return invalid("The for_each set must hold strings (or numbers, taken as strings), not %s.", ty.ElementType().FriendlyName())
		}
		v = s
	}
	// A key is a job's name, which the log, the API and the metrics show:
	// the value of a sensitive variable cannot be one, as in Terraform.
	secret := map[string]bool{}
	for _, s := range l.secrets {
		secret[s] = true
	}
	var insts []*instance
	var bad []string
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if ty.IsSetType() {
			if e.IsNull() {
				return invalid("The for_each set holds a null; each element must be a string.")
			}
			k = e
		}
		key := k.AsString()
		if secret[key] {
			return invalid("A for_each key is the value of a sensitive variable or another secret. Keys are parts of job names, which the log, the API and the metrics show; use a variable that is not sensitive.")
		}
		if !instanceKeyRe.MatchString(key) {
			bad = append(bad, strconv.Quote(key))
			continue
		}
		each := cty.ObjectVal(map[string]cty.Value{"key": k, "value": e})
		insts = append(insts, &instance{name: label + InstanceSeparator + key, key: key, each: each})
	}
	if len(bad) > 0 {
		return invalid("The for_each key %s cannot be part of a job name. An instance of job %q is named %s%sKEY, its lease key in every store, so a key holds only letters, digits, \"_\", \".\" and \"-\", such as \"eu-west\" or \"3\".",
			listSome(bad, 3), label, label, InstanceSeparator)
	}
	sort.SliceStable(insts, func(i, k int) bool { return naturalLess(insts[i].key, insts[k].key) })
	return insts, nil
}

// naturalLess orders keys that are whole numbers by value ("2" before
// "10"), before the others, which are in byte order: shard 10 is listed
// after shard 9.
func naturalLess(a, b string) bool {
	na, ea := strconv.ParseUint(a, 10, 64)
	nb, eb := strconv.ParseUint(b, 10, 64)
	switch {
	case ea == nil && eb == nil:
		return na < nb
	case ea == nil:
		return true
	case eb == nil:
		return false
	}
	return a < b
}

// listSome is "a, b, c and 4 more".
func listSome(xs []string, n int) string {
	if len(xs) <= n {
		if len(xs) == 1 {
			return xs[0]
		}
		return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
	}
	return fmt.Sprintf("%s and %d more", strings.Join(xs[:n], ", "), len(xs)-n)
}

// mergeInstanceDiags reports a problem that the instances of one block
// share once, not once per instance: the same summary and detail on the
// same range. One that only some instances have says which.
func mergeInstanceDiags(insts []*instance, per []hcl.Diagnostics) hcl.Diagnostics {
	if len(insts) <= 1 {
		var out hcl.Diagnostics
		for _, d := range per {
			out = append(out, d...)
		}
		return out
	}
	type group struct {
		d     *hcl.Diagnostic
		names []string
	}
	var order []string
	groups := map[string]*group{}
	for i, ds := range per {
		for _, d := range ds {
			key := fmt.Sprintf("%d\x00%s\x00%s\x00%v", d.Severity, d.Summary, d.Detail, d.Subject)
			g, ok := groups[key]
			if !ok {
				g = &group{d: d}
				groups[key] = g
				order = append(order, key)
			}
			if n := len(g.names); n == 0 || g.names[n-1] != insts[i].name {
				g.names = append(g.names, insts[i].name)
			}
		}
	}
	var out hcl.Diagnostics
	for _, key := range order {
		g := groups[key]
		d := *g.d
		if len(g.names) < len(insts) {
			which := "instance " + g.names[0]
			if len(g.names) > 1 {
				which = "instances " + listSome(g.names, 3)
			}
			d.Detail = strings.TrimSpace(d.Detail) + " Seen in " + which + "."
		}
		out = append(out, &d)
	}
	return out
}

// withoutForEach is a job block's source without its for_each argument,
// for the fingerprint of its instances: growing or shrinking the set
// changes the argument, not the instances that stay.
func withoutForEach(src []byte, block *hcl.Block) []byte {
	body, ok := block.Body.(*hclsyntax.Body)
	if !ok {
		return src
	}
	a, ok := body.Attributes[forEachAttr]
	if !ok {
		return src
	}
	start := hcl.RangeBetween(block.DefRange, body.SrcRange).Start.Byte
	from, to := a.SrcRange.Start.Byte-start, a.SrcRange.End.Byte-start
	if from < 0 || to > len(src) || from > to {
		return src
	}
	out := append([]byte(nil), src[:from]...)
	return append(out, src[to:]...)
}
