package mongodb_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
)

// runSingleClient is providertest.Run without ConcurrentAcquire, for a store
// that is right for one client at a time but not atomic under racing
// writes (FerretDB v1). The cases and their assertions mirror providertest's
// (same names); providertest has no option to leave the race out yet.
func runSingleClient(t *testing.T, factory providertest.Factory, unreachable func(*testing.T) providers.Provider) {
	c := &cases{factory: factory, unreachable: unreachable}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"Exclusivity", c.exclusivity},
		{"ReacquireNewTerm", c.reacquire},
		{"Renew", c.renew},
		{"RenewAfterLoss", c.renewAfterLoss},
		{"RenewAfterExpiryNotTaken", c.renewAfterExpiry},
		{"Release", c.release},
		{"Expiry", c.expiry},
		{"TokensIncrease", c.tokensIncrease},
		{"KeysIndependent", c.keysIndependent},
		{"Observe", c.observe},
		{"Value", c.value},
		{"ContextCancelled", c.cancelled},
		{"StoreDown", c.storeDown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t)
		})
	}
}

const (
	longTTL  = 30 * time.Second
	shortTTL = time.Second
)

type cases struct {
	factory     providertest.Factory
	unreachable func(*testing.T) providers.Provider
}

func (c *cases) clients(t *testing.T, n int) []providers.Provider {
	t.Helper()
	open := c.factory(t)
	ps := make([]providers.Provider, n)
	for i := range ps {
		p := open(t)
		ps[i] = p
		t.Cleanup(func() { _ = p.Close() })
	}
	return ps
}

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

func (c *cases) exclusivity(t *testing.T) {
	ps := c.clients(t, 2)
	a := mustAcquire(t, ps[0], "job", "a", longTTL)
	_, err := ps[1].Acquire(ctxT(t), "job", "b", longTTL)
	wantHeld(t, err, "job", "a", a.Token)
	if got := mustObserve(t, ps[1], "job"); got.Holder != "a" || got.Token != a.Token {
		t.Fatalf("Observe after refused Acquire = %+v, want holder a token %d", got, a.Token)
	}
}

func (c *cases) reacquire(t *testing.T) {
	ps := c.clients(t, 1)
	a1 := mustAcquire(t, ps[0], "job", "a", longTTL)
	a2 := mustAcquire(t, ps[0], "job", "a", longTTL)
	if a2.Token != a1.Token+1 {
		t.Fatalf("re-acquire token = %d, want %d (a new term)", a2.Token, a1.Token+1)
	}
	if got := mustObserve(t, ps[0], "job"); got.Holder != "a" || got.Token != a2.Token {
		t.Fatalf("Observe = %+v, want holder a token %d", got, a2.Token)
	}
}

func (c *cases) renew(t *testing.T) {
	ps := c.clients(t, 2)
	a := mustAcquire(t, ps[0], "job", "a", longTTL)
	time.Sleep(20 * time.Millisecond) // BSON dates have millisecond precision
	r, err := ps[0].Renew(ctxT(t), a)
	if err != nil {
		t.Fatalf("Renew by holder: %v", err)
	}
	if r.Token != a.Token || r.Holder != "a" || !r.Expires.After(a.Expires) {
		t.Fatalf("Renew = %+v, want token %d unchanged and an expiry after %v", r, a.Token, a.Expires)
	}
	if got := mustObserve(t, ps[1], "job"); !got.Expires.After(a.Expires) || got.Token != a.Token || got.Holder != "a" {
		t.Fatalf("Observe after Renew = %+v, want holder a, token %d, expiry after %v", got, a.Token, a.Expires)
	}
	for _, tc := range []struct {
		what  string
		lease providers.Lease
	}{
		{"a wrong holder", providers.Lease{Key: "job", Holder: "b", Token: a.Token, TTL: longTTL}},
		{"a stale token", providers.Lease{Key: "job", Holder: "a", Token: a.Token - 1, TTL: longTTL}},
		{"a token never issued", providers.Lease{Key: "job", Holder: "a", Token: a.Token + 1, TTL: longTTL}},
		{"a key never acquired", providers.Lease{Key: "never", Holder: "a", Token: 1, TTL: longTTL}},
	} {
		_, err := ps[1].Renew(ctxT(t), tc.lease)
		wantLost(t, "Renew with "+tc.what, err)
	}
	if got := mustObserve(t, ps[1], "job"); got.Holder != "a" || got.Token != a.Token {
		t.Fatalf("Observe after refused renews = %+v, want holder a token %d", got, a.Token)
	}
}

