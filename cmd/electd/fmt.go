package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/electd/electd/config"
)

// cmdFmt is `electd fmt`: rewrite *.hcl files in canonical format, like
// `terraform fmt`. A file that does not parse is reported and left alone
// (hclwrite would happily "format" broken input). Exit codes: 0 fine,
// 1 a file does not parse or cannot be written, or (with -check) a file is
// not formatted — docs/cli.md gives 1 rather than terraform's 3; 2 bad flags.
func cmdFmt(args []string, stdout, stderr io.Writer) int {
	return runFmt(args, os.Stdin, stdout, stderr)
}

func runFmt(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newCommand("fmt")
	check := fs.boolFlag("check")
	diff := fs.boolFlag("diff")
	write := fs.boolFlag("write")
	paths, exit, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return exit
	}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	f := &formatter{check: *check, diff: *diff, write: *write && !*check, stdout: stdout, stderr: stderr}
	for _, p := range paths {
		if p == "-" {
			f.stdin(stdin)
			continue
		}
		files, err := hclFiles(p)
		if err != nil {
			fmt.Fprintln(stderr, "electd fmt:", err)
			f.failed = true
			continue
		}
		for _, name := range files {
			f.file(name)
		}
	}
	if f.failed || (f.check && f.changed) {
		return 1
	}
	return 0
}

type formatter struct {
	check, diff, write bool
	stdout, stderr     io.Writer
	failed, changed    bool
}

// hclFiles is the file itself, or the *.hcl and *.electdvars files of a
// directory, as terraform fmt takes .tf and .tfvars (not *.hcl.json nor
// *.electdvars.json: JSON has its own formatters).
func hclFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && (strings.HasSuffix(e.Name(), ".hcl") || strings.HasSuffix(e.Name(), ".electdvars")) {
			out = append(out, filepath.Join(path, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// format parses src first and formats it only when it parses.
func (f *formatter) format(name string, src []byte) ([]byte, bool) {
	if diags := config.CheckSource(name, src); diags.HasErrors() {
		f.report(diags)
		return nil, false
	}
	file, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
	if diags.HasErrors() {
		files := map[string]*hcl.File{name: file}
		if file == nil {
			files = map[string]*hcl.File{name: {Bytes: src}}
		}
		hcl.NewDiagnosticTextWriter(f.stderr, files, 0, false).WriteDiagnostics(diags)
		f.failed = true
		return nil, false
	}
	return hclwrite.Format(src), true
}

// report prints diagnostics that come without a parsed file.
func (f *formatter) report(diags hcl.Diagnostics) {
	for _, d := range diags {
		fmt.Fprintf(f.stderr, "electd fmt: %s: %s\n", d.Summary, d.Detail)
	}
	f.failed = true
}

func (f *formatter) stdin(r io.Reader) {
	src, err := io.ReadAll(io.LimitReader(r, config.MaxFileSize+1))
	if err == nil && len(src) > config.MaxFileSize {
		err = fmt.Errorf("more than %d MiB", config.MaxFileSize>>20)
	}
	if err != nil {
		fmt.Fprintln(f.stderr, "electd fmt: reading stdin:", err)
		f.failed = true
		return
	}
	out, ok := f.format("<stdin>", src)
	if !ok {
		return
	}
	changed := !bytes.Equal(src, out)
	f.changed = f.changed || changed
	switch {
	case f.diff:
		if changed {
			io.WriteString(f.stdout, unifiedDiff("<stdin>", string(src), string(out)))
		}
	case !f.check:
		f.stdout.Write(out)
	}
}

func (f *formatter) file(name string) {
	src, diags := config.ReadSource(name)
	if src == nil {
		f.report(diags)
		return
	}
	out, ok := f.format(name, src)
	if !ok || bytes.Equal(src, out) {
		return
	}
	f.changed = true
	fmt.Fprintln(f.stdout, name) // like terraform fmt: the files it changed (or would)
	if f.diff {
		io.WriteString(f.stdout, unifiedDiff(name, string(src), string(out)))
	}
	if f.write {
		info, err := os.Stat(name)
		if err == nil {
			err = os.WriteFile(name, out, info.Mode().Perm())
		}
		if err != nil {
			fmt.Fprintln(f.stderr, "electd fmt:", err)
			f.failed = true
		}
	}
}

// unifiedDiff is a small line diff (longest common subsequence, three lines
// of context): configuration files are small, and no diff library is a
// dependency yet.
func unifiedDiff(name, a, b string) string {
	x, y := splitLines(a), splitLines(b)
	// lcs[i][j] is the length of the LCS of x[i:] and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type op struct {
		kind byte // ' ', '-', '+'
		text string
		ai   int // line index in a of this line (or of the next a line, for '+')
		bi   int
	}
	var ops []op
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			ops = append(ops, op{' ', x[i], i, j})
			i++
			j++
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			// Deletions first, as diff(1) prints them.
			ops = append(ops, op{'-', x[i], i, j})
			i++
		default:
			ops = append(ops, op{'+', y[j], i, j})
			j++
		}
	}
	const context = 3
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- old/%s\n+++ new/%s\n", name, name)
	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		// A hunk: from context lines before this change to context lines
		// after the last change that is within 2*context of the previous.
		start := max(0, k-context)
		end := k
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(len(ops), end+context)
				break
			}
			end = run
		}
		na, nb := 0, 0
		for _, o := range ops[start:end] {
			if o.kind != '+' {
				na++
			}
			if o.kind != '-' {
				nb++
			}
		}
		fmt.Fprintf(&sb, "@@ -%d,%d +%d,%d @@\n", ops[start].ai+1, na, ops[start].bi+1, nb)
		for _, o := range ops[start:end] {
			sb.WriteByte(o.kind)
			sb.WriteString(o.text)
			sb.WriteByte('\n')
		}
		k = end
	}
	return sb.String()
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
