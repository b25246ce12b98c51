package providertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/electd/electd/providers"
)

// batch: AcquireMany, RenewMany and ReleaseMany of Options.BatchSize leases
// (more than one request of the store carries) judge each item as the
// single operations do, every edge case in one batch: a lease held by
// another (refused with its holder, token and Remaining), one already the
// caller's (a new term), one released with a value (the next token, the
// value carried), a key asked for twice (the repeat judged after the
// first), a key the store refuses (refused alone); then a RenewMany and a
// ReleaseMany with a lease lost meanwhile and one released already, and
// another holder's AcquireMany counting the tokens on.
func (s *suite) batch(t *testing.T) {
	ps := s.clients(t, 2)
	pa, pb := ps[0], ps[1]
	a, ok := providers.As[providers.Batcher](pa)
	if !ok {
		t.Log("no Batcher")
		return
	}
	b, _ := providers.As[providers.Batcher](pb)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := s.opts.BatchSize
	const ttl = longTTL
	const (
		theirs   = 0 // held by b
		mine     = 1 // already a's: a new term
		released = 2 // released with a value
	)
	repeat, invalid := n, n+1
	key := func(i int) string { return fmt.Sprintf("k-%04d", i) }
	held := MustAcquire(t, pb, key(theirs), "b", time.Minute)
	own := MustAcquire(t, pa, key(mine), "a", time.Minute)
	old := MustAcquire(t, pa, key(released), "a", time.Minute)
	old.Value = "carried"
	if err := pa.Release(ctx, old); err != nil {
		t.Fatal(err)
	}
	var reqs []providers.AcquireRequest
	for i := range n {
		reqs = append(reqs, providers.AcquireRequest{Key: key(i), Holder: "a", TTL: ttl})
	}
	reqs = append(reqs,
		providers.AcquireRequest{Key: key(4), Holder: "c", TTL: ttl}, // held by a by then
		providers.AcquireRequest{Key: s.opts.BadKey, Holder: "a", TTL: ttl},
	)
	start := time.Now()
	leases, errs := a.AcquireMany(ctx, reqs)
	t.Logf("AcquireMany of %d: %s", len(reqs), time.Since(start))
	if len(leases) != len(reqs) || len(errs) != len(reqs) {
		t.Fatalf("AcquireMany returned %d leases and %d errors for %d requests", len(leases), len(errs), len(reqs))
	}
	for i, l := range leases[:n] {
		err := errs[i]
		switch i {
		case theirs:
			var h *providers.HeldError
			if !errors.As(err, &h) || h.Holder != "b" || h.Token != held.Token {
				t.Fatalf("%s: %v, want held by b token %d", key(i), err, held.Token)
			}
			// A second of slack, as in Remaining: a store may judge expiry
			// a clock skew late (datastore) or round up to its second.
			if s.opts.NoBatchRemaining == "" && (h.Remaining <= 0 || h.Remaining > time.Minute+time.Second) {
				t.Fatalf("%s: held with Remaining %s, want within (0, 1m1s]", key(i), h.Remaining)
			}
		case mine:
			if err != nil || l.Token != own.Token+1 {
				t.Fatalf("%s, already a's: %+v, %v, want token %d", key(i), l, err, own.Token+1)
			}
		case released:
			if err != nil || l.Token != old.Token+1 || l.Value != "carried" {
				t.Fatalf("%s, released: %+v, %v, want token %d and the value", key(i), l, err, old.Token+1)
			}
		default:
			if err != nil || l.Token != 1 || l.Holder != "a" || l.Key != reqs[i].Key || l.TTL != ttl {
				t.Fatalf("%s: %+v, %v, want a first term", reqs[i].Key, l, err)
			}
		}
		if err == nil {
			if d := l.Expires.Sub(start); d < ttl-5*time.Second || d > ttl+5*time.Second {
				t.Fatalf("%s: expires %s after the start, ttl %s", l.Key, d, ttl)
			}
		}
	}
	if s.opts.NoBatchRemaining != "" {
		t.Log("no Remaining in a batch: " + s.opts.NoBatchRemaining)
	}
	var h *providers.HeldError
	if !errors.As(errs[repeat], &h) || h.Holder != "a" || h.Token != 1 {
		t.Fatalf("repeat of %s by c: %v, want held by a", key(4), errs[repeat])
	}
	if errs[invalid] == nil || errors.Is(errs[invalid], providers.ErrHeld) {
		t.Fatalf("key %q: %v, want a refusal", s.opts.BadKey, errs[invalid])
	}
	for i := range n {
		if o := MustObserve(t, pb, key(i)); i != theirs && (o.Holder != "a" || o.Token != leases[i].Token) {
			t.Fatalf("Observe %s after AcquireMany: %+v, want %+v", key(i), o, leases[i])
		}
	}

	// RenewMany: every lease of a, one of them lost meanwhile.
	mineNow, stolen := OneStolen(t, pa, pb, leases[:n], theirs)
	renewed, rerrs := a.RenewMany(ctx, mineNow)
	for i, l := range mineNow {
		if l.Key == stolen.Key {
			WantLost(t, "RenewMany of a lost lease", rerrs[i])
			continue
		}
		if rerrs[i] != nil || renewed[i].Token != l.Token || renewed[i].Value != l.Value || renewed[i].Expires.Before(l.Expires) {
			t.Fatalf("RenewMany %s: %+v, %v (was %+v)", l.Key, renewed[i], rerrs[i], l)
		}
	}

	// ReleaseMany: the lost lease and one released already answer ErrLost;
	// the others are free, their tokens and values kept.
	rel := append([]providers.Lease(nil), renewed...)
	for i := range rel {
		if mineNow[i].Key == stolen.Key {
			rel[i] = stolen
		}
	}
	if err := pa.Release(ctx, rel[0]); err != nil {
		t.Fatal(err)
	}
	relErrs := a.ReleaseMany(ctx, rel)
	for i, l := range rel {
		if l.Key == stolen.Key || i == 0 {
			WantLost(t, "ReleaseMany of "+l.Key+", not held", relErrs[i])
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
		if o := MustObserve(t, pb, l.Key); o.Holder != "" || o.Token != l.Token || o.Value != l.Value {
			t.Fatalf("Observe %s after ReleaseMany: %+v; want free, token %d, value %q", l.Key, o, l.Token, l.Value)
		}
	}

	// Another holder's batch after the release: the next tokens.
	last := map[string]uint64{held.Key: held.Token}
	for _, l := range rel {
		last[l.Key] = l.Token
	}
	breqs := append([]providers.AcquireRequest(nil), reqs[:20]...)
	for i := range breqs {
		breqs[i].Holder = "b"
	}
	again, errs := b.AcquireMany(ctx, breqs)
	for i, l := range again {
		want := last[breqs[i].Key] + 1
		if breqs[i].Key == stolen.Key {
			want = stolen.Token + 2 // b's term after a's release
		}
		if errs[i] != nil || l.Token != want {
			t.Fatalf("b's AcquireMany after ReleaseMany, %s: %+v, %v, want token %d", breqs[i].Key, l, errs[i], want)
		}
	}
}

// OneStolen returns a's leases but leases[theirs], each with the value
// "v-"+key, after a released the sixth of them and b took it over: a batch
// in which one lease was lost meanwhile, and that lease.
func OneStolen(t *testing.T, a, b providers.Provider, leases []providers.Lease, theirs int) (mine []providers.Lease, stolen providers.Lease) {
	t.Helper()
	for i, l := range leases {
		if i != theirs {
			l.Value = "v-" + l.Key
			mine = append(mine, l)
		}
	}
	stolen = mine[5]
	if err := a.Release(Context(t), stolen); err != nil {
		t.Fatal(err)
	}
	MustAcquire(t, b, stolen.Key, "b", time.Minute)
	return mine, stolen
}

// batchDown: with the store unreachable every item of every batch gets a
// store error, never a verdict or a lease.
func (s *suite) batchDown(t *testing.T, down providers.Batcher) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reqs := []providers.AcquireRequest{{Key: "a", Holder: "h", TTL: longTTL}, {Key: "b", Holder: "h", TTL: longTTL}}
	leases, errs := down.AcquireMany(ctx, reqs)
	for i, err := range errs {
		if err == nil || leases[i].Token != 0 || errors.Is(err, providers.ErrHeld) {
			t.Errorf("AcquireMany against a store that is down: request %d: %+v, %v, want a store error", i, leases[i], err)
		}
	}
	ls := []providers.Lease{{Key: "a", Holder: "h", Token: 1, TTL: longTTL}, {Key: "b", Holder: "h", Token: 1, TTL: longTTL}}
	_, errs = down.RenewMany(ctx, ls)
	for i, err := range errs {
		if err == nil || errors.Is(err, providers.ErrLost) {
			t.Errorf("RenewMany against a store that is down: lease %d: %v, want a store error", i, err)
		}
	}
	for i, err := range down.ReleaseMany(ctx, ls) {
		if err == nil || errors.Is(err, providers.ErrLost) {
			t.Errorf("ReleaseMany against a store that is down: lease %d: %v, want a store error", i, err)
		}
	}
}
