package registry

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/electd/electd/providers"
)

const module = "github.com/electd/electd"

// imports lists what the non-test Go files under dir import, by file.
func imports(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			out[path] = append(out[path], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A store owns its settings: no provider package imports config, and config
// imports no store (it gets the types from this registry, through its
// caller).
func TestLayering(t *testing.T) {
	for file, ims := range imports(t, "..") {
		for _, im := range ims {
			if im == module+"/config" {
				t.Errorf("%s imports config: a provider decodes its own block", file)
			}
		}
	}
	for file, ims := range imports(t, "../../config") {
		for _, im := range ims {
			if strings.HasPrefix(im, module+"/providers/") {
				t.Errorf("%s imports %s: config names no store", file, im)
			}
		}
	}
}

// Every registered type has a spec, decodes a block whose values are all
// unknown without an error, and has its page in docs/providers.
func TestTypes(t *testing.T) {
	types := Types()
	if len(types) == 0 {
		t.Fatal("no provider types")
	}
	for name, typ := range types {
		if typ.Spec == nil || typ.Decode == nil {
			t.Errorf("%s: no spec or decoder", name)
			continue
		}
		// Every value unknown, as `check -no-env` leaves env(): no rule can
		// be judged, so no error, and settings all the same.
		b := &providers.Block{Val: cty.UnknownVal(hcldec.ImpliedType(typ.Spec))}
		s := typ.Decode(b)
		if s == nil {
			t.Errorf("%s: no settings", name)
			continue
		}
		b.Check(s.Validate())
		if b.Diags.HasErrors() {
			t.Errorf("%s: decoding unknown values: %v", name, b.Diags)
		}
		if _, err := os.Stat(filepath.Join("../../docs/providers", name+".md")); err != nil {
			t.Errorf("%s: no docs/providers/%s.md", name, name)
		}
	}
	if !strings.Contains(Default, `provider "sql" "default"`) {
		t.Errorf("the default provider is not sql.default:\n%s", Default)
	}
}
