package config

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Input variables are declared as Terraform declares them and set, from the
// lowest precedence to the highest, by their default, the environment
// (ELECTD_VAR_NAME), the *.auto.electdvars files of the configuration
// directories (in name order) and the command line's -var and -var-file (in
// the order given).

// EnvVarPrefix starts the environment variables that set input variables:
// ELECTD_VAR_queue_url sets var.queue_url.
const EnvVarPrefix = "ELECTD_VAR_"

// Suffixes of the variable files read from each configuration directory.
const (
	AutoVarsSuffix     = ".auto.electdvars"
	AutoVarsJSONSuffix = ".auto.electdvars.json"
)

// Var is one -var NAME=VALUE or one -var-file PATH of a command line. Load
// applies them in order: a later one wins.
type Var struct {
	Name  string `json:"name,omitempty"`
	Value string `json:"value,omitempty"`
	// File is a -var-file: NAME = VALUE lines in HCL, or a JSON object
	// when the name ends in .json.
	File string `json:"file,omitempty"`
}

// ParseVar parses the argument of -var, NAME=VALUE. Its error does not
// quote the argument: the value may be a secret.
func ParseVar(arg string) (Var, error) {
	name, value, ok := strings.Cut(arg, "=")
	switch {
	case !ok:
		return Var{}, fmt.Errorf("the argument must be NAME=VALUE")
	case !identRe.MatchString(name):
		return Var{}, fmt.Errorf("%q is not a variable name: it starts with a letter or underscore and holds letters, digits and underscores", name)
	}
	return Var{Name: name, Value: value}, nil
}

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "type"},
		{Name: "default"},
		{Name: "description"},
		{Name: "sensitive"},
		{Name: "nullable"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "validation"}},
}

var validationSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "condition", Required: true},
		{Name: "error_message", Required: true},
	},
}

// variableDecl is a decoded variable block.
type variableDecl struct {
	Name        string
	DeclRange   hcl.Range
	Type        cty.Type // cty.DynamicPseudoType without a type argument
	defaults    *typeexpr.Defaults
	Default     cty.Value // cty.NilVal without a default
	Description string
	Sensitive   bool
	// Nullable false: the value is never null; a null given is replaced
	// by the default, or refused without one.
	Nullable    bool
	validations []validation
	// hclMode: a value from the command line or the environment is an
	// HCL expression (the type is given and not a string, number or
	// bool), as in Terraform; otherwise it is taken as it is.
	hclMode bool

	// The value chosen, where it came from ("the default", "-var", a
	// file's name) and its range in a file (nil from the command line or
	// the environment).
	value  cty.Value
	source string
	origin *hcl.Range
	// failed: a type, default or value was refused, and said so; the
	// variable is unknown rather than reported again as missing.
	failed bool
}

type validation struct {
	condition, message hcl.Expression
}

func (l *loader) decodeVariables(blocks []*hcl.Block) hcl.Diagnostics {
	var diags hcl.Diagnostics
	l.vars = map[string]*variableDecl{}
	for _, b := range blocks {
		v, d := l.decodeVariableBlock(b)
		diags = append(diags, d...)
		if v == nil {
			continue
		}
		if prev, ok := l.vars[v.Name]; ok {
			diags = append(diags, errorf(b.LabelRanges[0], "Duplicate variable declaration",
				"A variable named %q was already declared at %s. Variable names must be unique across all files.", v.Name, prev.DeclRange))
			continue
		}
		l.vars[v.Name] = v
	}
	return diags
}

