package config

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"slices"
	"sort"
	"strings"
	"unique"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// A reload restarts a job whose fingerprint changed (job.go). To say why
// (`electd plan`), each job and provider also keeps a hash of every
// attribute's value, by path: "ttl", "run.command",
// "on_elected.exec[1].url". Hashes, not values: some are secrets, and only
// whether they differ is ever shown.

// attrValues are the hashed values of a block's attributes and of the
// blocks inside it, sorted by path. A job keeps them for its life: a slice
// of interned paths costs little beside ten thousand jobs.
type attrValues []attrValue

type attrValue struct {
	path string
	sum  uint64
}

func (v *attrValues) add(path string, sum uint64) {
	*v = append(*v, attrValue{unique.Make(path).Value(), sum})
}

func (v attrValues) sorted() attrValues {
	slices.SortFunc(v, func(a, b attrValue) int { return strings.Compare(a.path, b.path) })
	return slices.Clip(v)
}

// blockShape is the schema of a block and the shapes of the blocks it may
// hold, by type. Indexed blocks may repeat and are told apart by position.
type blockShape struct {
	schema  *hcl.BodySchema
	blocks  map[string]*blockShape
	indexed bool
}

var hookShape = &blockShape{schema: hookSchema, indexed: true, blocks: map[string]*blockShape{
	ActionExec:    {schema: execSchema},
	ActionWebhook: {schema: webhookSchema},
}}

var jobShape = &blockShape{schema: jobSchema, blocks: map[string]*blockShape{
	"run":             {schema: runSchema},
	"task":            {schema: taskSchema},
	"health":          {schema: healthSchema},
	hookElected:       hookShape,
	hookDemoted:       hookShape,
	hookLeaderChange:  hookShape,
	hookTaskFailed:    hookShape,
	hookTaskSucceeded: hookShape,
}}

// jobValues hashes the attributes of a job block. It runs after the block
// was decoded (its problems are reported there) and evaluates each
// attribute again, with `event` unknown.
func (l *loader) jobValues(block *hcl.Block) attrValues {
	var out attrValues
	l.blockValues(&out, "", block.Body, jobShape, l.contexts(block.DefRange.Filename))
	return out.sorted()
}

func (l *loader) blockValues(out *attrValues, prefix string, body hcl.Body, shape *blockShape, ctx fileCtx) {
	content, _, _ := body.PartialContent(shape.schema)
	for name, a := range content.Attributes {
		if prefix == "" && name == forEachAttr {
			continue // the set of instances, not what one of them runs
		}
		out.add(prefix+name, l.attrValue(a, ctx))
	}
	seen := map[string]int{}
	for _, b := range content.Blocks {
		path := prefix + b.Type
		if shape.indexed {
			path = fmt.Sprintf("%s[%d]", path, seen[b.Type])
			seen[b.Type]++
		}
		// The block itself, so that adding or removing one shows as one
		// change rather than as each of its attributes.
		if inner, ok := shape.blocks[b.Type]; ok {
			out.add(path, 0)
			l.blockValues(out, path+".", b.Body, inner, ctx)
		} else {
			// A block this file does not know the shape of: its text.
			out.add(path, sum(func(h hash.Hash) { h.Write(l.blockSource(b)) }))
		}
	}
}

