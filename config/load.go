package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/electd/electd/internal/redact"
	"github.com/electd/electd/providers"
)

// loader holds the state of one Load call: the parsed files (for snippets),
// the evaluation contexts of each file and the reads of the block being
// decoded.
type loader struct {
	opts   Options
	parser *hclparse.Parser
	files  map[string]*hcl.File
	ctxs   map[string]fileCtx
	// read counts the bytes of the files read, against maxTotalSize.
	read int64
	// secrets are every secret value met: those of secret attributes, and
	// the secret parts inside values (as providers declare them, and those
	// of webhook URLs).
	secrets []string
	// rec collects what env() and file() read; each file's static context
	// records into it through a pointer.
	rec readLog

	// The declared variables (with their values) and locals, and the
	// objects var and local that every expression sees.
	vars       map[string]*variableDecl
	localDecls map[string]*hcl.Attribute
	varObj     cty.Value
	localObj   cty.Value
	// inst is the instance of the job block being decoded, nil between
	// job blocks: its contexts have each.
	inst *instance
}

type fileCtx struct {
	static, runtime *hcl.EvalContext
}

var rootSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "agent"},
		{Type: "provider", LabelNames: []string{"type", "name"}},
		{Type: "job", LabelNames: []string{"name"}},
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "locals"},
	},
}

// Options say what Load needs beyond the files.
type Options struct {
	// Types are the provider types by name: providers/registry.Types().
	Types map[string]providers.Type
	// Default is the source of the provider block jobs use when the files
	// declare none: providers/registry.Default.
	Default string
	// NoEnv validates without the environment (`electd check -no-env`):
	// env(NAME) is an unknown string and env(NAME, DEFAULT) is DEFAULT.
	NoEnv bool
	// AllowUnsafeFiles accepts configuration files that a user other than
	// root or the agent's own could change.
	AllowUnsafeFiles bool
	// Vars are the -var and -var-file of the command line, in order. With
	// NoEnv, a variable without a value is unknown, as env() is, and the
	// ELECTD_VAR_* environment is not read.
	Vars []Var

	// canSwitchUser replaces the check of the agent's capabilities for a
	// job's user and group (tests: an agent that cannot switch users).
	canSwitchUser func() error
	// agentIDs replaces this process's uid, gid and supplementary groups,
	// which a job's user and group are compared with (tests: an agent
	// running as another user).
	agentIDs func() (uid, gid uint32, groups []uint32)
}

// Load reads the configuration at paths (files, or directories whose *.hcl
// and *.hcl.json files are read in name order) and merges it into one
// Config. The returned Diagnostics is never nil; when it has errors the
// Config is nil. Load never panics on any input.
func Load(paths []string, opts Options) (cfg *Config, diags *Diagnostics) {
	l := &loader{opts: opts, parser: hclparse.NewParser(), ctxs: map[string]fileCtx{},
		varObj: cty.EmptyObjectVal, localObj: cty.EmptyObjectVal}
	diags = &Diagnostics{}
	defer func() {
		// A bug in decoding must not take the agent down with a stack
		// trace on a configuration typo; report it like any other problem.
		if r := recover(); r != nil {
			cfg = nil
			diags.diags = append(diags.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Internal error",
				Detail:   fmt.Sprintf("electd failed while reading the configuration: %v. Please report this bug.", r),
			})
		}
		// Every diagnostic passes here, whatever found it. Its text is
		// masked with everything Load learnt was secret or read from the
		// environment or a file, even when the configuration is invalid.
		diags.finish(l.redactor())
	}()
	cfg, d := l.load(paths)
	l.files = l.parser.Files()
	diags.files = l.files
	diags.diags = cleanDiags(d)
	if diags.HasErrors() {
		return nil, diags
	}
	return cfg, diags
}

func (l *loader) load(paths []string) (*Config, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	if len(paths) == 0 {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "No configuration given",
			Detail:   "Give at least one configuration file or directory.",
		}}
	}
	var names []string
	for _, p := range paths {
		fs, err := configFiles(p)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Cannot read configuration",
				Detail:   err.Error() + ".",
			})
			continue
		}
		names = append(names, fs...)
	}
	if diags.HasErrors() {
		return nil, diags
	}
	if !l.opts.AllowUnsafeFiles {
		// The variable files of the directories count as configuration:
		// whoever can write one sets what the jobs run.
		diags = append(diags, checkFilePerms(paths, append(names, l.varFiles(paths)...))...)
	}
	if len(names) == 0 {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "No configuration files",
			Detail:   fmt.Sprintf("No *.hcl or *.hcl.json files were found in %s.", strings.Join(paths, ", ")),
		}}
	}
	var files []*hcl.File
	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] {
			continue // the same file given twice is read once
		}
		seen[name] = true
		f, d := l.parseFile(name)
		diags = append(diags, d...)
		if f != nil {
			files = append(files, f)
		}
	}
	// Decoding a file that does not parse reports problems that are only
	// echoes of the syntax error; fix the syntax first.
	if diags.HasErrors() {
		return nil, diags
	}

	var agents, provBlocks, jobs, variables, locals []*hcl.Block
	for _, f := range files {
		content, d := f.Body.Content(rootSchema)
		diags = append(diags, d...)
		for _, b := range content.Blocks {
			switch b.Type {
			case "agent":
				agents = append(agents, b)
			case "provider":
				provBlocks = append(provBlocks, b)
			case "job":
				jobs = append(jobs, b)
			case "variable":
				variables = append(variables, b)
			case "locals":
				locals = append(locals, b)
			}
		}
	}

	// Variables, then locals, which may use them; every block after sees
	// both.
	diags = append(diags, l.decodeVariables(variables)...)
	diags = append(diags, l.assignVariables(paths)...)
	diags = append(diags, l.decodeLocals(locals)...)
	for _, c := range l.ctxs {
		c.setScope(l.varObj, l.localObj)
	}

	cfg := &Config{}
	agentDecl, d := l.decodeAgents(agents)
	diags = append(diags, d...)
	cfg.Agent = agentDecl.Agent

	provs, d := l.decodeProviders(provBlocks)
	diags = append(diags, d...)
	decls, d := l.decodeJobs(jobs)
	diags = append(diags, d...)
	diags = append(diags, resolveProviders(decls, provs, len(provBlocks))...)
	diags = append(diags, checkLimits(agentDecl, decls, provs)...)
	for _, p := range provs {
		cfg.Providers = append(cfg.Providers, p.Provider)
	}
	cfg.Secrets = l.secrets
	cfg.Jobs = make([]Job, 0, len(decls)) // exactly: ten thousand jobs would leave a quarter of the slice unused
	for _, j := range decls {
		cfg.Jobs = append(cfg.Jobs, j.Job)
	}
	return cfg, diags
}