func (l *loader) decodeVariableBlock(block *hcl.Block) (*variableDecl, hcl.Diagnostics) {
	content, diags := block.Body.Content(variableSchema)
	name := block.Labels[0]
	if !identRe.MatchString(name) {
		return nil, append(diags, errorf(block.LabelRanges[0], "Invalid variable name",
			"A variable name must start with a letter or underscore and hold only letters, digits and underscores, so that expressions can refer to it as var.NAME."))
	}
	v := &variableDecl{Name: name, DeclRange: hcl.RangeBetween(block.DefRange, block.LabelRanges[0]), Type: cty.DynamicPseudoType, Nullable: true}
	if a, ok := content.Attributes["type"]; ok {
		ty, defaults, d := typeexpr.TypeConstraintWithDefaults(a.Expr)
		diags = append(diags, d...)
		if !d.HasErrors() {
			v.Type, v.defaults = ty, defaults
			v.hclMode = !ty.IsPrimitiveType()
		}
		v.failed = d.HasErrors()
	}
	if a, ok := content.Attributes["nullable"]; ok {
		n, d := literalValue(a, cty.Bool)
		diags = append(diags, d...)
		v.Nullable = !n.IsKnown() || n.IsNull() || n.True()
	}
	if a, ok := content.Attributes["description"]; ok {
		desc, d := literalValue(a, cty.String)
		diags = append(diags, d...)
		if desc.IsKnown() {
			v.Description = desc.AsString()
		}
	}
	if a, ok := content.Attributes["sensitive"]; ok {
		s, d := literalValue(a, cty.Bool)
		diags = append(diags, d...)
		v.Sensitive = s.IsKnown() && !s.IsNull() && s.True()
	}
	if a, ok := content.Attributes["default"]; ok {
		// A default is a literal: it is read before anything it could
		// refer to exists, as in Terraform.
		val, d := a.Expr.Value(nil)
		diags = append(diags, d...)
		v.failed = v.failed || d.HasErrors()
		if !d.HasErrors() && !v.failed {
			conv, err := v.convert(val)
			switch {
			case err != nil:
				v.failed = true
				diags = append(diags, errorf(a.Expr.Range(), "Invalid default value for variable",
					"This default value does not fit the variable's type %s: %s.", typeexpr.TypeString(v.Type), err))
			case conv.IsNull() && !v.Nullable:
				v.failed = true
				diags = append(diags, errorf(a.Expr.Range(), "Invalid default value for variable",
					"A null default value is not valid when nullable = false. Give a default other than null, or remove the default to make the variable required."))
			default:
				v.Default, v.value, v.source, v.origin = conv, conv, "its default", a.Expr.Range().Ptr()
			}
		}
	}
	for _, sub := range content.Blocks {
		vc, d := sub.Body.Content(validationSchema)
		diags = append(diags, d...)
		c, okc := vc.Attributes["condition"]
		m, okm := vc.Attributes["error_message"]
		if okc && okm {
			v.validations = append(v.validations, validation{condition: c.Expr, message: m.Expr})
		}
	}
	return v, diags
}

// literalValue evaluates an attribute that may hold no reference and no
// function call, and converts it to want.
func literalValue(a *hcl.Attribute, want cty.Type) (cty.Value, hcl.Diagnostics) {
	val, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		return cty.UnknownVal(want), diags
	}
	conv, err := convert.Convert(val, want)
	if err != nil || conv.IsNull() {
		return cty.UnknownVal(want), hcl.Diagnostics{errorf(a.Expr.Range(), "Incorrect attribute value type",
			"The %q argument must be a %s.", a.Name, want.FriendlyName())}
	}
	return conv, nil
}

// convert applies the optional attributes' defaults of the type, and the
// type.
func (v *variableDecl) convert(val cty.Value) (cty.Value, error) {
	if v.defaults != nil {
		val = v.defaults.Apply(val)
	}
	return convert.Convert(val, v.Type)
}

