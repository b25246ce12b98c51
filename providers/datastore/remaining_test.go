package datastore

import (
	"context"
	"testing"
	"time"

	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
)

// TestRemaining: a refused Acquire says how long until this node would take
// the lease, by the judgement Acquire makes (this node's clock against the
// written expiry + ClockSkew); a candidate that waits it out takes it.
func TestRemaining(t *testing.T) {
	t.Parallel()
	ns := newNamespace()
	a, b := open(t, ns), open(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ttl = time.Second
	la, h := providertest.Refused(t, a, b, "job", ttl)
	if h.Remaining <= ClockSkew || h.Remaining > ttl+ClockSkew {
		t.Fatalf("Remaining right after a %s Acquire = %s, want in (%s, %s]", ttl, h.Remaining, ClockSkew, ttl+ClockSkew)
	}
	time.Sleep(h.Remaining + 10*time.Millisecond)
	lb, err := b.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: time.Minute})
	if err != nil || lb.Token != la.Token+1 {
		t.Fatalf("Acquire after Remaining ran out: %+v, %v", lb, err)
	}
}
