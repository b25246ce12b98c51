package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
)

// TestRestart kills the etcd server (SIGKILL, so only what it synced to disk
// survives) and starts it again on the same data directory and ports. While
// it is down every operation fails with a store error; once it is back the
// same clients reconnect, the held term and its value are still there, a
// Notify subscription made before the restart still fires, and tokens go on
// from where they were.
func TestRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cport, pport := teststore.MustFreePort(t), teststore.MustFreePort(t)
	endpoint, proc := teststore.StartEtcdAt(t, dir, cport, pport)
	s := Settings{Endpoints: []string{endpoint}, Prefix: randomPrefix(t)}
	a, b := open(t, s), open(t, s)
	ctx := context.Background()

	la, err := a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	la.Value = "slot-1"
	if err := a.Release(ctx, la); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if lb.Token != la.Token+1 || lb.Value != "slot-1" {
		t.Fatalf("before the restart: %+v, want token %d value slot-1", lb, la.Token+1)
	}

	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	hints := make(chan string, 100)
	if err := a.Notify(wctx, func(key string) {
		select {
		case hints <- key:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}

	ttlBefore := leaseLeft(t, b, "job")
	proc.Stop()
	down, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := a.Acquire(down, providers.AcquireRequest{Key: "job", Holder: "a", TTL: time.Minute}); err == nil || errors.Is(err, providers.ErrHeld) {
		t.Fatalf("Acquire while etcd is down: %v, want a store error", err)
	} else {
		t.Logf("while down: %v", err)
	}
	if _, err := b.Renew(down, lb); err == nil || errors.Is(err, providers.ErrLost) {
		t.Fatalf("Renew while etcd is down: %v, want a store error", err)
	}

	teststore.StartEtcdAt(t, dir, cport, pport)
	got, err := a.Observe(ctx, "job")
	if err != nil {
		t.Fatalf("Observe after the restart (same client): %v", err)
	}
	if got.Holder != "b" || got.Token != lb.Token || got.Value != "slot-1" {
		t.Fatalf("after the restart: %+v, want holder b token %d value slot-1", got, lb.Token)
	}
	// etcd restores leases from disk and, as the new leader, gives each its
	// full ttl again (plus an election timeout): never less than before.
	ttlAfter := leaseLeft(t, b, "job")
	t.Logf("etcd lease of the held term: %d s left before the kill, %d s after the restart", ttlBefore, ttlAfter)
	if ttlAfter < ttlBefore {
		t.Fatalf("the restart shortened the lease: %d s left before, %d s after", ttlBefore, ttlAfter)
	}
	if _, err := b.Renew(ctx, lb); err != nil {
		t.Fatalf("Renew of the term held across the restart: %v", err)
	}
	for len(hints) > 0 {
		<-hints
	}
	if err := b.Release(ctx, lb); err != nil {
		t.Fatal(err)
	}
	// changed("") may come too, when etcd ended the watch while it had no
	// leader; the Release itself must be heard as changed("job").
	for deadline, heard := time.After(providertest.NotifyWithin), false; !heard; {
		select {
		case k := <-hints:
			if k != "job" && k != "" {
				t.Fatalf("changed(%q), want changed(\"job\")", k)
			}
			heard = k == "job"
		case <-deadline:
			t.Fatal("the subscription made before the restart missed the Release after it")
		}
	}
	c := open(t, s) // a client that never saw the old server
	lc, err := c.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "c", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if lc.Token != lb.Token+1 {
		t.Fatalf("token after the restart %d, want %d", lc.Token, lb.Token+1)
	}
}

// leaseLeft is what etcd says is left of the etcd lease of key's term.
func leaseLeft(t *testing.T, p *Provider, key string) int64 {
	t.Helper()
	ctx := context.Background()
	cli, err := p.client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := stateOf(t, p, key)
	if !st.held {
		t.Fatalf("read %q: not held", key)
	}
	resp, err := cli.TimeToLive(ctx, st.leaseID)
	if err != nil {
		t.Fatal(err)
	}
	return resp.TTL
}

// stateOf reads both keys of key as the provider does.
func stateOf(t *testing.T, p *Provider, key string) state {
	t.Helper()
	ctx := context.Background()
	cli, err := p.client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.read(ctx, cli, key)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return st
}