// assignVariables gives every declared variable its value, by precedence,
// and checks its validations. A variable left without a value is an error,
// except without the environment (`check -no-env`), where it is unknown
// like an unset env(): what depends on it is not checked.
func (l *loader) assignVariables(paths []string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if !l.opts.NoEnv {
		for _, v := range l.sortedVars() {
			if raw, ok := os.LookupEnv(EnvVarPrefix + v.Name); ok {
				diags = append(diags, l.setRaw(v, raw, "the environment variable "+EnvVarPrefix+v.Name)...)
			}
		}
	}
	for _, f := range autoVarFiles(paths) {
		diags = append(diags, l.readVarFile(f)...)
	}
	for _, cv := range l.opts.Vars {
		if cv.File != "" {
			diags = append(diags, l.readVarFile(cv.File)...)
			continue
		}
		v, ok := l.vars[cv.Name]
		if !ok {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Value for undeclared variable",
				Detail:   fmt.Sprintf("The command line sets var.%s with -var, but no variable %q is declared. Declare it with a variable %q {} block, or remove the -var.", cv.Name, cv.Name, cv.Name),
			})
			continue
		}
		diags = append(diags, l.setRaw(v, cv.Value, "-var")...)
	}
	for _, v := range l.sortedVars() {
		if v.failed {
			v.value = cty.UnknownVal(v.Type)
		}
		if v.value == cty.NilVal {
			v.value = cty.UnknownVal(v.Type)
			if !l.opts.NoEnv {
				diags = append(diags, errorf(v.DeclRange, "No value for required variable",
					"The variable %q has no default and no value was given. Set it with -var %s=VALUE, in a -var-file or a *%s file of the configuration directory, or with the environment variable %s%s.",
					v.Name, v.Name, AutoVarsSuffix, EnvVarPrefix, v.Name))
			}
		}
		if v.Sensitive {
			l.secret(leaves(v.value)...)
		}
	}
	obj := map[string]cty.Value{}
	for name, v := range l.vars {
		obj[name] = v.value
	}
	l.varObj = cty.ObjectVal(obj)
	for _, v := range l.sortedVars() {
		diags = append(diags, l.validate(v)...)
	}
	return diags
}

func (l *loader) sortedVars() []*variableDecl {
	out := make([]*variableDecl, 0, len(l.vars))
	for _, v := range l.vars {
		out = append(out, v)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Name < out[k].Name })
	return out
}

// setRaw sets a variable from a string of the command line or the
// environment: taken as it is for a variable of a primitive type or
// without a type, as Terraform does, and parsed as an HCL expression (a
// list, a map) for the others, any included.
func (l *loader) setRaw(v *variableDecl, raw, source string) hcl.Diagnostics {
	val := cty.StringVal(raw)
	if v.hclMode {
		expr, diags := hclsyntax.ParseExpression([]byte(raw), source, hcl.InitialPos)
		if !diags.HasErrors() {
			val, diags = expr.Value(nil)
		}
		if diags.HasErrors() {
			// The value is not quoted: it may be a secret.
			v.failed = true
			return hcl.Diagnostics{errorf(v.DeclRange, "Invalid value for input variable",
				"The value %s gives var.%s is not a valid expression of its type %s: %s.", source, v.Name, typeexpr.TypeString(v.Type), strings.TrimSuffix(diags[0].Summary, "."))}
		}
	}
	return l.set(v, val, source, nil)
}