// attrValue hashes what an attribute evaluates to, when that is known now,
// or else (it depends on the event) its tokens without layout and comments;
// and the env() and file() values it read, which the fingerprint counts
// even when the value is the same (a variable set to env()'s default).
func (l *loader) attrValue(a *hcl.Attribute, ctx fileCtx) uint64 {
	ectx := ctx.static.NewChild()
	ectx.Variables = map[string]cty.Value{"event": cty.UnknownVal(EventType)}
	outer := l.rec.block
	l.rec.block = reads{}
	v, diags := a.Expr.Value(ectx)
	read := l.rec.block
	l.rec.block = outer
	return sum(func(h hash.Hash) {
		if !diags.HasErrors() && v.IsWhollyKnown() {
			fmt.Fprintf(h, "value:%#v", v)
		} else {
			h.Write([]byte("expr:"))
			l.writeTokens(h, a.Expr)
			// The tokens of var.url are the same whatever its value;
			// the values referred to are not.
			for _, tr := range a.Expr.Variables() {
				switch tr.RootName() {
				case rootVar, rootLocal, rootEach:
					if len(tr) > 1 {
						if rv, d := tr[:2].TraverseAbs(ectx); !d.HasErrors() {
							fmt.Fprintf(h, "\x00ref:%#v", rv)
						}
					}
				}
			}
		}
		keys := make([]string, 0, len(read))
		for k := range read {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(h, "\x00%d:%s%d:%s", len(k), k, len(read[k]), read[k])
		}
	})
}

// writeTokens writes an expression's tokens without newlines and comments,
// so that `electd fmt` does not change what it writes. A JSON expression
// is written as it is.
func (l *loader) writeTokens(h hash.Hash, e hcl.Expression) {
	r := e.Range()
	f := l.parser.Files()[r.Filename]
	if f == nil || r.Start.Byte < 0 || r.End.Byte > len(f.Bytes) || r.Start.Byte > r.End.Byte {
		return
	}
	src := f.Bytes[r.Start.Byte:r.End.Byte]
	if _, native := e.(hclsyntax.Expression); !native {
		h.Write(src)
		return
	}
	toks, _ := hclsyntax.LexExpression(src, r.Filename, r.Start)
	for _, t := range toks {
		switch t.Type {
		case hclsyntax.TokenNewline, hclsyntax.TokenComment, hclsyntax.TokenEOF:
			continue
		}
		fmt.Fprintf(h, "%d:%d:", t.Type, len(t.Bytes))
		h.Write(t.Bytes)
	}
}

// providerValues hashes the attributes of a provider block.
func (l *loader) providerValues(block *hcl.Block, attrs hcl.Attributes) attrValues {
	var out attrValues
	ctx := l.contexts(block.DefRange.Filename)
	for name, a := range attrs {
		out.add(name, l.attrValue(a, ctx))
	}
	return out.sorted()
}

func sum(write func(hash.Hash)) uint64 {
	h := sha256.New()
	write(h)
	return binary.BigEndian.Uint64(h.Sum(nil))
}

// changed lists the paths whose values differ between a and b, sorted. A
// path inside a block that was added or removed is not listed: the block is.
func (a attrValues) changed(b attrValues) []string {
	var out []string
	for i, k := 0, 0; i < len(a) || k < len(b); {
		switch {
		case k == len(b) || i < len(a) && a[i].path < b[k].path:
			out = append(out, a[i].path)
			i++
		case i == len(a) || b[k].path < a[i].path:
			out = append(out, b[k].path)
			k++
		default:
			if a[i].sum != b[k].sum {
				out = append(out, a[i].path)
			}
			i, k = i+1, k+1
		}
	}
	// Sorted, a block comes before what is inside it ("run" < "run.command").
	var kept []string
	for _, p := range out {
		if n := len(kept); n > 0 && strings.HasPrefix(p, kept[n-1]+".") {
			continue
		}
		kept = append(kept, p)
	}
	return kept
}

// ChangedAttributes names the attributes of a job whose values differ
// between two loads, as paths: "ttl", "run.command",
// "on_demoted.webhook[0].url"; a block added or removed is named alone
// ("health"). It says nothing of the values, which may be secrets. It may be
// empty while the fingerprints differ: the fingerprint counts the block's
// text, so a change of comments or layout restarts the job too.
func ChangedAttributes(old, new Job) []string { return old.values.changed(new.values) }

// ChangedSettings names the attributes of a provider block whose values
// differ between two loads ("dsn", "table"), never the values.
func ChangedSettings(old, new Provider) []string { return old.values.changed(new.values) }
