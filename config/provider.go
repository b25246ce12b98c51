package config

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/electd/electd/providers"
)

// providerDecl is a decoded provider block with what diagnostics and
// fingerprints need.
type providerDecl struct {
	Provider
	DeclRange hcl.Range
	src       []byte
	reads     reads
}

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

func (l *loader) decodeProviders(blocks []*hcl.Block) ([]*providerDecl, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	var out []*providerDecl
	seen := map[string]*providerDecl{}
	declared := len(blocks)
	if declared == 0 && l.opts.Default != "" {
		b, d := l.defaultProviderBlock()
		diags = append(diags, d...)
		if b != nil {
			blocks = []*hcl.Block{b}
		}
	}
	for _, b := range blocks {
		p, d := l.decodeProviderBlock(b)
		diags = append(diags, d...)
		if p == nil {
			continue
		}
		if prev, ok := seen[p.Ref()]; ok {
			diags = append(diags, errorf(hcl.RangeBetween(b.LabelRanges[0], b.LabelRanges[1]), "Duplicate provider",
				"A provider %s was already declared at %s. Each TYPE.NAME must be unique across all files.", p.Ref(), prev.DeclRange))
			continue
		}
		seen[p.Ref()] = p
		out = append(out, p)
	}
	return out, diags
}

// defaultProviderFile names the embedded default provider in diagnostics.
const defaultProviderFile = "<embedded default provider>"

// defaultProviderBlock parses Options.Default: the embedded default is
// decoded as any block the operator writes.
func (l *loader) defaultProviderBlock() (*hcl.Block, hcl.Diagnostics) {
	f, diags := l.parser.ParseHCL([]byte(l.opts.Default), defaultProviderFile)
	if diags.HasErrors() {
		return nil, diags
	}
	content, d := f.Body.Content(rootSchema)
	diags = append(diags, d...)
	for _, b := range content.Blocks {
		if b.Type == "provider" {
			return b, diags
		}
	}
	return nil, diags
}

func (l *loader) providerTypeNames() []string {
	var names []string
	for n := range l.opts.Types {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// sqlDrivers are names a newcomer may give as a provider type that are
// drivers of the type "sql", by the driver they mean.
var sqlDrivers = map[string]string{
	"postgres": "postgres", "postgresql": "postgres", "pg": "postgres",
	"mysql": "mysql", "mariadb": "mysql",
	"sqlite": "sqlite", "sqlite3": "sqlite",
}

// decodeProviderBlock routes the block's body to its provider type, which
// owns its schema and rules; this function only supplies the evaluation
// context and the ranges.
func (l *loader) decodeProviderBlock(block *hcl.Block) (*providerDecl, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	typ, name := block.Labels[0], block.Labels[1]
	t, ok := l.opts.Types[typ]
	if !ok {
		detail := fmt.Sprintf("electd has no provider type %q. The provider types are %s.", typ, quoteList(l.providerTypeNames()))
		if driver, ok := sqlDrivers[strings.ToLower(typ)]; ok {
			if _, sql := l.opts.Types["sql"]; sql {
				detail = fmt.Sprintf("electd has no provider type %q: %s is a driver of the provider type \"sql\". Did you mean provider \"sql\" %q with driver = %q? The provider types are %s.", typ, driver, name, driver, quoteList(l.providerTypeNames()))
			}
		}
		return nil, hcl.Diagnostics{errorf(block.LabelRanges[0], "Unknown provider type", "%s", detail)}
	}
	if !identRe.MatchString(name) {
		diags = append(diags, errorf(block.LabelRanges[1], "Invalid provider name",
			"A provider name must start with a letter or underscore and hold only letters, digits and underscores, so that jobs can refer to it as %s.NAME.", typ))
	}
	l.startReads()
	defer l.endReads()
	ctx := l.contexts(block.DefRange.Filename).static
	// var and local exist at load time, event does not. A bad reference
	// is reported, and evaluated as unknown so that other problems still
	// show.
	if d, ok := l.checkRefs(hcldec.Variables(block.Body, t.Spec), scope{locals: true, what: "Provider arguments are"}); !ok {
		diags = append(diags, d...)
		ctx = ctx.NewChild()
		ctx.Variables = map[string]cty.Value{}
		for _, tr := range hcldec.Variables(block.Body, t.Spec) {
			ctx.Variables[tr.RootName()] = cty.DynamicVal
		}
	}
	val, d := hcldec.Decode(block.Body, t.Spec, ctx)
	diags = append(diags, d...)
	if d.HasErrors() || val.IsNull() || !val.IsKnown() {
		val = cty.UnknownVal(hcldec.ImpliedType(t.Spec))
	}
	content, _, _ := block.Body.PartialContent(hcldec.ImpliedSchema(t.Spec))
	b := &providers.Block{Val: val, Attrs: content.Attributes, DefRange: block.DefRange, Missing: block.Body.MissingItemRange()}
	settings := t.Decode(b)
	b.Check(settings.Validate())
	diags = append(diags, b.Diags...)

	p := &providerDecl{Provider: Provider{Type: typ, Name: name, Settings: settings, values: l.providerValues(block, content.Attributes)}, DeclRange: block.DefRange}
	p.src = l.blockSource(block)
	p.reads = l.rec.block
	if block.DefRange.Filename != defaultProviderFile {
		// The embedded default's file path is electd's, not a secret:
		// masked, errors about the file could not say where it is.
		l.secret(settings.Secrets()...)
	}
	return p, diags
}
