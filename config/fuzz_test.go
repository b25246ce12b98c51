package config

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// FuzzLoad: on any bytes, read as HCL and as JSON, Load returns within a
// few seconds, without a panic (Load turns one into "Internal error", still
// a bug), and with diagnostics that print without control characters.
// `make fuzz` runs it; crashers land in testdata/fuzz/FuzzLoad and stay as
// regression seeds.
func FuzzLoad(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		dir := t.TempDir()
		for _, name := range []string{"f.hcl", "f.hcl.json"} {
			path := writeFile(t, filepath.Join(dir, name), src)
			_, diags := loadWithin(t, 5*time.Second, testOpts, path)
			for _, d := range diags.All() {
				if d.Summary == "Internal error" {
					t.Fatalf("%s: %s", name, d.Detail)
				}
			}
			var text, js bytes.Buffer
			if err := diags.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if i := controlByte(text.Bytes()); i >= 0 {
				t.Fatalf("%s: WriteText wrote the control byte %q at %d:\n%q", name, text.Bytes()[i], i, text.String())
			}
			if err := diags.WriteJSON(&js); err != nil || !json.Valid(js.Bytes()) {
				t.Fatalf("%s: WriteJSON: %v\n%s", name, err, js.String())
			}
		}
	})
}

// fuzzSeeds are every fixture, valid and not, and inputs that once took
// Load down: deep nesting, binary, broken heredocs and templates, JSON, a
// thousand problems. They are 15 times the nesting limit rather than the
// 100,000 of TestNestingTooDeep, and the size limits are left to
// TestReadRefuses: the fuzzer mutates and minimizes every seed, and
// megabyte seeds would take most of a short run.
func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	err := filepath.WalkDir("testdata", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasPrefix(path, filepath.Join("testdata", "fuzz")) {
			return nil // the fuzzer reads its own corpus
		}
		src, err := os.ReadFile(path)
		seeds = append(seeds, src)
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	rep := strings.Repeat
	for _, s := range []string{
		"x = " + rep("[", 1000),
		rep("a {\n", 1000),
		"x = " + rep(`"${`, 1000),
		"x = " + rep("1+", 1000) + "1\n",
		"x = " + rep("!", 1000) + "true\n",
		"x = a" + rep("[b]", 1000) + "\n",
		"x = \"" + rep("%{if true}", 1000) + "\"\n",
		"x = <<EOT\n${<<EOT\n" + rep("%{for x in y}", 1000) + "\n",
		"x = <<-EOT\n  a\n  ${\n",
		"x = <<EOT\nEO\n",
		"job \"a\" {\n  ttl = \"${\n}\n",
		`job "a" { run { command = ["${event.token}", "%{ if event.leader == "x" }y%{ endif }"] } }`,
		"\xef\xbb\xbfjob \"a\" {\r\n  ttl = \"1s\"\r\n}\r\n",
		"job \"a\x1b[2J\" {\n  bogus = \"\u009b\u202e\"\n}\n",
		rep("[", 1000),
		rep(`{"a":`, 1000),
		`{"job": {"a": {"ttl": "${` + rep("[", 1000) + `"}}}`,
		`{"job": {"a": {"run": {"command": ["${event.job}", "%{if true}x%{endif}"]}}}}`,
		`{"job": {"a": {"ttl": "\u001b[2J\ud800"}}}`,
		`{"job": [{"a": {}}, {"a": {}}], "//": "comment"}`,
		"\x00\x01\x02\xff\xfe",
		rep(validJob, 1000),
		"x = " + rep("[", maxNesting-1) + rep("]", maxNesting-1) + "\n",
		"x = " + rep("(1+", maxNesting/2-1) + "1" + rep(")", maxNesting/2-1) + "\n",
	} {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// FuzzNesting checks the measure checkNesting relies on: the syntax tree
// hclsyntax builds, which its parser and evaluator recurse over, is never
// much deeper than tooDeep counts. Run it after changing nesting:
// go test -run '^$' -fuzz '^FuzzNesting$' ./config/
func FuzzNesting(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		counted := nestingOf("f.hcl", src)
		if counted > 1000 {
			return // deep enough to be refused; parsing it proves nothing
		}
		file, _ := hclsyntax.ParseConfig(src, "f.hcl", hcl.InitialPos)
		w := &depthWalker{}
		hclsyntax.Walk(file.Body.(*hclsyntax.Body), w)
		// A level of nesting is a few nodes: a block and its body, an
		// object, its item and the key expression, a template and its part.
		if w.max > 4*counted+6 {
			t.Fatalf("syntax tree %d deep, counted %d", w.max, counted)
		}
	})
}

type depthWalker struct{ depth, max int }

func (w *depthWalker) Enter(hclsyntax.Node) hcl.Diagnostics {
	w.depth++
	w.max = max(w.max, w.depth)
	return nil
}

func (w *depthWalker) Exit(hclsyntax.Node) hcl.Diagnostics {
	w.depth--
	return nil
}