func (c *cases) renewAfterLoss(t *testing.T) {
	ps := c.clients(t, 2)
	start := time.Now()
	a := mustAcquire(t, ps[0], "job", "a", shortTTL)
	sleepPast(start, shortTTL)
	b := mustAcquire(t, ps[1], "job", "b", longTTL)
	if b.Token != a.Token+1 {
		t.Fatalf("token after expiry = %d, want %d", b.Token, a.Token+1)
	}
	_, err := ps[0].Renew(ctxT(t), a)
	wantLost(t, "Renew after the lease expired and was taken", err)
	wantLost(t, "Release after the lease expired and was taken", ps[0].Release(ctxT(t), a))
	if got := mustObserve(t, ps[0], "job"); got.Holder != "b" || got.Token != b.Token {
		t.Fatalf("Observe = %+v, want holder b token %d", got, b.Token)
	}
}

func (c *cases) renewAfterExpiry(t *testing.T) {
	ps := c.clients(t, 1)
	start := time.Now()
	a := mustAcquire(t, ps[0], "job", "a", shortTTL)
	sleepPast(start, shortTTL)
	if got := mustObserve(t, ps[0], "job"); got.Holder != "" {
		t.Fatalf("Observe after expiry = %+v, want holder \"\"", got)
	}
	a.TTL = longTTL
	r, err := ps[0].Renew(ctxT(t), a)
	if err != nil {
		t.Fatalf("Renew after expiry, not taken: %v (holder and token still match: must succeed)", err)
	}
	if r.Token != a.Token {
		t.Fatalf("Renew token = %d, want %d", r.Token, a.Token)
	}
	if got := mustObserve(t, ps[0], "job"); got.Holder != "a" || got.Token != a.Token {
		t.Fatalf("Observe after renewing an expired lease = %+v, want holder a token %d", got, a.Token)
	}
}

func (c *cases) release(t *testing.T) {
	ps := c.clients(t, 2)
	a := mustAcquire(t, ps[0], "job", "a", longTTL)
	other := a
	other.Holder = "b"
	wantLost(t, "Release by another holder", ps[1].Release(ctxT(t), other))
	stale := a
	stale.Token--
	wantLost(t, "Release with a stale token", ps[0].Release(ctxT(t), stale))
	if got := mustObserve(t, ps[1], "job"); got.Holder != "a" || got.Token != a.Token {
		t.Fatalf("Observe after refused releases = %+v, want holder a token %d", got, a.Token)
	}
	if err := ps[0].Release(ctxT(t), a); err != nil {
		t.Fatalf("Release by holder: %v", err)
	}
	if got := mustObserve(t, ps[1], "job"); got.Holder != "" || got.Token != a.Token {
		t.Fatalf("Observe after Release = %+v, want holder \"\" and token %d kept (record never deleted)", got, a.Token)
	}
	wantLost(t, "second Release", ps[0].Release(ctxT(t), a))
	b := mustAcquire(t, ps[1], "job", "b", longTTL)
	if b.Token != a.Token+1 {
		t.Fatalf("token after release = %d, want %d", b.Token, a.Token+1)
	}
}

