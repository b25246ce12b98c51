package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeHCL(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "a.hcl")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// provider "postgres" (or mysql, sqlite, ...) is answered with the sql
// provider and the driver it means.
func TestProviderTypeIsSQLDriver(t *testing.T) {
	for typ, driver := range map[string]string{"postgres": "postgres", "PostgreSQL": "postgres", "mariadb": "mysql", "sqlite3": "sqlite"} {
		_, diags := Load([]string{writeHCL(t, `provider "`+typ+`" "main" {}`)}, testOpts)
		all := diags.All()
		if len(all) != 1 || all[0].Summary != "Unknown provider type" {
			t.Fatalf("%s: %v", typ, all)
		}
		if want := `Did you mean provider "sql" "main" with driver = "` + driver + `"?`; !strings.Contains(all[0].Detail, want) {
			t.Errorf("%s: detail %q lacks %q", typ, all[0].Detail, want)
		}
	}
	_, diags := Load([]string{writeHCL(t, `provider "consul" "c" {}`)}, testOpts)
	if d := diags.All(); len(d) != 1 || strings.Contains(d[0].Detail, "Did you mean") {
		t.Errorf("consul: %v", d)
	}
}
