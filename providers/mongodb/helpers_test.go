package mongodb_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/electd/electd/providers"
)

// Small assertions shared by this package's own tests (the conformance
// cases themselves are providertest's).

const (
	longTTL  = 30 * time.Second
	shortTTL = time.Second
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustAcquire(t *testing.T, p providers.Provider, key, holder string, ttl time.Duration) providers.Lease {
	t.Helper()
	l, err := p.Acquire(ctxT(t), key, holder, ttl)
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", key, holder, err)
	}
	if l.Key != key || l.Holder != holder || l.Token == 0 || l.TTL != ttl {
		t.Fatalf("Acquire(%q, %q) = %+v: want key, holder, ttl echoed and a token > 0", key, holder, l)
	}
	return l
}

func mustObserve(t *testing.T, p providers.Provider, key string) providers.Lease {
	t.Helper()
	l, err := p.Observe(ctxT(t), key)
	if err != nil {
		t.Fatalf("Observe(%q): %v", key, err)
	}
	return l
}

func wantHeld(t *testing.T, err error, key, holder string, token uint64) {
	t.Helper()
	var he *providers.HeldError
	if !errors.Is(err, providers.ErrHeld) || !errors.As(err, &he) {
		t.Fatalf("Acquire(%q) error = %v, want a *HeldError (ErrHeld)", key, err)
	}
	if he.Key != key || he.Holder != holder || he.Token != token {
		t.Fatalf("HeldError = {Key %q Holder %q Token %d}, want {%q %q %d}", he.Key, he.Holder, he.Token, key, holder, token)
	}
}

func wantLost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, providers.ErrLost) {
		t.Fatalf("%s: error = %v, want ErrLost", what, err)
	}
}

// sleepPast sleeps until d after since, plus a margin for clock skew.
func sleepPast(since time.Time, d time.Duration) {
	time.Sleep(time.Until(since.Add(d + d/2 + 200*time.Millisecond)))
}
