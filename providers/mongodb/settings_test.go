package mongodb

import (
	"slices"
	"testing"
)

// The URI is secret whole, and so is its password, as written and decoded,
// in every form of URI (replica set host lists, which net/url refuses, and
// mongodb+srv, which must not be looked up).
func TestSecrets(t *testing.T) {
	for _, c := range []struct {
		name, uri string
		want      []string
	}{
		{"one host", "mongodb://electd:mongo-pass-1@db:27017/?replicaSet=rs0", []string{"mongo-pass-1"}},
		{"host list", "mongodb://electd:mongo%2Fpass-2@db1:27017,db2:27017,db3/electd?replicaSet=rs0", []string{"mongo%2Fpass-2", "mongo/pass-2"}},
		{"srv", "mongodb+srv://electd:mongo-pass-3@cluster.example.com/?tls=true", []string{"mongo-pass-3"}},
		{"key file password", "mongodb://db/?tls=true&tlsCertificateKeyFile=/k.pem&tlsCertificateKeyFilePassword=key-pass-4", []string{"key-pass-4"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := (&Settings{URI: c.uri}).Secrets()
			for _, w := range append(c.want, c.uri) {
				if !slices.Contains(got, w) {
					t.Errorf("Secrets() = %q, want it to hold %q", got, w)
				}
			}
		})
	}
}