func (c *cases) expiry(t *testing.T) {
	ps := c.clients(t, 2)
	start := time.Now()
	a := mustAcquire(t, ps[0], "job", "a", shortTTL)
	_, err := ps[1].Acquire(ctxT(t), "job", "b", longTTL)
	if elapsed := time.Since(start); elapsed < shortTTL/2 {
		wantHeld(t, err, "job", "a", a.Token)
	} else {
		t.Logf("inconclusive: the check before expiry took %s of a %s ttl", elapsed, shortTTL)
	}
	sleepPast(start, shortTTL)
	if got := mustObserve(t, ps[1], "job"); got.Holder != "" || got.Token != a.Token {
		t.Fatalf("Observe after expiry = %+v, want holder \"\" token %d", got, a.Token)
	}
	b := mustAcquire(t, ps[1], "job", "b", longTTL)
	if b.Token != a.Token+1 {
		t.Fatalf("token after expiry = %d, want %d", b.Token, a.Token+1)
	}
}

func (c *cases) tokensIncrease(t *testing.T) {
	open := c.factory(t)
	a, b := open(t), open(t)
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	var last uint64
	step := func(what string, l providers.Lease) {
		t.Helper()
		if last != 0 && l.Token != last+1 {
			t.Fatalf("%s: token %d, want %d", what, l.Token, last+1)
		}
		last = l.Token
	}
	l := mustAcquire(t, a, "job", "a", longTTL)
	step("first acquire", l)
	if err := a.Release(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	step("acquire after release", mustAcquire(t, b, "job", "b", shortTTL))
	sleepPast(time.Now(), shortTTL)
	step("acquire after expiry", mustAcquire(t, a, "job", "a", longTTL))
	if err := a.Close(); err != nil { // the holder restarts: a new client, the same name
		t.Fatalf("Close: %v", err)
	}
	a2 := open(t)
	t.Cleanup(func() { _ = a2.Close() })
	step("acquire by the restarted holder", mustAcquire(t, a2, "job", "a", longTTL))
}

func (c *cases) keysIndependent(t *testing.T) {
	ps := c.clients(t, 2)
	k1 := mustAcquire(t, ps[0], "key1", "a", longTTL)
	k2 := mustAcquire(t, ps[1], "key2", "b", longTTL)
	if got := mustObserve(t, ps[0], "key1"); got.Holder != "a" || got.Token != k1.Token {
		t.Fatalf("key1 = %+v after acquiring key2", got)
	}
	if err := ps[1].Release(ctxT(t), k2); err != nil {
		t.Fatal(err)
	}
	if got := mustObserve(t, ps[0], "key1"); got.Holder != "a" {
		t.Fatalf("key1 = %+v after releasing key2", got)
	}
	_, err := ps[1].Acquire(ctxT(t), "key1", "b", longTTL)
	wantHeld(t, err, "key1", "a", k1.Token)
	for _, k := range []string{"KEY1", "key1 ", "key", "$key1", "key1.x"} {
		if l := mustAcquire(t, ps[1], k, "b", longTTL); l.Token != 1 {
			t.Fatalf("key %q: first token %d, want 1 (a distinct key)", k, l.Token)
		}
	}
}

func (c *cases) observe(t *testing.T) {
	ps := c.clients(t, 2)
	if got := mustObserve(t, ps[0], "never"); got != (providers.Lease{Key: "never"}) {
		t.Fatalf("Observe of a key never acquired = %+v, want a zero Lease with Key", got)
	}
	a := mustAcquire(t, ps[0], "job", "a", longTTL)
	got := mustObserve(t, ps[1], "job")
	if got.Key != "job" || got.Holder != "a" || got.Token != a.Token {
		t.Fatalf("Observe = %+v, want holder a token %d", got, a.Token)
	}
	if !got.Expires.Equal(a.Expires) {
		t.Fatalf("Observe expiry %v, Acquire said %v", got.Expires, a.Expires)
	}
	if d := time.Until(got.Expires); d < longTTL-10*time.Second || d > longTTL+10*time.Second {
		t.Fatalf("expiry is %s away, want about %s", d, longTTL)
	}
}

func (c *cases) value(t *testing.T) {
	ps := c.clients(t, 2)
	a := mustAcquire(t, ps[0], "job", "a", longTTL)
	if a.Value != "" {
		t.Fatalf("first Acquire value = %q, want \"\"", a.Value)
	}
	// A value that looks like an expression must be stored as it is (the
	// pipeline path wraps it in $literal).
	a.Value = "$$NOW"
	r, err := ps[0].Renew(ctxT(t), a)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustObserve(t, ps[1], "job"); r.Value != "$$NOW" || got.Value != "$$NOW" {
		t.Fatalf("value after Renew: returned %q, observed %q, want $$NOW", r.Value, got.Value)
	}
	tooLong := r
	tooLong.Value = strings.Repeat("x", providers.MaxValueLen+1)
	if _, err := ps[0].Renew(ctxT(t), tooLong); err == nil || errors.Is(err, providers.ErrLost) {
		t.Fatalf("Renew with a %d-byte value: error %v, want a value error (not ErrLost)", len(tooLong.Value), err)
	}
	if err := ps[0].Release(ctxT(t), tooLong); err == nil || errors.Is(err, providers.ErrLost) {
		t.Fatalf("Release with a %d-byte value: error %v, want a value error", len(tooLong.Value), err)
	}
	full := r
	full.Value = strings.Repeat("v", providers.MaxValueLen)
	if r, err = ps[0].Renew(ctxT(t), full); err != nil || r.Value != full.Value {
		t.Fatalf("Renew with a %d-byte value: %v", providers.MaxValueLen, err)
	}
	r.Value = "slot-2 ✓"
	if err := ps[0].Release(ctxT(t), r); err != nil {
		t.Fatal(err)
	}
	if got := mustObserve(t, ps[1], "job"); got.Value != "slot-2 ✓" {
		t.Fatalf("Observe value after Release = %q, want the released value", got.Value)
	}
	if b := mustAcquire(t, ps[1], "job", "b", longTTL); b.Value != "slot-2 ✓" {
		t.Fatalf("new holder sees value %q, want the previous term's", b.Value)
	}
}

func (c *cases) cancelled(t *testing.T) {
	p := c.clients(t, 1)[0]
	held := mustAcquire(t, p, "held", "a", longTTL)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s with a cancelled context: %v, want context.Canceled wrapped", op, err)
		}
	}
	_, err := p.Acquire(ctx, "free", "a", longTTL)
	check("Acquire", err)
	_, err = p.Renew(ctx, held)
	check("Renew", err)
	check("Release", p.Release(ctx, held))
	_, err = p.Observe(ctx, "held")
	check("Observe", err)
	if got := mustObserve(t, p, "free"); got.Holder != "" {
		t.Fatalf("a cancelled Acquire took the lease: %+v", got)
	}
	if got := mustObserve(t, p, "held"); got.Holder != "a" || got.Token != held.Token {
		t.Fatalf("a cancelled Release changed the lease: %+v", got)
	}
}

