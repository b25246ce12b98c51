package datastore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/electd/electd/config"
)

func TestOpenRejects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	odd := filepath.Join(dir, "odd.json")
	if err := os.WriteFile(odd, []byte(`{"type": "gdch_service_account"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		settings any
		want     string
	}{
		{"settings of another type", &config.SQLSettings{}, "not *config.DatastoreSettings"},
		{"no project", &config.DatastoreSettings{}, "project_id is empty"},
		{"reserved kind", &config.DatastoreSettings{ProjectID: "p", Kind: "__kind__"}, "reserved"},
		{"bad namespace", &config.DatastoreSettings{ProjectID: "p", Namespace: "a b"}, "namespace"},
		{"missing credentials file", &config.DatastoreSettings{ProjectID: "p", CredentialsFile: filepath.Join(dir, "none.json")}, "no such file"},
		{"credentials of an unexpected type", &config.DatastoreSettings{ProjectID: "p", CredentialsFile: odd}, `type "gdch_service_account"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if s, ok := c.settings.(*config.DatastoreSettings); ok {
				// No emulator host: the credentials cases take the production path.
				_, err = newProvider(context.Background(), *s, nil, "")
			} else {
				var p any
				p, err = Open(context.Background(), config.Provider{Type: config.ProviderDatastore, Name: "d", Settings: c.settings}, nil)
				if p != nil {
					t.Fatalf("Open returned a provider %v with error %v", p, err)
				}
			}
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "datastore: ") {
				t.Fatalf("Open error %q, want it to start with \"datastore: \" and mention %q", err, c.want)
			}
		})
	}
}
