package config

import (
	"fmt"
	"os"
	"path/filepath"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// reads records the env() and file() values one block read while it was
// decoded, so a job's fingerprint changes when they do. A nil *reads records
// nothing: the evaluation contexts kept for actions (evaluated concurrently
// by the agent long after Load) must not write to shared state.
type reads map[string]string

func (r reads) add(k, v string) {
	if r != nil {
		r[k] = v
	}
}

// envUnsetError is returned by env(name) for an unset variable; Load turns
// the generic "Error in function call" diagnostic into a specific one.
type envUnsetError struct{ name string }

func (e envUnsetError) Error() string {
	return fmt.Sprintf("environment variable %s is not set", e.name)
}

// functions are the functions available in every expression. dir is the
// directory of the file being evaluated (file() is relative to it); rec
// receives the values read, when it is not nil. It is called through a
// pointer so the loader can point it at the block being decoded.
func functions(dir string, rec *reads) map[string]function.Function {
	record := func(k, v string) {
		if rec != nil {
			rec.add(k, v)
		}
	}
	fns := map[string]function.Function{
		"env": function.New(&function.Spec{
			Description: "The value of an environment variable, or the default when unset.",
			Params:      []function.Parameter{{Name: "name", Type: cty.String}},
			VarParam:    &function.Parameter{Name: "default", Type: cty.String},
			Type: func(args []cty.Value) (cty.Type, error) {
				if len(args) > 2 {
					return cty.NilType, fmt.Errorf("env takes a name and an optional default, not %d arguments", len(args))
				}
				return cty.String, nil
			},
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				name := args[0].AsString()
				if v, ok := os.LookupEnv(name); ok {
					record("env:"+name, v)
					return cty.StringVal(v), nil
				}
				// Record the absence too: setting the variable later
				// changes what the job runs.
				record("env:"+name, "\x00unset")
				if len(args) == 2 {
					return args[1], nil
				}
				return cty.NilVal, envUnsetError{name}
			},
		}),
		"file": function.New(&function.Spec{
			Description: "The contents of a file, relative to the configuration file that calls it.",
			Params:      []function.Parameter{{Name: "path", Type: cty.String}},
			Type:        function.StaticReturnType(cty.String),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				p := args[0].AsString()
				if !filepath.IsAbs(p) {
					p = filepath.Join(dir, p)
				}
				b, err := os.ReadFile(p)
				if err != nil {
					// The path is not secret; the contents may be, and are never printed.
					return cty.NilVal, fmt.Errorf("cannot read %s: %v", p, unwrapPathErr(err))
				}
				if !utf8.Valid(b) {
					return cty.NilVal, fmt.Errorf("%s is not valid UTF-8 text", p)
				}
				record("file:"+p, string(b))
				return cty.StringVal(string(b)), nil
			},
		}),
	}
	for name, f := range stdlibFunctions() {
		fns[name] = f
	}
	return fns
}

func unwrapPathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// stdlibFunctions are go-cty's standard functions under the names Terraform
// users know.
func stdlibFunctions() map[string]function.Function {
	return map[string]function.Function{
		"abs":             stdlib.AbsoluteFunc,
		"ceil":            stdlib.CeilFunc,
		"chomp":           stdlib.ChompFunc,
		"chunklist":       stdlib.ChunklistFunc,
		"coalesce":        stdlib.CoalesceFunc,
		"coalescelist":    stdlib.CoalesceListFunc,
		"compact":         stdlib.CompactFunc,
		"concat":          stdlib.ConcatFunc,
		"contains":        stdlib.ContainsFunc,
		"csvdecode":       stdlib.CSVDecodeFunc,
		"distinct":        stdlib.DistinctFunc,
		"element":         stdlib.ElementFunc,
		"flatten":         stdlib.FlattenFunc,
		"floor":           stdlib.FloorFunc,
		"format":          stdlib.FormatFunc,
		"formatdate":      stdlib.FormatDateFunc,
		"formatlist":      stdlib.FormatListFunc,
		"indent":          stdlib.IndentFunc,
		"join":            stdlib.JoinFunc,
		"jsondecode":      stdlib.JSONDecodeFunc,
		"jsonencode":      stdlib.JSONEncodeFunc,
		"keys":            stdlib.KeysFunc,
		"length":          stdlib.LengthFunc,
		"log":             stdlib.LogFunc,
		"lookup":          stdlib.LookupFunc,
		"lower":           stdlib.LowerFunc,
		"max":             stdlib.MaxFunc,
		"merge":           stdlib.MergeFunc,
		"min":             stdlib.MinFunc,
		"parseint":        stdlib.ParseIntFunc,
		"pow":             stdlib.PowFunc,
		"range":           stdlib.RangeFunc,
		"regex":           stdlib.RegexFunc,
		"regexall":        stdlib.RegexAllFunc,
		"replace":         stdlib.ReplaceFunc,
		"reverse":         stdlib.ReverseListFunc,
		"setintersection": stdlib.SetIntersectionFunc,
		"setproduct":      stdlib.SetProductFunc,
		"setsubtract":     stdlib.SetSubtractFunc,
		"setunion":        stdlib.SetUnionFunc,
		"signum":          stdlib.SignumFunc,
		"slice":           stdlib.SliceFunc,
		"sort":            stdlib.SortFunc,
		"split":           stdlib.SplitFunc,
		"strrev":          stdlib.ReverseFunc,
		"substr":          stdlib.SubstrFunc,
		"timeadd":         stdlib.TimeAddFunc,
		"title":           stdlib.TitleFunc,
		"trim":            stdlib.TrimFunc,
		"trimprefix":      stdlib.TrimPrefixFunc,
		"trimspace":       stdlib.TrimSpaceFunc,
		"trimsuffix":      stdlib.TrimSuffixFunc,
		"upper":           stdlib.UpperFunc,
		"values":          stdlib.ValuesFunc,
		"zipmap":          stdlib.ZipmapFunc,
	}
}

// evalContexts are the two contexts of one file: static for everything
// evaluated at load time (records reads), runtime for the expressions kept
// for actions (records nothing).
func evalContexts(filename string, rec *reads) (static, runtime *hcl.EvalContext) {
	dir := filepath.Dir(filename)
	static = &hcl.EvalContext{Functions: functions(dir, rec)}
	runtime = &hcl.EvalContext{Functions: functions(dir, nil)}
	return static, runtime
}
