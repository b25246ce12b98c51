package etcd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
)

// TestSessionShared: the terms of one provider and ttl share one etcd
// lease, the terms of another ttl another, and another provider's terms
// are never on them.
func TestSessionShared(t *testing.T) {
	p, other := pairOnOwnEtcd(t)
	ctx := context.Background()
	leaseOf := func(p *Provider, key string) clientv3.LeaseID {
		t.Helper()
		st := stateOf(t, p, key)
		if !st.held {
			t.Fatalf("%s is not held", key)
		}
		return st.leaseID
	}
	for i := range 3 {
		if _, err := p.Acquire(ctx, fmt.Sprint("a", i), "a", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Acquire(ctx, "long", "a", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(ctx, "b", "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	a0, a1, a2 := leaseOf(p, "a0"), leaseOf(p, "a1"), leaseOf(p, "a2")
	if a0 != a1 || a1 != a2 {
		t.Errorf("one provider's terms of one ttl are on etcd leases %x, %x, %x; want one session", a0, a1, a2)
	}
	if l := leaseOf(p, "long"); l == a0 {
		t.Errorf("a term of another ttl is on the same etcd lease %x", l)
	}
	if b := leaseOf(other, "b"); b == a0 {
		t.Errorf("another provider's term is on this provider's session %x", b)
	}
}

// TestAbandonedReleaseSwept: a Release that fails leaves the key on the
// session, which the provider's other terms keep alive; the next RenewMany
// releases it, so another holder can take the job without waiting for this
// process to stop.
func TestAbandonedReleaseSwept(t *testing.T) {
	p, other := pairOnOwnEtcd(t)
	ctx := context.Background()
	stuck, err := p.Acquire(ctx, "stuck", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := p.Acquire(ctx, "kept", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.Release(done, stuck); err == nil || errors.Is(err, providers.ErrLost) {
		t.Fatalf("Release with a cancelled ctx: %v, want a store error", err)
	}
	if _, err := other.Acquire(ctx, "stuck", "b", time.Minute); !errors.Is(err, providers.ErrHeld) {
		t.Fatalf("Acquire after the failed Release: %v, want held (the key is still on a's session)", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, errs := p.RenewMany(ctx, []providers.Lease{kept}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		l, err := other.Acquire(ctx, "stuck", "b", time.Minute)
		if err == nil {
			if l.Token != stuck.Token+1 {
				t.Fatalf("b's term after the sweep: token %d, want %d", l.Token, stuck.Token+1)
			}
			break
		}
		if !errors.Is(err, providers.ErrHeld) || time.Now().After(deadline) {
			t.Fatalf("the abandoned term was not released after RenewMany: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The sweep released only the abandoned term.
	if o, err := other.Observe(ctx, "kept"); err != nil || o.Holder != "a" || o.Token != kept.Token {
		t.Fatalf("kept after the sweep: %+v, %v; want a's term %d", o, err, kept.Token)
	}
}

// TestCloseRevokesSessions: Close ends the provider's sessions, so a term
// it still held (a release that failed on the way out) is free at once,
// not after its ttl.
func TestCloseRevokesSessions(t *testing.T) {
	p, other := pairOnOwnEtcd(t)
	ctx := context.Background()
	if _, err := p.Acquire(ctx, "job", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(ctx, "job", "b", time.Minute); err != nil {
		t.Fatalf("Acquire right after the holder's Close: %v, want free", err)
	}
}

// TestSessionExpiredRenewed: when the session expired (the process was
// paused past its ttl) and nobody took the key, Renew puts the term on a
// new session, and new terms go there too.
func TestSessionExpiredRenewed(t *testing.T) {
	p, _ := pairOnOwnEtcd(t)
	ctx := context.Background()
	l, err := p.Acquire(ctx, "job", "a", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before := stateOf(t, p, "job")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if !stateOf(t, p, "job").held {
			break // etcd ended the session
		}
		if time.Now().After(deadline) {
			t.Fatal("the session did not expire")
		}
		time.Sleep(200 * time.Millisecond)
	}
	r, err := p.Renew(ctx, l)
	if err != nil || r.Token != l.Token {
		t.Fatalf("Renew after the session expired: %+v, %v; want the term back, token %d", r, err, l.Token)
	}
	if _, err := p.Acquire(ctx, "next", "a", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	after, next := stateOf(t, p, "job"), stateOf(t, p, "next")
	if after.leaseID == before.leaseID || next.leaseID != after.leaseID {
		t.Fatalf("etcd leases: before %x, after %x, next %x; want a new session shared by both", before.leaseID, after.leaseID, next.leaseID)
	}
}

// pairOnOwnEtcd starts an etcd for the calling test alone (which it marks
// parallel) and returns two providers on one prefix of it.
func pairOnOwnEtcd(t *testing.T) (*Provider, *Provider) {
	t.Helper()
	t.Parallel()
	endpoint, _ := teststore.StartEtcd(t)
	s := Settings{Endpoints: []string{endpoint}, Prefix: randomPrefix(t)}
	return open(t, s), open(t, s)
}
