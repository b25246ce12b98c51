package config

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loadSrc writes files (name -> source) into a directory and loads it.
func loadSrc(t *testing.T, files map[string]string, opts Options) (*Config, *Diagnostics, string) {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		writeFile(t, filepath.Join(dir, name), []byte(src))
	}
	cfg, diags := Load([]string{dir}, opts)
	return cfg, diags, dir
}

func diagText(d *Diagnostics) string {
	var b strings.Builder
	d.WriteText(&b)
	return b.String()
}

// argv is the command of a job's run block, evaluated for an empty event.
func argv(t *testing.T, cfg *Config, name string) []string {
	t.Helper()
	out, err := job(t, cfg, name).Run.Command.Argv.Eval(Event{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const fiveVars = `
variable "a" { default = "default-a" }
variable "b" { default = "default-b" }
variable "c" { default = "default-c" }
variable "d" { default = "default-d" }
variable "e" { default = "default-e" }
job "j" {
  run {
    command = [var.a, var.b, var.c, var.d, var.e]
  }
}
`

// Each source beats those below it, as in Terraform: default <
// ELECTD_VAR_name < *.auto.electdvars (in name order) < -var and -var-file,
// of which the later wins.
func TestVariablePrecedence(t *testing.T) {
	t.Setenv("ELECTD_VAR_b", "env-b")
	t.Setenv("ELECTD_VAR_c", "env-c")
	varFile := writeFile(t, filepath.Join(t.TempDir(), "given.electdvars"), []byte("d = \"file-d\"\ne = \"file-e\"\n"))
	opts := testOpts
	opts.Vars = []Var{{Name: "d", Value: "flag-d"}, {File: varFile}, {Name: "e", Value: "flag-e"}}
	cfg, diags, _ := loadSrc(t, map[string]string{
		"main.hcl":               fiveVars,
		"a.auto.electdvars":      "c = \"auto-a-c\"\nd = \"auto-d\"\n",
		"b.auto.electdvars.json": `{"c": "auto-b-c"}`,
	}, opts)
	if diags.HasErrors() {
		t.Fatal(diagText(diags))
	}
	got := strings.Join(argv(t, cfg, "j"), " ")
	if want := "default-a env-b auto-b-c file-d flag-e"; got != want {
		t.Errorf("command %q, want %q", got, want)
	}
}

// A -var is taken as it is for a variable of a primitive type or without
// one, and parsed as HCL for a collection; the result is converted to the
// type.
func TestVariableTypes(t *testing.T) {
	src := `
variable "n" { type = number }
variable "zones" { type = list(string) }
variable "raw" {}
variable "obj" {
  type = object({ name = string, port = optional(number, 5672) })
}
job "j" {
  run {
    command = concat([tostring(var.n + 1), var.raw, var.obj.name, tostring(var.obj.port)], var.zones)
  }
}
`
	opts := testOpts
	opts.Vars = []Var{{Name: "n", Value: "41"}, {Name: "zones", Value: `["a", "b"]`}, {Name: "raw", Value: `["not", "parsed"]`}, {Name: "obj", Value: `{ name = "q" }`}}
	cfg, diags, _ := loadSrc(t, map[string]string{"main.hcl": src}, opts)
	if diags.HasErrors() {
		t.Fatal(diagText(diags))
	}
	if got, want := strings.Join(argv(t, cfg, "j"), "|"), `42|["not", "parsed"]|q|5672|a|b`; got != want {
		t.Errorf("command %q, want %q", got, want)
	}

	for _, tc := range []struct {
		name, summary string
		vars          []Var
	}{
		{"not a number", "Invalid value for input variable", []Var{{Name: "n", Value: "forty"}, {Name: "zones", Value: "[]"}, {Name: "raw", Value: ""}, {Name: "obj", Value: "{name = \"q\"}"}}},
		{"not an expression", "Invalid value for input variable", []Var{{Name: "n", Value: "1"}, {Name: "zones", Value: "[a"}, {Name: "raw", Value: ""}, {Name: "obj", Value: "{name = \"q\"}"}}},
		{"undeclared", "Value for undeclared variable", []Var{{Name: "n", Value: "1"}, {Name: "zones", Value: "[]"}, {Name: "raw", Value: ""}, {Name: "obj", Value: "{name = \"q\"}"}, {Name: "nope", Value: "x"}}},
		{"missing", "No value for required variable", []Var{{Name: "n", Value: "1"}, {Name: "zones", Value: "[]"}, {Name: "raw", Value: ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOpts
			opts.Vars = tc.vars
			_, diags, _ := loadSrc(t, map[string]string{"main.hcl": src}, opts)
			if s := summaries(diags); len(s) != 1 || s[0] != tc.summary {
				t.Errorf("summaries %q, want [%s]\n%s", s, tc.summary, diagText(diags))
			}
		})
	}
}

func TestParseVar(t *testing.T) {
	for arg, ok := range map[string]bool{"a=b": true, "a=": true, "a=b=c": true, "_x1=1": true, "a": false, "=b": false, "1a=b": false, "a b=c": false} {
		v, err := ParseVar(arg)
		if (err == nil) != ok {
			t.Errorf("ParseVar(%q) = %+v, %v; want ok=%v", arg, v, err, ok)
		}
	}
	if v, _ := ParseVar("a=b=c"); v.Name != "a" || v.Value != "b=c" {
		t.Errorf("ParseVar(a=b=c) = %+v", v)
	}
	if _, err := ParseVar("token"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %v", err)
	}
}

// A sensitive variable's value is a secret: it joins Config.Secrets, which
// mask the agent's log and API, and no diagnostic shows it, even where a
// function quotes it.
func TestSensitiveVariable(t *testing.T) {
	const secret = "amqp://user:hunter2-very-secret@q"
	src := `
variable "queue_url" {
  type      = string
  sensitive = true
}
variable "port" {
  type      = string
  sensitive = true
  default   = "not-a-port-secret"
}
job "j" {
  ttl = "${parseint(var.port, 10)}s"
  run {
    command = ["/bin/consumer", var.queue_url]
  }
}
`
	opts := testOpts
	opts.Vars = []Var{{Name: "queue_url", Value: secret}}
	_, diags, _ := loadSrc(t, map[string]string{"main.hcl": src}, opts)
	text := diagText(diags)
	if !diags.HasErrors() || strings.Contains(text, "not-a-port-secret") {
		t.Errorf("want parseint's error with the value masked:\n%s", text)
	}

	src = strings.Replace(src, `ttl = "${parseint(var.port, 10)}s"`, "", 1)
	cfg, diags, _ := loadSrc(t, map[string]string{"main.hcl": src}, opts)
	if diags.HasErrors() {
		t.Fatal(diagText(diags))
	}
	found := map[string]bool{}
	for _, s := range cfg.Secrets {
		found[s] = true
	}
	if !found[secret] || !found["not-a-port-secret"] {
		t.Errorf("Secrets %q lack the sensitive values", cfg.Secrets)
	}
}

// Without the environment (check -no-env), a variable without a value is
// unknown, as an unset env() is: no error, and nothing that depends on it
// is judged. ELECTD_VAR_* is not read; -var still is.
func TestVariablesNoEnv(t *testing.T) {
	src := `
variable "queue_url" {
  type = string
  validation {
    condition     = startswith(var.queue_url, "amqp://")
    error_message = "The queue_url must be an amqp:// URL."
  }
}
variable "shards" { type = number }
variable "ttl" { default = "15s" }
job "consumer" {
  for_each = toset(range(var.shards))
  ttl      = var.ttl
  run {
    command = ["/bin/consumer", "--shard", each.key, var.queue_url]
  }
}
`
	t.Setenv("ELECTD_VAR_queue_url", "http://not-amqp")
	opts := testOpts
	opts.NoEnv = true
	cfg, diags, _ := loadSrc(t, map[string]string{"main.hcl": src}, opts)
	if diags.HasErrors() {
		t.Fatal(diagText(diags))
	}
	if s := summaries(diags); len(s) != 1 || s[0] != "Instances not known" {
		t.Errorf("diagnostics %q, want the warning that the instances were not checked", s)
	}
	if len(cfg.Jobs) != 1 {
		t.Errorf("%d jobs, want the block checked once", len(cfg.Jobs))
	}

	// Given with -var, the instances are checked one by one.
	opts.Vars = []Var{{Name: "shards", Value: "3"}, {Name: "ttl", Value: "soon"}}
	_, diags, _ = loadSrc(t, map[string]string{"main.hcl": src}, opts)
	if s := summaries(diags); len(s) != 1 || s[0] != "Invalid duration" {
		t.Errorf("diagnostics %q, want the bad ttl once", s)
	}

	// With the environment, the same file is judged on its values.
	opts.NoEnv, opts.Vars = false, []Var{{Name: "shards", Value: "3"}}
	_, diags, _ = loadSrc(t, map[string]string{"main.hcl": src}, opts)
	if s := summaries(diags); len(s) != 1 || s[0] != "Invalid value for variable" {
		t.Errorf("diagnostics %q, want the failed validation of ELECTD_VAR_queue_url", s)
	}
}

// A var file given with -var-file that sets an undeclared variable is a
// warning, as in Terraform (the file may serve several configurations),
// and the rest of it is used; one that does not exist is an error that
// names it.
func TestVarFileProblems(t *testing.T) {
	dir := t.TempDir()
	shared := writeFile(t, filepath.Join(dir, "shared.electdvars"), []byte("nope = 1\na = \"from-file\"\n"))
	opts := testOpts
	opts.Vars = []Var{{File: shared}}
	cfg, diags, _ := loadSrc(t, map[string]string{"main.hcl": fiveVars}, opts)
	if s := summaries(diags); len(s) != 1 || s[0] != "Value for undeclared variable" || diags.HasErrors() {
		t.Errorf("diagnostics %q, want one warning\n%s", s, diagText(diags))
	}
	if cfg == nil || argv(t, cfg, "j")[0] != "from-file" {
		t.Errorf("the declared variable of the file was not set")
	}
	opts.Vars = []Var{{File: filepath.Join(dir, "missing.electdvars")}}
	_, diags, _ = loadSrc(t, map[string]string{"main.hcl": fiveVars}, opts)
	if !diags.HasErrors() || !strings.Contains(diagText(diags), "missing.electdvars") {
		t.Errorf("a missing var file: %s", diagText(diags))
	}
}

// A world-writable *.auto.electdvars sets what the jobs run, as a
// configuration file does: it is refused the same way.
func TestAutoVarFilePermissions(t *testing.T) {
	_, _, dir := loadSrc(t, map[string]string{"main.hcl": fiveVars}, testOpts)
	p := writeFile(t, filepath.Join(dir, "x.auto.electdvars"), []byte("a = \"x\"\n"))
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	_, diags := Load([]string{dir}, testOpts)
	if s := summaries(diags); len(s) != 1 || s[0] != "Unsafe configuration file" {
		t.Errorf("diagnostics %q, want the world-writable var file refused", s)
	}
}

// nullable = false, as in Terraform: a null given for the variable means
// its default, and is refused without one; a nullable variable keeps the
// null it is given.
func TestVariableNullable(t *testing.T) {
	src := `
variable "with_default" {
  type     = string
  nullable = false
  default  = "dflt"
}
variable "required" {
  type     = string
  nullable = false
}
variable "may_be_null" {
  type    = string
  default = "x"
}
job "j" {
  run {
    command = [var.with_default, var.required, coalesce(var.may_be_null, "was-null")]
  }
}
`
	nulls := writeFile(t, filepath.Join(t.TempDir(), "nulls.electdvars"), []byte("with_default = null\nmay_be_null = null\n"))
	opts := testOpts
	opts.Vars = []Var{{File: nulls}, {Name: "required", Value: "given"}}
	cfg, diags, _ := loadSrc(t, map[string]string{"main.hcl": src}, opts)
	if diags.HasErrors() {
		t.Fatal(diagText(diags))
	}
	if got, want := strings.Join(argv(t, cfg, "j"), " "), "dflt given was-null"; got != want {
		t.Errorf("command %q, want %q", got, want)
	}

	required := writeFile(t, filepath.Join(t.TempDir(), "required.electdvars"), []byte("required = null\n"))
	opts.Vars = []Var{{File: required}}
	_, diags, _ = loadSrc(t, map[string]string{"main.hcl": src}, opts)
	if s := summaries(diags); len(s) != 1 || s[0] != "Required variable not set" {
		t.Errorf("diagnostics %q, want the null refused\n%s", s, diagText(diags))
	}
	if text := diagText(diags); !strings.Contains(text, "required.electdvars line 1") {
		t.Errorf("the diagnostic is not on the file's line:\n%s", text)
	}
}

// A variable of type any, like one of a collection type, takes an HCL
// expression from the command line and the environment, as in Terraform;
// one without a type takes the text as it is.
func TestVariableAnyFromCommandLine(t *testing.T) {
	src := `
variable "typed_any" { type = any }
variable "untyped" {}
job "j" {
  run {
    command = concat(var.typed_any, [var.untyped])
  }
}
`
	t.Setenv("ELECTD_VAR_untyped", `["kept", "as text"]`)
	opts := testOpts
	opts.Vars = []Var{{Name: "typed_any", Value: `["a", "b"]`}}
	cfg, diags, _ := loadSrc(t, map[string]string{"main.hcl": src}, opts)
	if diags.HasErrors() {
		t.Fatal(diagText(diags))
	}
	if got, want := strings.Join(argv(t, cfg, "j"), "|"), `a|b|["kept", "as text"]`; got != want {
		t.Errorf("command %q, want %q", got, want)
	}
}

// A sensitive value is masked in the snippets too, where a diagnostic
// shows the line it was set on (a variable file, a default), with as many
// '*' as it has bytes, so that the highlight stays on it.
func TestSensitiveValueNotInSnippets(t *testing.T) {
	src := `
variable "queue_url" {
  type      = string
  sensitive = true
  validation {
    condition     = startswith(var.queue_url, "amqp://")
    error_message = "The queue_url must be an amqp:// URL."
  }
}
variable "token" {
  type      = string
  sensitive = true
  default   = "http-default-s3cr3t-token"
  validation {
    condition     = startswith(var.token, "tok-")
    error_message = "The token starts with tok-."
  }
}
job "j" {
  run {
    command = ["/bin/consumer", var.queue_url, var.token]
  }
}
`
	const secret = "http://consumer:file-s3cr3t-pw@mq/orders"
	varFile := writeFile(t, filepath.Join(t.TempDir(), "prod.electdvars"), []byte("queue_url = \""+secret+"\"\n"))
	opts := testOpts
	opts.Vars = []Var{{File: varFile}}
	_, diags, _ := loadSrc(t, map[string]string{"main.hcl": src}, opts)
	if s := summaries(diags); len(s) != 2 || s[0] != "Invalid value for variable" || s[1] != "Invalid value for variable" {
		t.Fatalf("diagnostics %q", s)
	}
	text := diagText(diags)
	var js bytes.Buffer
	if err := diags.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for what, out := range map[string]string{"text": text, "json": js.String()} {
		if strings.Contains(out, "s3cr3t") {
			t.Errorf("the %s output shows a sensitive value:\n%s", what, out)
		}
	}
	for _, want := range []string{
		`   1: queue_url = "` + strings.Repeat("*", len(secret)) + `"`,
		`default   = "` + strings.Repeat("*", len("http-default-s3cr3t-token")) + `"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	var out struct {
		Diagnostics []struct {
			Snippet struct {
				Code          string `json:"code"`
				Start, End    int
				HighlightFrom int `json:"highlight_start_offset"`
				HighlightTo   int `json:"highlight_end_offset"`
			} `json:"snippet"`
		} `json:"diagnostics"`
	}
	if err := json.Unmarshal(js.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	for _, d := range out.Diagnostics {
		sn := d.Snippet
		if hl := sn.Code[sn.HighlightFrom:sn.HighlightTo]; strings.Trim(hl, `"*`) != "" {
			t.Errorf("the highlight %q of %q is not the masked value", hl, sn.Code)
		}
	}
}