func (c *cases) storeDown(t *testing.T) {
	p := c.unreachable(t)
	t.Cleanup(func() { _ = p.Close() })
	lease := providers.Lease{Key: "job", Holder: "a", Token: 1, TTL: longTTL}
	for _, op := range []struct {
		name string
		call func(context.Context) error
	}{
		{"Acquire", func(ctx context.Context) error { _, err := p.Acquire(ctx, "job", "a", longTTL); return err }},
		{"Renew", func(ctx context.Context) error { _, err := p.Renew(ctx, lease); return err }},
		{"Release", func(ctx context.Context) error { return p.Release(ctx, lease) }},
		{"Observe", func(ctx context.Context) error { _, err := p.Observe(ctx, "job"); return err }},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		err := op.call(ctx)
		cancel()
		elapsed := time.Since(start)
		if err == nil {
			t.Fatalf("%s against a store that is down succeeded", op.name)
		}
		if errors.Is(err, providers.ErrHeld) || errors.Is(err, providers.ErrLost) {
			t.Fatalf("%s against a store that is down: %v, want a store error, not a lease verdict", op.name, err)
		}
		if elapsed > 6*time.Second {
			t.Fatalf("%s took %s with a 5s deadline", op.name, elapsed)
		}
		t.Logf("%s: %v (after %s)", op.name, err, elapsed.Round(time.Millisecond))
	}
}
