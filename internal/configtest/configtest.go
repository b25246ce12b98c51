// Package configtest loads configurations in tests: a store's settings
// tests check the diagnostics its block gives, as `electd check` shows them.
// It lives outside providers/, whose packages never import config.
package configtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
)

// Load loads one configuration file holding src, with typ, named name, as
// the only provider type.
func Load(t *testing.T, name string, typ providers.Type, src string) (*config.Config, *config.Diagnostics) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".hcl")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Load([]string{path}, config.Options{Types: map[string]providers.Type{name: typ}})
}

// WantDiagnostics checks a Load that must fail: it returned no
// configuration, and its diagnostics are exactly want ("line: summary", in
// any order), each with a range and a detail in whole sentences that never
// shows secret; the first diagnostic's detail says each of detail.
func WantDiagnostics(t *testing.T, cfg *config.Config, diags *config.Diagnostics, want, detail []string, secret string) {
	t.Helper()
	if !diags.HasErrors() || cfg != nil {
		t.Fatalf("Load succeeded, want errors %q", want)
	}
	for _, w := range detail {
		if d := diags.All()[0].Detail; !strings.Contains(d, w) {
			t.Errorf("detail %q does not say %q", d, w)
		}
	}
	var got []string
	for _, d := range diags.All() {
		if d.Subject == nil {
			t.Errorf("diagnostic without a range: %s: %s", d.Summary, d.Detail)
			continue
		}
		got = append(got, fmt.Sprintf("%d: %s", d.Subject.Start.Line, d.Summary))
		if secret != "" && strings.Contains(d.Detail, secret) {
			t.Errorf("a diagnostic shows a secret: %s", d.Detail)
		}
		if !strings.HasSuffix(d.Detail, ".") {
			t.Errorf("detail should be whole sentences: %q", d.Detail)
		}
	}
	sort.Strings(got)
	want = slices.Clone(want)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("diagnostics %q, want %q", got, want)
	}
}

// LoadExample loads examples/file of the repository with typ, named name,
// as the only provider type, and returns its provider block ref
// ("etcd.main").
func LoadExample(t *testing.T, file, name string, typ providers.Type, ref string) config.Provider {
	t.Helper()
	root, err := teststore.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load([]string{filepath.Join(root, "examples", file)}, config.Options{Types: map[string]providers.Type{name: typ}})
	if diags.HasErrors() {
		t.Fatalf("examples/%s: %v", file, diags.Err())
	}
	pc, ok := cfg.Provider(ref)
	if !ok {
		t.Fatalf("examples/%s declares no %s", file, ref)
	}
	return pc
}
