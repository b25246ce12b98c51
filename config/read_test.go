package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// loadWithin runs Load and fails the test if it has not returned within d:
// a Load that hangs must fail the test, not hang it.
func loadWithin(t testing.TB, d time.Duration, opts Options, paths ...string) (*Config, *Diagnostics) {
	t.Helper()
	type result struct {
		cfg   *Config
		diags *Diagnostics
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		cfg, diags := Load(paths, opts)
		done <- result{cfg, diags}
	}()
	select {
	case r := <-done:
		if took := time.Since(start); took > d {
			t.Fatalf("Load took %s, want at most %s", took, d)
		}
		return r.cfg, r.diags
	case <-time.After(d):
		t.Fatalf("Load did not return within %s", d)
		return nil, nil
	}
}

// summaries lists the summaries of diags, in order.
func summaries(diags *Diagnostics) []string {
	var out []string
	for _, d := range diags.All() {
		out = append(out, d.Summary)
	}
	return out
}

// controlByte is the index of the first byte of out that a terminal would
// act on (anything but text, newlines and tabs), or -1.
func controlByte(out []byte) int {
	for i := 0; i < len(out); {
		r, size := utf8.DecodeRune(out[i:])
		if r != '\n' && r != '\t' && unsafe(r, size) {
			return i
		}
		i += size
	}
	return -1
}

// checkShown fails unless diags print as short text and JSON without
// control characters.
func checkShown(t *testing.T, diags *Diagnostics, maxText int) {
	t.Helper()
	var text, js bytes.Buffer
	if err := diags.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := diags.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if text.Len() > maxText {
		t.Errorf("WriteText wrote %d bytes, want at most %d:\n%.2000s", text.Len(), maxText, text.String())
	}
	if i := controlByte(text.Bytes()); i >= 0 {
		t.Errorf("WriteText wrote the control byte %q at %d:\n%q", text.Bytes()[i], i, text.String())
	}
	if !json.Valid(js.Bytes()) {
		t.Errorf("WriteJSON wrote invalid JSON:\n%s", js.String())
	}
	if i := controlByte(js.Bytes()); i >= 0 {
		t.Errorf("WriteJSON wrote the control byte %q at %d", js.Bytes()[i], i)
	}
}

func writeFile(t *testing.T, path string, src []byte) string {
	t.Helper()
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mkfifo(t *testing.T, path string) string {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	return path
}

const validJob = "job \"a\" {\n  run {\n    command = [\"true\"]\n  }\n}\n"

// TestReadRefuses: files electd must not read, or not in full, each get
// one diagnostic naming them, promptly.
func TestReadRefuses(t *testing.T) {
	opts := testOpts
	opts.AllowUnsafeFiles = true // /dev/zero is world-writable; that is not what this tests
	comments := func(n int) []byte {
		line := "# " + strings.Repeat("x", 61) + "\n"
		return []byte(strings.Repeat(line, n/len(line)+1)[:n])
	}
	binary := make([]byte, 4096)
	rand.New(rand.NewSource(1)).Read(binary)
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string) []string
		summary string
		detail  string        // a part of the detail
		within  time.Duration // 1s unless set
	}{
		{
			name:    "fifo given directly",
			setup:   func(t *testing.T, dir string) []string { return []string{mkfifo(t, filepath.Join(dir, "x.hcl"))} },
			summary: "Not a regular file",
			detail:  "x.hcl is a named pipe (FIFO)",
		},
		{
			name: "fifo in a directory",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "a.hcl"), []byte(validJob))
				mkfifo(t, filepath.Join(dir, "x.hcl"))
				return []string{dir}
			},
			summary: "Not a regular file",
			detail:  "x.hcl is a named pipe (FIFO)",
		},
		{
			name:    "device",
			setup:   func(t *testing.T, dir string) []string { return []string{"/dev/zero"} },
			summary: "Not a regular file",
			detail:  "/dev/zero is a device",
		},
		{
			name: "directory behind a symlink named like a file",
			setup: func(t *testing.T, dir string) []string {
				return []string{symlink(t, t.TempDir(), filepath.Join(dir, "d.hcl"))}
			},
			summary: "Not a regular file",
			detail:  "d.hcl is a directory",
		},
		{
			name: "file over the size limit",
			setup: func(t *testing.T, dir string) []string {
				return []string{writeFile(t, filepath.Join(dir, "big.hcl"), comments(maxFileSize+1))}
			},
			summary: "File too large",
			detail:  "big.hcl is larger than 4 MiB",
		},
		{
			name: "files over the total limit",
			setup: func(t *testing.T, dir string) []string {
				for i := range maxTotalSize/maxFileSize + 1 {
					writeFile(t, filepath.Join(dir, fmt.Sprintf("%d.hcl", i)), comments(maxFileSize))
				}
				return []string{dir}
			},
			summary: "Configuration too large",
			detail:  "4.hcl was not read",
			within:  10 * time.Second, // 16 MiB, lexed twice
		},
		{
			name: "binary",
			setup: func(t *testing.T, dir string) []string {
				return []string{writeFile(t, filepath.Join(dir, "b.hcl"), binary)}
			},
			summary: "Not a text file",
		},
		{
			name: "NUL byte",
			setup: func(t *testing.T, dir string) []string {
				return []string{writeFile(t, filepath.Join(dir, "n.hcl"), []byte("job \"a\" {\n  ttl = \"1s\x00\"\n}\n"))}
			},
			summary: "Not a text file",
			detail:  "has a NUL byte at line 2, column 12",
		},
		{
			name: "not UTF-8",
			setup: func(t *testing.T, dir string) []string {
				return []string{writeFile(t, filepath.Join(dir, "l.hcl.json"), []byte("{\"job\": {\"caf\xe9\": {}}}"))}
			},
			summary: "Not a text file",
			detail:  "has the byte 0xe9 (not UTF-8) at line 1, column 14",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths := tt.setup(t, t.TempDir())
			_, diags := loadWithin(t, cmp.Or(tt.within, time.Second), opts, paths...)
			got := summaries(diags)
			if len(got) != 1 || got[0] != tt.summary {
				t.Fatalf("summaries %q, want [%q]", got, tt.summary)
			}
			if d := diags.All()[0].Detail; !strings.Contains(d, tt.detail) {
				t.Errorf("detail %q does not say %q", d, tt.detail)
			}
			checkShown(t, diags, 1000)
		})
	}
}