// configFiles lists the configuration files at path: the file itself, or
// the *.hcl and *.hcl.json files of a directory, sorted.
func configFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s: %v", path, pe.Err)
		}
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, unwrapPathErr(err))
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".hcl") || strings.HasSuffix(n, ".hcl.json")) {
			continue
		}
		out = append(out, filepath.Join(path, n))
	}
	sort.Strings(out)
	return out, nil
}

// secret remembers secret values (empty and short ones are not masked:
// package redact drops them).
func (l *loader) secret(v ...string) { l.secrets = append(l.secrets, v...) }

// redactor masks diagnostics: every secret met, and every value env() and
// file() returned, also without the surrounding space trimspace(file(...))
// removes. Values read by a configuration that turned out invalid, or whose
// decoding panicked, are masked all the same.
func (l *loader) redactor() *redact.Set {
	r := redact.New(l.secrets...)
	for _, v := range l.rec.values {
		r.Add(v, strings.TrimSpace(v))
	}
	return r
}

// contexts returns the evaluation contexts of the file a range is in, with
// each in scope while an instance of a job block with for_each is decoded.
func (l *loader) contexts(filename string) fileCtx {
	c, ok := l.ctxs[filename]
	if !ok {
		c.static, c.runtime = evalContexts(filename, &l.rec, l.opts.NoEnv)
		c.setScope(l.varObj, l.localObj)
		l.ctxs[filename] = c
	}
	if l.inst != nil && l.inst.forEach() {
		return l.inst.contexts(filename, c)
	}
	return c
}

// varFiles are the variable files Load reads: the directories' and -var-file's.
func (l *loader) varFiles(paths []string) []string {
	out := autoVarFiles(paths)
	for _, v := range l.opts.Vars {
		if v.File != "" {
			out = append(out, v.File)
		}
	}
	return out
}

// setScope gives both contexts the objects var and local.
func (c fileCtx) setScope(vars, locals cty.Value) {
	scope := map[string]cty.Value{rootVar: vars, rootLocal: locals}
	c.static.Variables, c.runtime.Variables = scope, scope
}

// startReads begins collecting the reads of one block.
func (l *loader) startReads() { l.rec.block = reads{} }

// endReads returns the reads collected since startReads.
func (l *loader) endReads() reads {
	r := l.rec.block
	l.rec.block = nil
	return r
}

// blockSource is the source text of a block, for fingerprints. JSON bodies
// have no single range for a block; their whole file stands in.
func (l *loader) blockSource(b *hcl.Block) []byte {
	f := l.parser.Files()[b.DefRange.Filename]
	if f == nil {
		return nil
	}
	if body, ok := b.Body.(*hclsyntax.Body); ok {
		r := hcl.RangeBetween(b.DefRange, body.SrcRange)
		if r.Start.Byte >= 0 && r.End.Byte <= len(f.Bytes) && r.Start.Byte <= r.End.Byte {
			return f.Bytes[r.Start.Byte:r.End.Byte]
		}
	}
	return f.Bytes
}

// cleanDiags gives function-call failures of env() their own summary, and
// drops the expression and context HCL attaches to evaluation errors: the
// text writer would print the values of the variables involved.
func cleanDiags(diags hcl.Diagnostics) hcl.Diagnostics {
	for _, d := range diags {
		if extra, ok := hcl.DiagnosticExtra[hclsyntax.FunctionCallDiagExtra](d); ok {
			var unset envUnsetError
			if errors.As(extra.FunctionCallError(), &unset) {
				d.Summary = "Environment variable not set"
				d.Detail = fmt.Sprintf("The environment variable %s is not set. Set it, or give env() a default: env(%q, \"...\").", unset.name, unset.name)
			}
		}
		d.Expression = nil
		d.EvalContext = nil
	}
	return diags
}

func errorf(subject hcl.Range, summary, detail string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(detail, args...),
		Subject:  subject.Ptr(),
	}
}
