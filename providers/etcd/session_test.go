package etcd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

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
		if _, err := p.Acquire(ctx, providers.AcquireRequest{Key: fmt.Sprint("a", i), Holder: "a", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Acquire(ctx, providers.AcquireRequest{Key: "long", Holder: "a", TTL: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(ctx, providers.AcquireRequest{Key: "b", Holder: "b", TTL: time.Minute}); err != nil {
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
	kept, err := p.Acquire(ctx, providers.AcquireRequest{Key: "kept", Holder: "a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	stuck := abandonStuck(t, p)
	if _, err := other.Acquire(ctx, providers.AcquireRequest{Key: "stuck", Holder: "b", TTL: time.Minute}); !errors.Is(err, providers.ErrHeld) {
		t.Fatalf("Acquire after the failed Release: %v, want held (the key is still on a's session)", err)
	}
	waitSwept(t, other, stuck, 30*time.Second, func() {
		if _, errs := p.RenewMany(ctx, []providers.Lease{kept}); errs[0] != nil {
			t.Fatal(errs[0])
		}
	})
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
	if _, err := p.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: time.Minute}); err != nil {
		t.Fatalf("Acquire right after the holder's Close: %v, want free", err)
	}
}

// TestSessionExpiredRenewed: when the session expired (the process was
// paused past its ttl) and nobody took the key, Renew puts the term on a
// new session, and new terms go there too.
func TestSessionExpiredRenewed(t *testing.T) {
	p, _ := pairOnOwnEtcd(t)
	ctx := context.Background()
	l, err := p.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: 2 * time.Second})
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
	if _, err := p.Acquire(ctx, providers.AcquireRequest{Key: "next", Holder: "a", TTL: 2 * time.Second}); err != nil {
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
	_, s := ownServer(t)
	return open(t, s), open(t, s)
}

// TestCandidateSessionReady: a candidate that was refused gets a session in
// the background and keeps it alive while it waits, with no term on it, so
// that when the key comes free its Acquire grants nothing (a write to
// etcd's log, after the read). Once a term is on the session it is no
// longer kept for it: a term that is not renewed ends at its ttl.
func TestCandidateSessionReady(t *testing.T) {
	t.Parallel()
	endpoint, s := ownServer(t)
	holder, cand := open(t, s), open(t, s)
	ctx := context.Background()
	const ttl = 2 * time.Second
	l, err := holder.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cand.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: ttl}); !errors.Is(err, providers.ErrHeld) {
		t.Fatalf("candidate's first Acquire: %v, want held", err)
	}
	time.Sleep(3 * ttl) // the session made ready must outlive its ttl
	if err := holder.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	before := scrape(t, endpoint)
	if _, err := cand.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	// No grant, and the Acquire's keep-alive: the session's own
	// keep-alives go on beside it, and one may fall in the same moment.
	if d := scrape(t, endpoint).sub(before); d.started["LeaseGrant"] != 0 || d.msgs["LeaseKeepAlive"] < 1 {
		t.Errorf("the candidate's Acquire sent %s; want a keep-alive and no grant: its session was ready", d)
	}
	deadline := time.Now().Add(ttl + 5*time.Second) // etcd expires leases in a pass every 500 ms
	for stateOf(t, cand, "job").held {
		if time.Now().After(deadline) {
			t.Fatal("a term that was not renewed outlived its ttl by 5 s: its session is still kept alive")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAbandonedSweptWhileIdle: the release of a provider's only term fails;
// with no renewal to start a sweep, the keeper of idle sessions starts it,
// and does not keep the session (with the key on it) alive meanwhile.
func TestAbandonedSweptWhileIdle(t *testing.T) {
	p, other := pairOnOwnEtcd(t)
	stuck := abandonStuck(t, p)
	waitSwept(t, other, stuck, 20*time.Second, func() {}) // well within the minute's ttl
}

// abandonStuck acquires "stuck" for a minute on p and releases it with a
// cancelled ctx: the release fails, and the key stays on p's session.
func abandonStuck(t *testing.T, p *Provider) providers.Lease {
	t.Helper()
	ctx := context.Background()
	stuck, err := p.Acquire(ctx, providers.AcquireRequest{Key: "stuck", Holder: "a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.Release(done, stuck); err == nil || errors.Is(err, providers.ErrLost) {
		t.Fatalf("Release with a cancelled ctx: %v, want a store error", err)
	}
	return stuck
}

// waitSwept calls each, then tries to take "stuck" on other, until it can,
// with the token after stuck's: the abandoned term was released.
func waitSwept(t *testing.T, other *Provider, stuck providers.Lease, within time.Duration, each func()) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		each()
		l, err := other.Acquire(context.Background(), providers.AcquireRequest{Key: "stuck", Holder: "b", TTL: time.Minute})
		if err == nil {
			if l.Token != stuck.Token+1 {
				t.Fatalf("b's term after the sweep: token %d, want %d", l.Token, stuck.Token+1)
			}
			return
		}
		if !errors.Is(err, providers.ErrHeld) || time.Now().After(deadline) {
			t.Fatalf("the abandoned term was not released within %s: %v", within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReleaseWithoutRead: releasing a term this provider wrote is one
// transaction, guarded by the record as it wrote it. When the record is not
// byte for byte what it wrote (here rewritten by hand with the same holder
// and token), Release reads both keys and decides as before.
func TestReleaseWithoutRead(t *testing.T) {
	t.Parallel()
	endpoint, s := ownServer(t)
	p, other := open(t, s), open(t, s)
	ctx := context.Background()
	for _, rewrite := range []bool{false, true} {
		l, err := p.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		if rewrite {
			cli, err := p.client(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cli.Put(ctx, p.recordKey("job"), fmt.Sprintf(`{"token":%d,"holder":"a","value":""}`, l.Token)); err != nil {
				t.Fatal(err)
			}
			want = 3 // the guarded release, the read, the release after it
		}
		l.Value = fmt.Sprint("rewritten ", rewrite)
		before := scrape(t, endpoint)
		if err := p.Release(ctx, l); err != nil {
			t.Fatalf("rewritten %v: Release: %v", rewrite, err)
		}
		if d := scrape(t, endpoint).sub(before); d.started["Txn"] != want {
			t.Errorf("rewritten %v: Release sent %s, want %d transactions", rewrite, d, want)
		}
		o, err := other.Observe(ctx, "job")
		if err != nil || o.Holder != "" || o.Token != l.Token || o.Value != l.Value {
			t.Fatalf("rewritten %v: after Release: %+v, %v; want free, token %d, value %q", rewrite, o, err, l.Token, l.Value)
		}
	}
}

// TestCloseRevokesOnlySessionsWithKeys: Close revokes the session that
// still carries a term (the term is free at once) and leaves the one whose
// terms were all released to expire by itself: a revoke is a write to
// etcd's log, made just as the next leader acquires what was released.
func TestCloseRevokesOnlySessionsWithKeys(t *testing.T) {
	t.Parallel()
	endpoint, s := ownServer(t)
	p, other := open(t, s), open(t, s)
	ctx := context.Background()
	if _, err := p.Acquire(ctx, providers.AcquireRequest{Key: "kept", Holder: "a", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	done, err := p.Acquire(ctx, providers.AcquireRequest{Key: "done", Holder: "a", TTL: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Release(ctx, done); err != nil {
		t.Fatal(err)
	}
	before := scrape(t, endpoint)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if d := scrape(t, endpoint).sub(before); d.started["LeaseRevoke"] != 1 {
		t.Errorf("Close sent %s; want one LeaseRevoke, of the session that carries a term", d)
	}
	if _, err := other.Acquire(ctx, providers.AcquireRequest{Key: "kept", Holder: "b", TTL: time.Minute}); err != nil {
		t.Fatalf("Acquire right after the holder's Close: %v, want free", err)
	}
}

// An Acquire whose write had an unknown outcome abandons its term for a
// sweep to release. When the write had not landed, the retry reads the
// same record and wins the key with the same token: the sweep must leave
// that live term alone. (It released it once, in the cluster suite, and
// another agent took the job while this one still ran it.) The abandon is
// the one Acquire makes after a failed Txn, made here directly.
func TestAbandonedAcquireRetriedKeepsTheTerm(t *testing.T) {
	_, s := ownServer(t)
	p := open(t, s)
	ctx := context.Background()
	p.abandon(providers.Lease{Key: "job", Holder: "node-1", Token: 1})
	l, err := p.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "node-1", TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if l.Token != 1 {
		t.Fatalf("the retried Acquire won token %d, want the abandoned write's 1", l.Token)
	}
	// A renewal starts the sweep of what is abandoned, beside itself.
	if _, errs := p.RenewMany(ctx, []providers.Lease{l}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.smu.Lock()
		done := !p.sweeping && len(p.abandoned) == 0
		p.smu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the abandoned term is neither swept nor forgotten within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	got, err := p.Observe(ctx, "job")
	if err != nil || got.Holder != "node-1" || got.Token != 1 {
		t.Fatalf("after the sweep: holder %q token %d (error %v); want node-1's live term, token 1", got.Holder, got.Token, err)
	}
	if _, err := p.Renew(ctx, l); err != nil {
		t.Fatalf("the live term does not renew after the sweep: %v", err)
	}
}
