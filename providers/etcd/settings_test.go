package etcd

import (
	"slices"
	"testing"
)

func TestSecrets(t *testing.T) {
	s := Settings{Endpoints: []string{"127.0.0.1:2379"}, Username: "electd", Password: "etcd-pass-1"}
	if got := s.Secrets(); !slices.Contains(got, "etcd-pass-1") || slices.Contains(got, "electd") {
		t.Errorf("Secrets() = %q, want the password and not the username", got)
	}
}
