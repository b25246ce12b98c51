package sql_test

import (
	"slices"
	"testing"

	sqlprovider "github.com/electd/electd/providers/sql"
)

// The DSN is secret whole, and so is the password inside it as the driver
// parses it: a driver's error may show the password without the DSN.
func TestSecrets(t *testing.T) {
	for _, c := range []struct {
		name     string
		settings sqlprovider.Settings
		want     []string
	}{
		{"postgres URL", sqlprovider.Settings{Driver: "postgres", DSN: "postgres://electd:pg%40pass-1@db:5432/electd?sslmode=disable"},
			[]string{"postgres://electd:pg%40pass-1@db:5432/electd?sslmode=disable", "pg@pass-1"}},
		{"postgres key=value", sqlprovider.Settings{Driver: "postgres", DSN: "host=db user=electd password='kv pass 2' dbname=electd"},
			[]string{"host=db user=electd password='kv pass 2' dbname=electd", "kv pass 2"}},
		{"mysql", sqlprovider.Settings{Driver: "mysql", DSN: "electd:my-pass-3@tcp(db:3306)/electd"},
			[]string{"electd:my-pass-3@tcp(db:3306)/electd", "my-pass-3"}},
		{"sqlite", sqlprovider.Settings{Driver: "sqlite", DSN: "/var/lib/electd/leases.db"},
			[]string{"/var/lib/electd/leases.db"}},
		{"unparsable postgres DSN is secret whole", sqlprovider.Settings{Driver: "postgres", DSN: "postgres://electd:pw-4@db:notaport/x"},
			[]string{"postgres://electd:pw-4@db:notaport/x"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.settings.Secrets()
			for _, w := range c.want {
				if !slices.Contains(got, w) {
					t.Errorf("Secrets() = %q, want it to hold %q", got, w)
				}
			}
		})
	}
}
