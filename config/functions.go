package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// reads records the env() and file() values one block read while it was
// decoded, so a job's fingerprint changes when they do.
type reads map[string]string

func (r reads) add(k, v string) {
	if r != nil {
		r[k] = v
	}
}

// unsetMark is what reads records for an unset environment variable.
const unsetMark = "\x00unset"

// readLog is where the static evaluation contexts record the values env()
// and file() return: the reads of the block being decoded (nil between
// blocks), and every value read during the whole Load. Diagnostics mask the
// latter: a function that fails quotes its argument (parseint(env("TOKEN"))
// says it cannot parse the token), and a value read from the environment or
// a file may be a secret that no attribute names. A nil *readLog records
// nothing: the contexts kept for actions (evaluated concurrently by the
// agent long after Load) must not write to shared state.
type readLog struct {
	block  reads
	values []string
}

func (r *readLog) add(k, v string) {
	if r == nil {
		return
	}
	r.block.add(k, v)
	if v != unsetMark {
		r.values = append(r.values, v)
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
// receives the values read, when it is not nil. With noEnv, env() reads no
// environment: a variable without a default is an unknown string, so
// `check -no-env` judges a file the same on any machine.
func functions(dir string, rec *readLog, noEnv bool) map[string]function.Function {
	record := rec.add
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
				if noEnv && len(args) == 2 {
					return args[1], nil
				}
				if noEnv {
					return cty.UnknownVal(cty.String), nil
				}
				if v, ok := os.LookupEnv(name); ok {
					record("env:"+name, v)
					return cty.StringVal(v), nil
				}
				// Record the absence too: setting the variable later
				// changes what the job runs.
				record("env:"+name, unsetMark)
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
				// A FIFO would block and /dev/zero never end: only regular
				// files, bounded like configuration files.
				b, err := readRegular(p, maxFileSize)
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
	// can and try are hcl's own, as Terraform has them: a validation
	// condition such as can(regex("^amqp://", var.queue_url)).
	fns["can"], fns["try"] = tryfunc.CanFunc, tryfunc.TryFunc
	return fns
}

// prefixFunc is Terraform's startswith (suffix false) or endswith.
func prefixFunc(suffix bool) function.Function {
	return function.New(&function.Spec{
		Description: "Whether a string starts (or ends) with another.",
		Params:      []function.Parameter{{Name: "str", Type: cty.String}, {Name: "affix", Type: cty.String}},
		Type:        function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			s, a := args[0].AsString(), args[1].AsString()
			if suffix {
				return cty.BoolVal(strings.HasSuffix(s, a)), nil
			}
			return cty.BoolVal(strings.HasPrefix(s, a)), nil
		},
	})
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
		"indent":          bounded(stdlib.IndentFunc, 0, "spaces"),
		"join":            stdlib.JoinFunc,
		"jsondecode":      stdlib.JSONDecodeFunc,
		"jsonencode":      stdlib.JSONEncodeFunc,
		"keys":            stdlib.KeysFunc,
		"length":          lengthFunc(),
		"log":             stdlib.LogFunc,
		"lookup":          stdlib.LookupFunc,
		"lower":           stdlib.LowerFunc,
		"max":             stdlib.MaxFunc,
		"merge":           stdlib.MergeFunc,
		"min":             stdlib.MinFunc,
		"parseint":        stdlib.ParseIntFunc,
		"pow":             stdlib.PowFunc,
		"range":           boundedRange(),
		"regex":           stdlib.RegexFunc,
		"regexall":        stdlib.RegexAllFunc,
		"replace":         stdlib.ReplaceFunc,
		"reverse":         stdlib.ReverseListFunc,
		"setintersection": stdlib.SetIntersectionFunc,
		"setsubtract":     stdlib.SetSubtractFunc,
		"setunion":        stdlib.SetUnionFunc,
		"signum":          stdlib.SignumFunc,
		"slice":           stdlib.SliceFunc,
		"sort":            stdlib.SortFunc,
		"startswith":      prefixFunc(false),
		"endswith":        prefixFunc(true),
		"split":           stdlib.SplitFunc,
		"strrev":          stdlib.ReverseFunc,
		"substr":          stdlib.SubstrFunc,
		"timeadd":         stdlib.TimeAddFunc,
		"tobool":          stdlib.MakeToFunc(cty.Bool),
		"tolist":          stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"tomap":           stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
		"tonumber":        stdlib.MakeToFunc(cty.Number),
		"toset":           stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tostring":        stdlib.MakeToFunc(cty.String),
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
func evalContexts(filename string, rec *readLog, noEnv bool) (static, runtime *hcl.EvalContext) {
	dir := filepath.Dir(filename)
	static = &hcl.EvalContext{Functions: functions(dir, rec, noEnv)}
	runtime = &hcl.EvalContext{Functions: functions(dir, nil, noEnv)}
	return static, runtime
}

// maxGenerated bounds what one function call may generate: configuration
// needs small lists and indents, and an unbounded one (range(1e9), indent
// by 1e8 spaces) would take the agent's memory while the file is read.
const maxGenerated = 1024

// bounded refuses calls of f whose numeric argument arg exceeds
// maxGenerated.
func bounded(f function.Function, arg int, what string) function.Function {
	return function.New(&function.Spec{
		Description: f.Description(),
		Params:      f.Params(),
		VarParam:    f.VarParam(),
		Type: func(args []cty.Value) (cty.Type, error) {
			if err := checkBound(args[arg], what); err != nil {
				return cty.NilType, err
			}
			return f.ReturnTypeForValues(args)
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) { return f.Call(args) },
	})
}

// boundedRange is range() producing at most maxGenerated numbers.
func boundedRange() function.Function {
	f := stdlib.RangeFunc
	return function.New(&function.Spec{
		Description: f.Description(),
		VarParam:    f.VarParam(),
		Type: func(args []cty.Value) (cty.Type, error) {
			var n [3]float64
			n[2] = 1
			for i, a := range args {
				if i < 3 && a.IsKnown() && !a.IsNull() && a.Type() == cty.Number {
					n[i], _ = a.AsBigFloat().Float64()
				}
			}
			start, limit, step := n[0], n[1], n[2]
			if len(args) == 1 {
				start, limit = 0, n[0]
			}
			if step != 0 && (limit-start)/step > maxGenerated {
				return cty.NilType, fmt.Errorf("range would make more than %d numbers", maxGenerated)
			}
			return f.ReturnTypeForValues(args)
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) { return f.Call(args) },
	})
}

func checkBound(v cty.Value, what string) error {
	if !v.IsKnown() || v.IsNull() || v.Type() != cty.Number {
		return nil
	}
	if n, _ := v.AsBigFloat().Float64(); n > maxGenerated {
		return fmt.Errorf("at most %d %s", maxGenerated, what)
	}
	return nil
}

// lengthFunc is Terraform's length: the number of elements of a
// collection, or of characters of a string (go-cty's takes collections
// only, and length(var.name) > 0 is the validation Terraform users write
// first).
func lengthFunc() function.Function {
	return function.New(&function.Spec{
		Description: "The number of elements of a collection, or of characters of a string.",
		Params: []function.Parameter{{
			Name:             "value",
			Type:             cty.DynamicPseudoType,
			AllowDynamicType: true,
			AllowUnknown:     true,
			AllowMarked:      true,
		}},
		Type: func(args []cty.Value) (cty.Type, error) {
			ty := args[0].Type()
			if ty == cty.String || ty == cty.DynamicPseudoType || ty.IsCollectionType() || ty.IsTupleType() || ty.IsObjectType() {
				return cty.Number, nil
			}
			return cty.NilType, function.NewArgErrorf(0, "argument must be a string, a collection type, or a structural type")
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			v := args[0]
			switch ty := v.Type(); {
			case ty == cty.String:
				return stdlib.Strlen(v)
			case ty.IsObjectType():
				return cty.NumberIntVal(int64(len(ty.AttributeTypes()))), nil
			}
			return stdlib.Length(v)
		},
	})
}
