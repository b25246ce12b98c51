package providertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/providers"
)

// Open returns a new client made by newProvider (a store's New) with
// settings s and a null logger, failing t when it cannot be made. The
// caller closes it; a Factory's clients are closed by the suite.
func Open[S any, P providers.Provider](t *testing.T, newProvider func(context.Context, S, hclog.Logger) (P, error), s S) P {
	t.Helper()
	p, err := newProvider(context.Background(), s, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Case is one test of the cases that share a store: fn gets the store's
// address.
type Case struct {
	Name string
	Fn   func(t *testing.T, addr string)
}

// RunShared runs cases as parallel subtests of t on the one store at addr,
// each under a namespace of its own.
func RunShared(t *testing.T, addr string, cases []Case) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			c.Fn(t, addr)
		})
	}
}

// UniqueName is a name for t's own namespace on a shared store: t's name,
// with "/" and " " made "_", and a random suffix so that runs never meet.
func UniqueName(t *testing.T) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "-" + hex.EncodeToString(b)
}

// Refused has a take key for ttl, then b ask for it; it returns a's lease
// and the *HeldError that refused b, whose Remaining the store's own tests
// bound as tightly as the store can.
func Refused(t *testing.T, a, b providers.Provider, key string, ttl time.Duration) (providers.Lease, *providers.HeldError) {
	t.Helper()
	la := MustAcquire(t, a, key, "a", ttl)
	_, err := b.Acquire(Context(t), providers.AcquireRequest{Key: key, Holder: "b", TTL: time.Minute})
	var h *providers.HeldError
	if !errors.As(err, &h) {
		t.Fatalf("Acquire of a held lease: %v", err)
	}
	return la, h
}
