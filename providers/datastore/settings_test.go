package datastore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		settings *Settings
		want     string
	}{
		{"no project", &Settings{}, "project_id"},
		{"reserved kind", &Settings{ProjectID: "p", Kind: "__kind__"}, "reserved"},
		{"bad namespace", &Settings{ProjectID: "p", Namespace: "a b"}, "namespace"},
		{"missing credentials file", &Settings{ProjectID: "p", CredentialsFile: filepath.Join(dir, "none.json")}, "no such file"},
		{"credentials of an unexpected type", &Settings{ProjectID: "p", CredentialsFile: odd}, `type "gdch_service_account"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			// No emulator host: the credentials cases take the production path.
			_, err := newProvider(context.Background(), *c.settings, nil, "")
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "datastore: ") {
				t.Fatalf("Open error %q, want it to start with \"datastore: \" and mention %q", err, c.want)
			}
		})
	}
}
