package redis_test

import (
	"slices"
	"testing"

	"github.com/electd/electd/providers/redis"
)

func TestSecrets(t *testing.T) {
	s := redis.Settings{Addresses: []string{"127.0.0.1:6379"}, Username: "electd", Password: "redis-pass-1"}
	if got := s.Secrets(); !slices.Contains(got, "redis-pass-1") || slices.Contains(got, "electd") {
		t.Errorf("Secrets() = %q, want the password and not the username", got)
	}
}
