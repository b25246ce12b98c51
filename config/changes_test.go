package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChangedAttributes: each edit of a job is named by the attributes it
// changes, and an edit of layout or comments by none (while the
// fingerprint, which counts the text, changes).
func TestChangedAttributes(t *testing.T) {
	base := `
provider "sql" "main" {
  driver = "sqlite"
  dsn    = "leases.db"
}
job "a" {
  ttl = "30s"
  run {
    command = ["sync", "--token", "${event.token}"]
    env     = { REGION = env("ELECTD_TEST_CHG_REGION", "eu") }
  }
  on_demoted {
    exec { command = ["logger", "demoted"] }
    webhook { url = "https://hooks.example.com/x" }
  }
}
`
	cases := []struct {
		name     string
		old, new string
		env      string // ELECTD_TEST_CHG_REGION for the new load, "" for unset
		want     string // ChangedAttributes, comma-separated
		settings string // ChangedSettings of the provider
	}{
		{name: "same text", want: ""},
		{name: "layout and comments", old: `    command = ["sync", "--token", "${event.token}"]`,
			new: "    # the sync\n    command = [\n      \"sync\",\n      \"--token\",\n      \"${event.token}\"\n    ]", want: ""},
		{name: "ttl", old: `ttl = "30s"`, new: `ttl = "45s"`, want: "ttl"},
		{name: "a command that uses the event", old: `"--token", "${event.token}"`, new: `"--token", "${event.job}"`, want: "run.command"},
		{name: "env read by an attribute", env: "us", want: "run.env"},
		{name: "env set to its default", env: "eu", want: "run.env"},
		{name: "a block added", old: `  ttl = "30s"`, new: "  ttl = \"30s\"\n  health {\n    command = [\"true\"]\n  }", want: "health"},
		{name: "a hook's second action", old: `https://hooks.example.com/x`, new: `https://hooks.example.com/y`, want: "on_demoted.webhook[0].url"},
		{name: "an action added", old: `    exec { command = ["logger", "demoted"] }`,
			new: "    exec { command = [\"logger\", \"demoted\"] }\n    exec { command = [\"true\"] }", want: "on_demoted.exec[1]"},
		{name: "two attributes", old: `ttl = "30s"`, new: "ttl = \"20s\"\n  mode = \"leader\"", want: "mode,ttl"},
		{name: "the provider's settings", old: `dsn    = "leases.db"`, new: `dsn    = "other.db"`, want: "", settings: "dsn"},
	}
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			os.Unsetenv("ELECTD_TEST_CHG_REGION")
			before := load(t, write("old.hcl", base))
			src := strings.Replace(base, tc.old, tc.new, 1)
			if tc.env != "" {
				t.Setenv("ELECTD_TEST_CHG_REGION", tc.env)
			}
			after := load(t, write("new.hcl", src))
			got := strings.Join(ChangedAttributes(job(t, before, "a"), job(t, after, "a")), ",")
			if got != tc.want {
				t.Errorf("ChangedAttributes = %q, want %q", got, tc.want)
			}
			if got := strings.Join(ChangedSettings(before.Providers[0], after.Providers[0]), ","); got != tc.settings {
				t.Errorf("ChangedSettings = %q, want %q", got, tc.settings)
			}
			sameFP := job(t, before, "a").Fingerprint == job(t, after, "a").Fingerprint
			if sameFP != (src == base && tc.env == "") {
				t.Errorf("fingerprint unchanged = %v, for a change %q", sameFP, tc.name)
			}
		})
	}
}
