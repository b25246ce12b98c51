package datastore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
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
	la, err := a.Acquire(ctx, "job", "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Acquire(ctx, "job", "b", time.Minute)
	var h *providers.HeldError
	if !errors.As(err, &h) {
		t.Fatalf("Acquire of a held lease: %v", err)
	}
	if h.Remaining <= ClockSkew || h.Remaining > ttl+ClockSkew {
		t.Fatalf("Remaining right after a %s Acquire = %s, want in (%s, %s]", ttl, h.Remaining, ClockSkew, ttl+ClockSkew)
	}
	time.Sleep(h.Remaining + 10*time.Millisecond)
	lb, err := b.Acquire(ctx, "job", "b", time.Minute)
	if err != nil || lb.Token != la.Token+1 {
		t.Fatalf("Acquire after Remaining ran out: %+v, %v", lb, err)
	}
}

// TestBatch: AcquireMany, RenewMany and ReleaseMany judge each item as the
// single operations do, over more keys than one transaction takes.
func TestBatch(t *testing.T) {
	t.Parallel()
	ns := newNamespace()
	pa, pb := open(t, ns), open(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 120
	const ttl = 30 * time.Second
	const (
		theirs   = 0 // held by b
		mine     = 1 // already a's: a new term
		released = 2 // released with a value
		repeat   = n
		invalid  = n + 1
	)
	held, err := pb.Acquire(ctx, "k-000", "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	own, err := pa.Acquire(ctx, "k-001", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	old, err := pa.Acquire(ctx, "k-002", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	old.Value = "carried"
	if err := pa.Release(ctx, old); err != nil {
		t.Fatal(err)
	}
	var reqs []providers.AcquireRequest
	for i := range n {
		reqs = append(reqs, providers.AcquireRequest{Key: fmt.Sprintf("k-%03d", i), Holder: "a", TTL: ttl})
	}
	reqs = append(reqs,
		providers.AcquireRequest{Key: "k-004", Holder: "c", TTL: ttl},
		providers.AcquireRequest{Key: "__bad__", Holder: "a", TTL: ttl},
	)
	start := time.Now()
	leases, errs := pa.AcquireMany(ctx, reqs)
	t.Logf("AcquireMany of %d: %s (transactions of %d entities)", len(reqs), time.Since(start), pa.txSize())
	for i, l := range leases[:n] {
		err := errs[i]
		switch i {
		case theirs:
			var h *providers.HeldError
			if !errors.As(err, &h) || h.Holder != "b" || h.Token != held.Token || h.Remaining <= 0 {
				t.Fatalf("k-000: %v, want held by b token %d with a Remaining", err, held.Token)
			}
		case mine:
			if err != nil || l.Token != own.Token+1 {
				t.Fatalf("k-001: %+v, %v, want token %d", l, err, own.Token+1)
			}
		case released:
			if err != nil || l.Token != old.Token+1 || l.Value != "carried" {
				t.Fatalf("k-002: %+v, %v, want token %d and the value", l, err, old.Token+1)
			}
		default:
			if err != nil || l.Token != 1 || l.Holder != "a" || l.Key != reqs[i].Key || l.TTL != ttl {
				t.Fatalf("%s: %+v, %v, want a first term", reqs[i].Key, l, err)
			}
		}
	}
	var h *providers.HeldError
	if !errors.As(errs[repeat], &h) || h.Holder != "a" || h.Token != 1 {
		t.Fatalf("repeat of k-004 by c: %v, want held by a", errs[repeat])
	}
	if errs[invalid] == nil || errors.Is(errs[invalid], providers.ErrHeld) {
		t.Fatalf("reserved key: %v, want a refusal", errs[invalid])
	}
	for i := 0; i < n; i += 17 {
		o, err := pb.Observe(ctx, reqs[i].Key)
		if i != theirs && (err != nil || o.Holder != "a" || o.Token != leases[i].Token || !o.Expires.Equal(leases[i].Expires)) {
			t.Fatalf("Observe %s after AcquireMany: %+v, %v, want %+v", reqs[i].Key, o, err, leases[i])
		}
	}

	var mineNow []providers.Lease
	for i, l := range leases[:n] {
		if i != theirs {
			l.Value = "v-" + l.Key
			mineNow = append(mineNow, l)
		}
	}
	stolen := mineNow[5]
	if err := pa.Release(ctx, stolen); err != nil {
		t.Fatal(err)
	}
	if _, err := pb.Acquire(ctx, stolen.Key, "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	renewed, rerrs := pa.RenewMany(ctx, mineNow)
	for i, l := range mineNow {
		if l.Key == stolen.Key {
			if !errors.Is(rerrs[i], providers.ErrLost) {
				t.Fatalf("RenewMany of a lost lease: %v, want ErrLost", rerrs[i])
			}
			continue
		}
		if rerrs[i] != nil || renewed[i].Token != l.Token || renewed[i].Value != l.Value || renewed[i].Expires.Before(l.Expires) {
			t.Fatalf("RenewMany %s: %+v, %v (was %+v)", l.Key, renewed[i], rerrs[i], l)
		}
	}

	rel := append([]providers.Lease(nil), renewed...)
	for i := range rel {
		if mineNow[i].Key == stolen.Key {
			rel[i] = stolen
		}
	}
	if err := pa.Release(ctx, rel[0]); err != nil {
		t.Fatal(err)
	}
	relErrs := pa.ReleaseMany(ctx, rel)
	for i, l := range rel {
		if l.Key == stolen.Key || i == 0 {
			if !errors.Is(relErrs[i], providers.ErrLost) {
				t.Fatalf("ReleaseMany of %s, not held: %v, want ErrLost", l.Key, relErrs[i])
			}
			continue
		}
		if relErrs[i] != nil {
			t.Fatalf("ReleaseMany %s: %v", l.Key, relErrs[i])
		}
	}
	for i := 1; i < len(rel); i += 13 {
		l := rel[i]
		if l.Key == stolen.Key {
			continue
		}
		o, err := pb.Observe(ctx, l.Key)
		if err != nil || o.Holder != "" || o.Token != l.Token || o.Value != l.Value {
			t.Fatalf("Observe %s after ReleaseMany: %+v, %v; want free, token %d, value %q", l.Key, o, err, l.Token, l.Value)
		}
	}
}

// TestBatchDown: with the store unreachable every item gets a store error,
// never a verdict or a success.
func TestBatchDown(t *testing.T) {
	t.Parallel()
	p, err := newProvider(context.Background(), Settings{ProjectID: testProject}, hclog.NewNullLogger(), teststore.Addr(teststore.MustFreePort(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leases, errs := p.AcquireMany(ctx, []providers.AcquireRequest{{Key: "a", Holder: "h", TTL: time.Minute}, {Key: "b", Holder: "h", TTL: time.Minute}})
	for i, err := range errs {
		if err == nil || leases[i].Token != 0 || errors.Is(err, providers.ErrHeld) {
			t.Fatalf("AcquireMany with the store down: %+v, %v", leases[i], err)
		}
	}
	ls := []providers.Lease{{Key: "a", Holder: "h", Token: 1, TTL: time.Minute}}
	if _, errs := p.RenewMany(ctx, ls); errs[0] == nil || errors.Is(errs[0], providers.ErrLost) {
		t.Fatalf("RenewMany with the store down: %v", errs[0])
	}
	if errs := p.ReleaseMany(ctx, ls); errs[0] == nil || errors.Is(errs[0], providers.ErrLost) {
		t.Fatalf("ReleaseMany with the store down: %v", errs[0])
	}
}