func (l *loader) set(v *variableDecl, val cty.Value, source string, origin *hcl.Range) hcl.Diagnostics {
	conv, err := v.convert(val)
	if err != nil {
		v.failed = true
		subject := v.DeclRange
		if origin != nil {
			subject = *origin
		}
		return hcl.Diagnostics{errorf(subject, "Invalid value for input variable",
			"The value %s gives var.%s does not fit its type %s: %s.", source, v.Name, typeexpr.TypeString(v.Type), err)}
	}
	if conv.IsNull() && !v.Nullable {
		if v.Default == cty.NilVal {
			v.failed = true
			subject := v.DeclRange
			if origin != nil {
				subject = *origin
			}
			return hcl.Diagnostics{errorf(subject, "Required variable not set",
				"%s sets var.%s to null, and the variable is declared with nullable = false and no default. Give it a value other than null.", capitalize(source), v.Name)}
		}
		// As Terraform does: a null for a variable that cannot be null
		// means its default.
		conv, source, origin = v.Default, "its default", nil
	}
	v.value, v.source, v.origin, v.failed = conv, source, origin, false
	return nil
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// autoVarFiles are the *.auto.electdvars(.json) files of the directories
// among paths, each directory's in name order.
func autoVarFiles(paths []string) []string {
	var out []string
	for _, p := range paths {
		if info, err := os.Stat(p); err != nil || !info.IsDir() {
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			continue // configFiles reported it
		}
		for _, e := range entries {
			n := e.Name()
			if !e.IsDir() && !strings.HasPrefix(n, ".") && (strings.HasSuffix(n, AutoVarsSuffix) || strings.HasSuffix(n, AutoVarsJSONSuffix)) {
				out = append(out, filepath.Join(p, n))
			}
		}
	}
	return out
}

// readVarFile sets the variables a variable file assigns. Its values are
// literals, as in Terraform's .tfvars files. A name no variable block
// declares is a warning, as in Terraform: a variable file may serve
// several configurations (-var names one variable, and an undeclared one
// is an error).
func (l *loader) readVarFile(name string) hcl.Diagnostics {
	f, diags := l.parseFile(name)
	if diags.HasErrors() || f == nil {
		return diags
	}
	attrs, d := f.Body.JustAttributes()
	diags = append(diags, d...)
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a := attrs[n]
		v, ok := l.vars[n]
		if !ok {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "Value for undeclared variable",
				Detail:   fmt.Sprintf("The file %s sets %q, but no variable %q is declared, so the value is not used. If you meant to use it, declare it with a variable %q {} block; otherwise remove the line (a file shared by several configurations may set what only some declare).", name, n, n, n),
				Subject:  a.NameRange.Ptr(),
			})
			continue
		}
		val, d := a.Expr.Value(nil)
		diags = append(diags, d...)
		if d.HasErrors() {
			v.failed = true
			continue
		}
		diags = append(diags, l.set(v, val, "the file "+name, a.Expr.Range().Ptr())...)
	}
	return diags
}

// validate checks a variable's validation blocks against its value. A
// value not known (`check -no-env`) is not checked.
func (l *loader) validate(v *variableDecl) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, rule := range v.validations {
		d, ok := l.checkRefs(rule.condition.Variables(), scope{})
		diags = append(diags, d...)
		d, okm := l.checkRefs(rule.message.Variables(), scope{})
		diags = append(diags, d...)
		if !ok || !okm {
			continue
		}
		ctx := l.contexts(rule.condition.Range().Filename).static.NewChild()
		ctx.Variables = map[string]cty.Value{rootVar: l.varObj}
		res, d := rule.condition.Value(ctx)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		res, err := convert.Convert(res, cty.Bool)
		if err != nil || res.IsNull() {
			diags = append(diags, errorf(rule.condition.Range(), "Invalid validation condition",
				"The condition must be true or false (a bool), and cannot be null."))
			continue
		}
		if !res.IsKnown() || res.True() {
			continue
		}
		msg, d := rule.message.Value(ctx)
		if d.HasErrors() {
			diags = append(diags, d...)
			continue
		}
		text := "The value is not valid."
		if m, err := convert.Convert(msg, cty.String); err == nil && m.IsKnown() && !m.IsNull() {
			text = strings.TrimSpace(m.AsString())
		}
		subject := rule.condition.Range()
		if v.origin != nil {
			subject = *v.origin
		}
		diags = append(diags, errorf(subject, "Invalid value for variable",
			"%s\n\nThe value of var.%s, set by %s, failed the validation rule at %s.", text, v.Name, v.source, rule.condition.Range()))
	}
	return diags
}

// leaves are the strings and numbers inside a value, as text: the
// secrets of a sensitive variable.
func leaves(v cty.Value) []string {
	var out []string
	cty.Walk(v, func(_ cty.Path, x cty.Value) (bool, error) {
		if !x.IsKnown() || x.IsNull() {
			return false, nil
		}
		switch x.Type() {
		case cty.String:
			out = append(out, x.AsString())
		case cty.Number:
			out = append(out, x.AsBigFloat().Text('f', -1))
		}
		return true, nil
	})
	return out
}