func symlink(t *testing.T, target, link string) string {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(link)
}

// TestReadSymlink: a directory entry that links to a regular file is read.
func TestReadSymlink(t *testing.T) {
	dir := t.TempDir()
	target := writeFile(t, filepath.Join(t.TempDir(), "real.hcl"), []byte(validJob))
	symlink(t, target, filepath.Join(dir, "link.hcl"))
	cfg, diags := loadWithin(t, time.Second, testOpts, dir)
	if diags.HasErrors() || len(cfg.Jobs) != 1 {
		t.Fatalf("errors: %v", diags.Errs())
	}
}

// TestNestingTooDeep: input nested far deeper than any configuration gets
// one diagnostic instead of a fatal stack overflow in hcl's recursive
// parsers and evaluators, whatever does the nesting.
func TestNestingTooDeep(t *testing.T) {
	const n = 100_000
	rep := strings.Repeat
	tests := []struct {
		name, file, src string
	}{
		{"tuples", "x.hcl", "x = " + rep("[", n)},
		{"objects", "x.hcl", "x = " + rep("{a = ", n)},
		{"blocks", "x.hcl", rep("a {\n", n)},
		{"parentheses", "x.hcl", "x = " + rep("(", n)},
		{"calls", "x.hcl", "x = " + rep("upper(", n)},
		{"interpolations", "x.hcl", "x = " + rep(`"${`, n)},
		{"heredocs", "x.hcl", "x = " + rep("<<EOT\n${", n)},
		{"template ifs", "x.hcl", "x = \"" + rep("%{if true}", n) + "\"\n"},
		{"template fors", "x.hcl", "x = <<EOT\n" + rep("%{for x in y}\n", n) + "EOT\n"},
		{"unary minus", "x.hcl", "x = " + rep("-", n) + "1\n"},
		{"negation", "x.hcl", "x = " + rep("!", n) + "true\n"},
		{"operator chain", "x.hcl", "x = " + rep("1+", n) + "1\n"},
		{"conditionals", "x.hcl", "x = " + rep("a ? b : ", n) + "c\n"},
		{"index chain", "x.hcl", "x = a" + rep("[b]", n) + "\n"},
		{"splat chain", "x.hcl", "x = a" + rep("[*]", n) + "\n"},
		{"splats in error recovery", "x.hcl", "x = a" + rep(".[*]", n) + "\n"},
		{"chain over lines in a for", "x.hcl", "x = {for k in y : k => 1\n" + rep("+ 1\n", n) + "}\n"},
		{"closers that do not match count for nothing", "x.hcl", "x = [" + rep("[(],", n)},
		{"JSON arrays", "x.hcl.json", rep("[", n)},
		{"JSON objects", "x.hcl.json", rep(`{"a": `, n)},
		{"JSON string template", "x.hcl.json", `{"job": {"a": {"ttl": "${` + rep("[", n) + `"}}}`},
		{"JSON string expression", "x.hcl.json", `{"job": {"a": {"provider": "` + rep("-", n) + `1"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, filepath.Join(t.TempDir(), tt.file), []byte(tt.src))
			// 100,000 levels take a second or so to scan (template fors
			// the longest, 2 s on a loaded 2-core machine); what the
			// bound catches is a parser that recurses or backtracks,
			// which takes minutes or overflows the stack.
			_, diags := loadWithin(t, 10*time.Second, testOpts, path)
			if got := summaries(diags); len(got) != 1 || got[0] != "Nesting too deep" {
				t.Fatalf("summaries %q, want [Nesting too deep]", got)
			}
			if s := diags.All()[0].Subject; s == nil || s.Filename != path {
				t.Errorf("subject %v, want a range in %s", s, path)
			}
			checkShown(t, diags, 2000)
		})
	}
}

// TestNestingLimit: maxNesting is allowed, one more is not, and the
// examples and fixtures stay far below it.
func TestNestingLimit(t *testing.T) {
	tuples := func(n int) string {
		return "job \"a\" {\n  run {\n    command = " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n  }\n}\n"
	}
	for _, tt := range []struct {
		name     string
		src      string
		tooDeep  bool
		location string
	}{
		// The job and run blocks are two levels.
		{"at the limit", tuples(maxNesting - 2), false, ""},
		{"over the limit", tuples(maxNesting - 1), true, "line 3"},
		{"chain at the limit", "job \"a\" {\n  ttl = " + strings.Repeat("1+", maxNesting-1) + "1\n}\n", false, ""},
		{"chain over the limit", "job \"a\" {\n  ttl = " + strings.Repeat("1+", maxNesting) + "1\n}\n", true, "line 2"},
		{"chains end at newlines", "job \"a\" {\n" + strings.Repeat("  x = -1\n", 2*maxNesting) + "}\n", false, ""},
		{"and at commas", "x = [" + strings.Repeat("-1, ", 2*maxNesting) + "]\n", false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, filepath.Join(t.TempDir(), "x.hcl"), []byte(tt.src))
			_, diags := loadWithin(t, time.Second, testOpts, path)
			got := summaries(diags)
			if deep := len(got) > 0 && got[0] == "Nesting too deep"; deep != tt.tooDeep {
				t.Fatalf("summaries %q, want nesting too deep: %v", got, tt.tooDeep)
			}
			if tt.tooDeep {
				var buf bytes.Buffer
				diags.WriteText(&buf)
				if !strings.Contains(buf.String(), tt.location) {
					t.Errorf("diagnostic not on %s:\n%s", tt.location, buf.String())
				}
			}
		})
	}
	var files []string
	for _, glob := range []string{"../examples/*.hcl", "testdata/*/*.hcl", "testdata/*/*.hcl.json", "testdata/*/*/*.hcl"} {
		m, _ := filepath.Glob(glob)
		files = append(files, m...)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if d := checkNesting(f, src); d.HasErrors() || nestingOf(f, src) > maxNesting/4 {
			t.Errorf("%s nests %d deep, want far below the limit of %d", f, nestingOf(f, src), maxNesting)
		}
	}
}

// nestingOf is how deep src nests, as checkNesting counts.
func nestingOf(name string, src []byte) int {
	toks, _ := hclsyntax.LexConfig(src, name, hcl.InitialPos)
	for limit := 0; ; limit++ {
		if strings.HasSuffix(name, ".json") {
			if jsonTooDeep(src, limit) < 0 {
				return limit
			}
		} else if tooDeep(toks, true, 0, limit) < 0 {
			return limit
		}
	}
}

// TestTooManyProblems: after maxDiags diagnostics one more counts the rest.
func TestTooManyProblems(t *testing.T) {
	var src strings.Builder
	src.WriteString("agent {\n")
	for i := range 200 {
		fmt.Fprintf(&src, "  nope%d = 1\n", i)
	}
	src.WriteString("}\n")
	path := writeFile(t, filepath.Join(t.TempDir(), "x.hcl"), []byte(src.String()))
	_, diags := loadWithin(t, time.Second, testOpts, path)
	all := diags.All()
	if len(all) != maxDiags+1 {
		t.Fatalf("%d diagnostics, want %d", len(all), maxDiags+1)
	}
	last := all[maxDiags]
	if last.Summary != "Too many problems" || last.Severity != hcl.DiagError || !strings.Contains(last.Detail, "150 more problems (150 errors, 0 warnings)") {
		t.Errorf("last diagnostic %s: %s", last.Summary, last.Detail)
	}
	checkShown(t, diags, 20_000)
}

// TestLimitDiags: the diagnostic that counts the rest is an error when any
// of the rest is, so a configuration with errors never passes.
func TestLimitDiags(t *testing.T) {
	diag := func(s hcl.DiagnosticSeverity) *hcl.Diagnostic {
		return &hcl.Diagnostic{Severity: s, Summary: "x", Detail: "x."}
	}
	many := func(warns, errs int) hcl.Diagnostics {
		var out hcl.Diagnostics
		for range warns {
			out = append(out, diag(hcl.DiagWarning))
		}
		for range errs {
			out = append(out, diag(hcl.DiagError))
		}
		return out
	}
	tests := []struct {
		name     string
		in       hcl.Diagnostics
		n        int
		severity hcl.DiagnosticSeverity
		detail   string
	}{
		{"few", many(10, 10), 20, hcl.DiagError, "x."},
		{"exactly the cap", many(0, maxDiags), maxDiags, hcl.DiagError, "x."},
		{"errors after the warnings shown", many(maxDiags, 3), maxDiags + 1, hcl.DiagError, "3 more problems (3 errors, 0 warnings)"},
		{"only warnings", many(maxDiags+5, 0), maxDiags + 1, hcl.DiagWarning, "5 more problems (0 errors, 5 warnings)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := limitDiags(tt.in)
			last := out[len(out)-1]
			if len(out) != tt.n || last.Severity != tt.severity || !strings.Contains(last.Detail, tt.detail) {
				t.Errorf("%d diagnostics, last %v %q", len(out), last.Severity, last.Detail)
			}
		})
	}
}

// TestShownSafely: what files put into diagnostics (labels, values, file
// names, long lines) reaches a terminal without escape sequences and in
// bounded length.
func TestShownSafely(t *testing.T) {
	tests := []struct {
		name, file, src string
		maxText         int
		want            string // a part of the text output
	}{
		{"escape in a label", "x.hcl", "job \"a\\u001b[2J\" {\n  run {\n    command = [\"x\"]\n  }\n}\n", 2000, `\x1b[2J`},
		{"raw escape in a string", "x.hcl", "job \"a\x1b[2J\" {\n  bogus = 1\n}\n", 2000, `job "a?[2J"`},
		{"bidi override", "x.hcl", "job \"a\u202eb\" {\n  bogus = 1\n}\n", 2000, `\u202e`},
		{"C1 control", "x.hcl", "job \"a\u009bb\" {\n  bogus = 1\n}\n", 2000, "a??b"},
		{"lone carriage return", "x.hcl", "job \"a\" {\r  bogus = 1\n}\n", 2000, "?"},
		{"control in the file name", "x\x1b[31m.hcl", "bogus = 1\n", 2000, `x\x1b[31m.hcl`},
		{"long line", "x.hcl", "job \"a\" { bogus = 1 " + strings.Repeat("x = 1 ", 500_000) + "}\n", 3000, "..."},
		{"many lines in one problem", "x.hcl", "job \"a\" {\n  ttl = [\n" + strings.Repeat("    1,\n", 10_000) + "  ]\n}\n", 3000, "   ..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, tt.file), []byte(tt.src))
			// Generous: it guards against a hang, on a machine busy with
			// the other packages' tests (the long line is 3 MB).
			_, diags := loadWithin(t, 30*time.Second, testOpts, dir)
			if !diags.HasErrors() {
				t.Fatal("no errors")
			}
			checkShown(t, diags, tt.maxText)
			var buf bytes.Buffer
			diags.WriteText(&buf)
			if !strings.Contains(buf.String(), tt.want) {
				t.Errorf("output does not show %q:\n%s", tt.want, buf.String())
			}
		})
	}
}

func TestEscape(t *testing.T) {
	tests := []struct {
		in, want, wantMultiline string
	}{
		{"plain text, café", "plain text, café", "plain text, café"},
		{"a\x1b[31mb", `a\x1b[31mb`, `a\x1b[31mb`},
		{"line\nline\ttab", `line\x0aline\x09tab`, "line\nline\\x09tab"},
		{"bad \xff byte", `bad \xff byte`, `bad \xff byte`},
		{"c1 \u0085 and bidi \u202e", `c1 \u0085 and bidi \u202e`, `c1 \u0085 and bidi \u202e`},
	}
	for _, tt := range tests {
		if got := escape(tt.in, false); got != tt.want {
			t.Errorf("escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := escape(tt.in, true); got != tt.wantMultiline {
			t.Errorf("escape(%q, multiline) = %q, want %q", tt.in, got, tt.wantMultiline)
		}
	}
}

func TestSanitize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"x = 1\r\n\ty = 2\n", "x = 1\r\n\ty = 2\n"},
		{"a\x1bb\x00c\rd\x7f", "a?b?c?d?"},
		{"\xff\xfe é \u0085 \u202e", "?? é ?? ???"},
	}
	for _, tt := range tests {
		got := string(sanitize([]byte(tt.in)))
		if got != tt.want || len(got) != len(tt.in) {
			t.Errorf("sanitize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
