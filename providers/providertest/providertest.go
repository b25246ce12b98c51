package providertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electd/electd/providers"
)

// Factory prepares a fresh namespace on the store (cleaned up with t) and
// returns Open, which returns a new client on that namespace each call.
type Factory func(t *testing.T) (open func(t *testing.T) providers.Provider)

// Options describe what the store under test can and cannot do.
type Options struct {
	// Unreachable returns a client pointed at a store that is down (a closed
	// port, a file in a directory that does not exist). Required.
	Unreachable func(t *testing.T) providers.Provider
	// Notifier says whether the provider implements providers.Notifier.
	Notifier bool
	// ShortTTL is the ttl of the expiry cases; default 1s.
	ShortTTL time.Duration
	// Clients is the number of racing clients; default 20.
	Clients int
	// Rounds is the number of races; default 50.
	Rounds int
	// NoRemaining, when set, says why the store cannot tell how long a held
	// lease has left (HeldError.Remaining stays 0: candidates poll).
	NoRemaining string
	// NotAtomic, when set, says why the store cannot arbitrate racing
	// clients (FerretDB v1); ConcurrentAcquire then logs it and does not run.
	// Only a stand-in store used for single-client behaviour may set it.
	NotAtomic string
	// TermsMayBeRaised, when set, says why a racing candidate may win a
	// quorum with one token and raise its term to a higher one before it
	// answers (Redlock: a quorum's token below a counter another server
	// reported is not kept). A loser refused in between names the winner
	// with the lower token; ConcurrentAcquire then checks the holder and
	// that the token is not above the winner's.
	TermsMayBeRaised string
	// BatchSize is the number of leases of the Batch case, enough for the
	// store to split the batch over several requests; default 130.
	BatchSize int
	// BadKey is a key the store refuses (the Batch case checks it is refused
	// alone); default "".
	BadKey string
	// NoBatchRemaining, when set, says why the HeldErrors of AcquireMany
	// carry no Remaining although Acquire's do.
	NoBatchRemaining string
}

const longTTL = 30 * time.Second

// Run runs every conformance case as a subtest of t.
func Run(t *testing.T, factory Factory, opts Options) {
	if opts.ShortTTL == 0 {
		opts.ShortTTL = time.Second
	}
	if opts.Clients == 0 {
		opts.Clients = 20
	}
	if opts.Rounds == 0 {
		opts.Rounds = 50
	}
	if opts.BatchSize == 0 {
		opts.BatchSize = 130
	}
	s := &suite{factory: factory, opts: opts}
	// The race runs alone; the cases that wait for expiries run in parallel.
	t.Run("ConcurrentAcquire", func(t *testing.T) {
		if opts.NotAtomic != "" {
			t.Log("not run: " + opts.NotAtomic)
			return
		}
		s.concurrentAcquire(t)
	})
	t.Run("ConcurrentAcquireMany", func(t *testing.T) {
		if opts.NotAtomic != "" {
			t.Log("not run: " + opts.NotAtomic)
			return
		}
		s.concurrentAcquireMany(t)
	})
	for _, c := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"Exclusivity", s.exclusivity},
		{"ReacquireNewTerm", s.reacquire},
		{"Renew", s.renew},
		{"RenewAfterLoss", s.renewAfterLoss},
		{"RenewAfterExpiryNotTaken", s.renewAfterExpiry},
		{"Release", s.release},
		{"Expiry", s.expiry},
		{"TokensIncrease", s.tokensIncrease},
		{"Floor", s.floor},
		{"KeysIndependent", s.keysIndependent},
		{"Observe", s.observe},
		{"Value", s.value},
		{"ContextCancelled", s.cancelled},
		{"StoreDown", s.storeDown},
		{"RenewMany", s.renewMany},
		{"Remaining", s.remaining},
		{"AcquireMany", s.acquireMany},
		{"ReleaseMany", s.releaseMany},
		{"Batch", s.batch},
		{"BatchStoreDown", func(t *testing.T) {
			if s.opts.Unreachable == nil {
				t.Fatal("Options.Unreachable is required")
			}
			p := s.opts.Unreachable(t)
			t.Cleanup(func() { _ = p.Close() })
			if b, ok := providers.As[providers.Batcher](p); ok {
				s.batchDown(t, b)
			}
		}},
		{"Notify", s.notify},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t)
		})
	}
}

type suite struct {
	factory Factory
	opts    Options
}

// clients opens n clients on one fresh namespace.
func (s *suite) clients(t *testing.T, n int) []providers.Provider {
	t.Helper()
	open := s.factory(t)
	ps := make([]providers.Provider, n)
	for i := range ps {
		ps[i] = open(t)
		p := ps[i]
		t.Cleanup(func() { _ = p.Close() })
	}
	return ps
}

// Context, MustAcquire, MustObserve, WantHeld and WantLost are the suite's
// own assertions, exported for the providers' store-specific tests.

// NotifyWithin is how long a test waits for a notification that must come.
// It is generous: the wait ends as soon as the notification comes, and a
// machine loaded by the rest of the suite has delayed one past 2 s.
const NotifyWithin = 5 * time.Second

// Context is a context for one operation of a test, cancelled with it.
func Context(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// MustAcquire acquires, or fails the test; the lease must echo key, holder
// and ttl and carry a token.
func MustAcquire(t *testing.T, p providers.Provider, key, holder string, ttl time.Duration) providers.Lease {
	t.Helper()
	l, err := p.Acquire(Context(t), providers.AcquireRequest{Key: key, Holder: holder, TTL: ttl})
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", key, holder, err)
	}
	if l.Key != key || l.Holder != holder || l.Token == 0 || l.TTL != ttl {
		t.Fatalf("Acquire(%q, %q) = %+v: want key, holder, ttl echoed and a token > 0", key, holder, l)
	}
	return l
}

// MustObserve observes, or fails the test.
func MustObserve(t *testing.T, p providers.Provider, key string) providers.Lease {
	t.Helper()
	l, err := p.Observe(Context(t), key)
	if err != nil {
		t.Fatalf("Observe(%q): %v", key, err)
	}
	return l
}

// wantHeld checks that err is a *HeldError naming holder and token.
// WantHeld fails the test unless err is a *HeldError naming holder and token.
func WantHeld(t *testing.T, err error, key, holder string, token uint64) {
	t.Helper()
	var he *providers.HeldError
	if !errors.Is(err, providers.ErrHeld) || !errors.As(err, &he) {
		t.Fatalf("Acquire(%q) error = %v, want a *HeldError (ErrHeld)", key, err)
	}
	if he.Key != key || he.Holder != holder || he.Token != token {
		t.Fatalf("HeldError = {Key %q Holder %q Token %d}, want {%q %q %d}", he.Key, he.Holder, he.Token, key, holder, token)
	}
}

// WantLost fails the test unless err is ErrLost.
func WantLost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, providers.ErrLost) {
		t.Fatalf("%s: error = %v, want ErrLost", what, err)
	}
}

// sleepPast sleeps until d after since, plus a margin for clock skew
// between the test and the store.
func sleepPast(since time.Time, d time.Duration) {
	time.Sleep(time.Until(since.Add(d + d/2 + 200*time.Millisecond)))
}

func (s *suite) exclusivity(t *testing.T) {
	ps := s.clients(t, 2)
	a := MustAcquire(t, ps[0], "job", "a", longTTL)
	_, err := ps[1].Acquire(Context(t), providers.AcquireRequest{Key: "job", Holder: "b", TTL: longTTL})
	WantHeld(t, err, "job", "a", a.Token)
	if got := MustObserve(t, ps[1], "job"); got.Holder != "a" || got.Token != a.Token {
		t.Fatalf("Observe after refused Acquire = %+v, want holder a token %d", got, a.Token)
	}
}

func (s *suite) concurrentAcquire(t *testing.T) {
	ps := s.clients(t, s.opts.Clients)
	// Warm every client up (connections, schema) so the race is on the lease.
	for _, p := range ps {
		MustObserve(t, p, "warm-up")
	}
	start := time.Now()
	for round := range s.opts.Rounds {
		ctx := Context(t) // per round: a slow store (FerretDB) makes each round slow, not wrong
		key := fmt.Sprintf("race-%d", round)
		// Odd rounds race for a lease that exists and was released: a store
		// may arbitrate first inserts (a unique key) but not updates.
		var prev uint64
		if round%2 == 1 {
			l := MustAcquire(t, ps[0], key, "setup", longTTL)
			if err := ps[0].Release(ctx, l); err != nil {
				t.Fatal(err)
			}
			prev = l.Token
		}
		var wg sync.WaitGroup
		var winners atomic.Int32
		errs := make([]error, len(ps))
		leases := make([]providers.Lease, len(ps))
		gate := make(chan struct{})
		for i, p := range ps {
			wg.Go(func() {
				<-gate
				leases[i], errs[i] = p.Acquire(ctx, providers.AcquireRequest{Key: key, Holder: fmt.Sprintf("c%d", i), TTL: longTTL})
				if errs[i] == nil {
					winners.Add(1)
				}
			})
		}
		close(gate)
		wg.Wait()
		if n := winners.Load(); n != 1 {
			t.Fatalf("round %d: %d winners, want exactly 1 (errors: %v)", round, n, errs)
		}
		var winner providers.Lease
		for i := range ps {
			if errs[i] == nil {
				winner = leases[i]
			}
		}
		for _, err := range errs {
			var he *providers.HeldError
			switch {
			case err == nil:
			case s.opts.TermsMayBeRaised != "" && errors.As(err, &he) && he.Holder == winner.Holder && he.Token <= winner.Token:
			default:
				WantHeld(t, err, key, winner.Holder, winner.Token)
			}
		}
		// Greater, not exactly +1: under contention Redlock's per-server
		// counters may skip numbers (docs/providers/redis.md).
		if prev != 0 && winner.Token <= prev {
			t.Fatalf("round %d: winner's token %d after a released term %d, want more", round, winner.Token, prev)
		}
	}
	t.Logf("%d rounds of %d racing clients in %s", s.opts.Rounds, len(ps), time.Since(start))
}

func (s *suite) reacquire(t *testing.T) {
	ps := s.clients(t, 1)
	a1 := MustAcquire(t, ps[0], "job", "a", longTTL)
	a2 := MustAcquire(t, ps[0], "job", "a", longTTL)
	if a2.Token != a1.Token+1 {
		t.Fatalf("re-acquire token = %d, want %d (a new term)", a2.Token, a1.Token+1)
	}
	if got := MustObserve(t, ps[0], "job"); got.Holder != "a" || got.Token != a2.Token {
		t.Fatalf("Observe = %+v, want holder a token %d", got, a2.Token)
	}
}

func (s *suite) renew(t *testing.T) {
	ps := s.clients(t, 2)
	a := MustAcquire(t, ps[0], "job", "a", longTTL)
	time.Sleep(20 * time.Millisecond) // expiries have millisecond precision at worst
	r, err := ps[0].Renew(Context(t), a)
	if err != nil {
		t.Fatalf("Renew by holder: %v", err)
	}
	if r.Token != a.Token || r.Holder != "a" {
		t.Fatalf("Renew = %+v, want token %d unchanged", r, a.Token)
	}
	if !r.Expires.After(a.Expires) {
		t.Fatalf("Renew expiry %v is not after the acquired expiry %v", r.Expires, a.Expires)
	}
	if got := MustObserve(t, ps[1], "job"); !got.Expires.After(a.Expires) || got.Token != a.Token || got.Holder != "a" {
		t.Fatalf("Observe after Renew = %+v, want holder a, token %d, expiry after %v", got, a.Token, a.Expires)
	}

	wrong := a
	wrong.Holder = "b"
	_, err = ps[1].Renew(Context(t), wrong)
	WantLost(t, "Renew with a wrong holder", err)
	stale := a
	stale.Token = a.Token - 1
	_, err = ps[0].Renew(Context(t), stale)
	WantLost(t, "Renew with a stale token", err)
	future := a
	future.Token = a.Token + 1
	_, err = ps[0].Renew(Context(t), future)
	WantLost(t, "Renew with a token never issued", err)
	_, err = ps[0].Renew(Context(t), providers.Lease{Key: "never", Holder: "a", Token: 1, TTL: longTTL})
	WantLost(t, "Renew of a key never acquired", err)
	if got := MustObserve(t, ps[1], "job"); got.Holder != "a" || got.Token != a.Token {
		t.Fatalf("Observe after refused renews = %+v, want holder a token %d", got, a.Token)
	}
}

func (s *suite) renewAfterLoss(t *testing.T) {
	ps := s.clients(t, 2)
	start := time.Now()
	a := MustAcquire(t, ps[0], "job", "a", s.opts.ShortTTL)
	sleepPast(start, s.opts.ShortTTL)
	b := MustAcquire(t, ps[1], "job", "b", longTTL)
	if b.Token != a.Token+1 {
		t.Fatalf("token after expiry = %d, want %d", b.Token, a.Token+1)
	}
	_, err := ps[0].Renew(Context(t), a)
	WantLost(t, "Renew after the lease expired and was taken", err)
	WantLost(t, "Release after the lease expired and was taken", ps[0].Release(Context(t), a))
	if got := MustObserve(t, ps[0], "job"); got.Holder != "b" || got.Token != b.Token {
		t.Fatalf("Observe = %+v, want holder b token %d", got, b.Token)
	}
}

// renewAfterExpiry: an expired lease nobody took may be renewed, since
// holder and token still match (providers.Provider).
func (s *suite) renewAfterExpiry(t *testing.T) {
	ps := s.clients(t, 1)
	start := time.Now()
	a := MustAcquire(t, ps[0], "job", "a", s.opts.ShortTTL)
	sleepPast(start, s.opts.ShortTTL)
	if got := MustObserve(t, ps[0], "job"); got.Holder != "" {
		t.Fatalf("Observe after expiry = %+v, want holder \"\"", got)
	}
	a.TTL = longTTL
	r, err := ps[0].Renew(Context(t), a)
	if err != nil {
		t.Fatalf("Renew after expiry, not taken: %v (holder and token still match: must succeed)", err)
	}
	if r.Token != a.Token {
		t.Fatalf("Renew token = %d, want %d", r.Token, a.Token)
	}
	if got := MustObserve(t, ps[0], "job"); got.Holder != "a" || got.Token != a.Token {
		t.Fatalf("Observe after renewing an expired lease = %+v, want holder a token %d", got, a.Token)
	}
}

func (s *suite) release(t *testing.T) {
	ps := s.clients(t, 2)
	a := MustAcquire(t, ps[0], "job", "a", longTTL)
	other := a
	other.Holder = "b"
	WantLost(t, "Release by another holder", ps[1].Release(Context(t), other))
	stale := a
	stale.Token--
	WantLost(t, "Release with a stale token", ps[0].Release(Context(t), stale))
	if got := MustObserve(t, ps[1], "job"); got.Holder != "a" || got.Token != a.Token {
		t.Fatalf("Observe after refused releases = %+v, want holder a token %d", got, a.Token)
	}
	if err := ps[0].Release(Context(t), a); err != nil {
		t.Fatalf("Release by holder: %v", err)
	}
	got := MustObserve(t, ps[1], "job")
	if got.Holder != "" || got.Token != a.Token {
		t.Fatalf("Observe after Release = %+v, want holder \"\" and token %d kept (record never deleted)", got, a.Token)
	}
	WantLost(t, "second Release", ps[0].Release(Context(t), a))
	b := MustAcquire(t, ps[1], "job", "b", longTTL)
	if b.Token != a.Token+1 {
		t.Fatalf("token after release = %d, want %d", b.Token, a.Token+1)
	}
}

func (s *suite) expiry(t *testing.T) {
	ps := s.clients(t, 2)
	ttl := s.opts.ShortTTL
	start := time.Now()
	a := MustAcquire(t, ps[0], "job", "a", ttl)
	_, err := ps[1].Acquire(Context(t), providers.AcquireRequest{Key: "job", Holder: "b", TTL: longTTL})
	if elapsed := time.Since(start); elapsed < ttl/2 {
		WantHeld(t, err, "job", "a", a.Token)
	} else {
		t.Logf("inconclusive: the check before expiry took %s of a %s ttl", elapsed, ttl)
	}
	sleepPast(start, ttl)
	if got := MustObserve(t, ps[1], "job"); got.Holder != "" || got.Token != a.Token {
		t.Fatalf("Observe after expiry = %+v, want holder \"\" token %d", got, a.Token)
	}
	b := MustAcquire(t, ps[1], "job", "b", longTTL)
	if b.Token != a.Token+1 {
		t.Fatalf("token after expiry = %d, want %d", b.Token, a.Token+1)
	}
}

func (s *suite) tokensIncrease(t *testing.T) {
	open := s.factory(t)
	a, b := open(t), open(t)
	aClosed := false
	t.Cleanup(func() {
		if !aClosed {
			_ = a.Close()
		}
		_ = b.Close()
	})
	var last uint64
	step := func(what string, l providers.Lease) {
		t.Helper()
		if l.Token != last+1 {
			t.Fatalf("%s: token %d, want %d", what, l.Token, last+1)
		}
		last = l.Token
	}
	l := MustAcquire(t, a, "job", "a", longTTL)
	last = l.Token - 1
	step("first acquire", l)
	if err := a.Release(Context(t), l); err != nil {
		t.Fatal(err)
	}
	step("acquire after release", MustAcquire(t, b, "job", "b", s.opts.ShortTTL))
	start := time.Now()
	sleepPast(start, s.opts.ShortTTL)
	step("acquire after expiry", MustAcquire(t, a, "job", "a", longTTL))
	// Restart the holder: a new client, the same holder name.
	aClosed = true
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	a2 := open(t)
	t.Cleanup(func() { _ = a2.Close() })
	step("acquire by the restarted holder", MustAcquire(t, a2, "job", "a", longTTL))
}

func (s *suite) keysIndependent(t *testing.T) {
	ps := s.clients(t, 2)
	k1 := MustAcquire(t, ps[0], "key1", "a", longTTL)
	k2 := MustAcquire(t, ps[1], "key2", "b", longTTL)
	if got := MustObserve(t, ps[0], "key1"); got.Holder != "a" || got.Token != k1.Token {
		t.Fatalf("key1 = %+v after acquiring key2", got)
	}
	if err := ps[1].Release(Context(t), k2); err != nil {
		t.Fatal(err)
	}
	if got := MustObserve(t, ps[0], "key1"); got.Holder != "a" {
		t.Fatalf("key1 = %+v after releasing key2", got)
	}
	_, err := ps[1].Acquire(Context(t), providers.AcquireRequest{Key: "key1", Holder: "b", TTL: longTTL})
	WantHeld(t, err, "key1", "a", k1.Token)
	// Similar keys are distinct keys.
	for _, k := range []string{"KEY1", "key1 ", "key"} {
		l := MustAcquire(t, ps[1], k, "b", longTTL)
		if l.Token != 1 {
			t.Logf("key %q: first token %d", k, l.Token)
		}
	}
}

func (s *suite) observe(t *testing.T) {
	ps := s.clients(t, 2)
	if got := MustObserve(t, ps[0], "never"); got != (providers.Lease{Key: "never"}) {
		t.Fatalf("Observe of a key never acquired = %+v, want a zero Lease with Key", got)
	}
	a := MustAcquire(t, ps[0], "job", "a", longTTL)
	got := MustObserve(t, ps[1], "job")
	if got.Key != "job" || got.Holder != "a" || got.Token != a.Token {
		t.Fatalf("Observe = %+v, want holder a token %d", got, a.Token)
	}
	if d := got.Expires.Sub(a.Expires); d < -time.Second || d > time.Second {
		t.Fatalf("Observe expiry %v, Acquire said %v", got.Expires, a.Expires)
	}
	if d := time.Until(got.Expires); d < longTTL-10*time.Second || d > longTTL+10*time.Second {
		t.Fatalf("expiry is %s away, want about %s (store clock and test clock agree within 10s here)", d, longTTL)
	}
}

func (s *suite) value(t *testing.T) {
	ps := s.clients(t, 2)
	a := MustAcquire(t, ps[0], "job", "a", longTTL)
	if a.Value != "" {
		t.Fatalf("first Acquire value = %q, want \"\"", a.Value)
	}
	a.Value = "slot-1"
	r, err := ps[0].Renew(Context(t), a)
	if err != nil {
		t.Fatal(err)
	}
	if r.Value != "slot-1" {
		t.Fatalf("Renew returned value %q", r.Value)
	}
	if got := MustObserve(t, ps[1], "job"); got.Value != "slot-1" {
		t.Fatalf("Observe value after Renew = %q, want slot-1", got.Value)
	}

	tooLong := r
	tooLong.Value = strings.Repeat("x", providers.MaxValueLen+1)
	if _, err := ps[0].Renew(Context(t), tooLong); err == nil || errors.Is(err, providers.ErrLost) {
		t.Fatalf("Renew with a %d-byte value: error %v, want a value error (not ErrLost)", len(tooLong.Value), err)
	}
	if err := ps[0].Release(Context(t), tooLong); err == nil || errors.Is(err, providers.ErrLost) {
		t.Fatalf("Release with a %d-byte value: error %v, want a value error", len(tooLong.Value), err)
	}
	if got := MustObserve(t, ps[1], "job"); got.Value != "slot-1" || got.Holder != "a" {
		t.Fatalf("after refused writes: %+v, want holder a value slot-1", got)
	}
	full := r
	full.Value = strings.Repeat("v", providers.MaxValueLen)
	if r, err = ps[0].Renew(Context(t), full); err != nil || r.Value != full.Value {
		t.Fatalf("Renew with a %d-byte value: %v", providers.MaxValueLen, err)
	}

	r.Value = "slot-2 ✓"
	if err := ps[0].Release(Context(t), r); err != nil {
		t.Fatal(err)
	}
	if got := MustObserve(t, ps[1], "job"); got.Value != "slot-2 ✓" {
		t.Fatalf("Observe value after Release = %q, want the released value", got.Value)
	}
	b := MustAcquire(t, ps[1], "job", "b", longTTL)
	if b.Value != "slot-2 ✓" {
		t.Fatalf("new holder sees value %q, want the previous term's", b.Value)
	}
}

func (s *suite) cancelled(t *testing.T) {
	ps := s.clients(t, 1)
	p := ps[0]
	held := MustAcquire(t, p, "held", "a", longTTL)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	check := func(op string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s with a cancelled context succeeded", op)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s with a cancelled context: %v, want context.Canceled wrapped", op, err)
		}
	}
	_, err := p.Acquire(ctx, providers.AcquireRequest{Key: "free", Holder: "a", TTL: longTTL})
	check("Acquire", err)
	_, err = p.Renew(ctx, held)
	check("Renew", err)
	check("Release", p.Release(ctx, held))
	_, err = p.Observe(ctx, "held")
	check("Observe", err)
	if got := MustObserve(t, p, "free"); got.Holder != "" {
		t.Fatalf("a cancelled Acquire took the lease: %+v", got)
	}
	if got := MustObserve(t, p, "held"); got.Holder != "a" || got.Token != held.Token {
		t.Fatalf("a cancelled Release changed the lease: %+v", got)
	}
}

func (s *suite) storeDown(t *testing.T) {
	if s.opts.Unreachable == nil {
		t.Fatal("Options.Unreachable is required: every provider must show how it fails when its store is down")
	}
	p := s.opts.Unreachable(t)
	t.Cleanup(func() { _ = p.Close() })
	lease := providers.Lease{Key: "job", Holder: "a", Token: 1, TTL: longTTL}
	for _, op := range []struct {
		name string
		call func(context.Context) error
	}{
		{"Acquire", func(ctx context.Context) error {
			_, err := p.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: longTTL})
			return err
		}},
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

// renewMany: a provider that batches renewals renews every lease still held
// in one call, answers ErrLost for the others, and fails as a whole (never a
// false success) when its store is down.
func (s *suite) renewMany(t *testing.T) {
	ps := s.clients(t, 2)
	br, ok := providers.As[providers.Batcher](ps[0])
	if !ok {
		t.Log("no Batcher: each job's renewal is its own request to the store")
		return
	}
	ctx := Context(t)
	a := MustAcquire(t, ps[0], "a", "n1", longTTL)
	b := MustAcquire(t, ps[0], "b", "n1", longTTL)
	c := MustAcquire(t, ps[0], "c", "n1", s.opts.ShortTTL)
	sleepPast(time.Now(), s.opts.ShortTTL+s.opts.ShortTTL/2)
	taken := MustAcquire(t, ps[1], "c", "n2", longTTL) // c expired and was taken
	a.Value, b.Value = "va", "vb"
	wrong := b
	wrong.Key, wrong.Token = "b2", b.Token
	got, errs := br.RenewMany(ctx, []providers.Lease{a, b, c, wrong})
	if len(got) != 4 || len(errs) != 4 {
		t.Fatalf("RenewMany returned %d leases and %d errors for 4", len(got), len(errs))
	}
	for i, want := range []providers.Lease{a, b} {
		if errs[i] != nil {
			t.Fatalf("RenewMany: lease %q: %v", want.Key, errs[i])
		}
		if got[i].Key != want.Key || got[i].Token != want.Token || got[i].Holder != want.Holder {
			t.Errorf("RenewMany: %+v, want key, holder and token of %+v", got[i], want)
		}
		if o := MustObserve(t, ps[1], want.Key); o.Value != want.Value || o.Holder != "n1" {
			t.Errorf("after RenewMany %q holds %+v, want holder n1 and value %q", want.Key, o, want.Value)
		}
	}
	WantLost(t, "RenewMany of a lease taken by another", errs[2])
	WantLost(t, "RenewMany of a lease never held", errs[3])
	if o := MustObserve(t, ps[1], "c"); o.Holder != "n2" || o.Token != taken.Token {
		t.Errorf("RenewMany touched a lease it had lost: %+v", o)
	}
	dbr, dctx, ok := s.downBatcher(t)
	if !ok {
		return
	}
	_, errs = dbr.RenewMany(dctx, []providers.Lease{a, b})
	for i, err := range errs {
		if err == nil || errors.Is(err, providers.ErrLost) {
			t.Errorf("RenewMany against a store that is down: lease %d: %v, want a store error", i, err)
		}
	}
}

// remaining: a held lease says how long its term has left, by the store's
// clock, and that shrinks as time passes; a candidate tries again then.
func (s *suite) remaining(t *testing.T) {
	ps := s.clients(t, 2)
	const ttl = 20 * time.Second
	MustAcquire(t, ps[0], "job", "a", ttl)
	held := func() *providers.HeldError {
		t.Helper()
		_, err := ps[1].Acquire(Context(t), providers.AcquireRequest{Key: "job", Holder: "b", TTL: ttl})
		var h *providers.HeldError
		if !errors.As(err, &h) {
			t.Fatalf("Acquire of a held lease: %v, want a *HeldError", err)
		}
		return h
	}
	first := held()
	if s.opts.NoRemaining != "" {
		if first.Remaining != 0 {
			t.Errorf("Remaining %s, but Options.NoRemaining says the store cannot tell", first.Remaining)
		}
		t.Log("no Remaining: " + s.opts.NoRemaining)
		return
	}
	// Some stores count whole seconds and round up (etcd): a second of slack.
	if first.Remaining <= 0 || first.Remaining > ttl+time.Second {
		t.Fatalf("Remaining %s of a lease taken for %s, want within (0, ttl]", first.Remaining, ttl)
	}
	time.Sleep(1500 * time.Millisecond)
	if later := held(); later.Remaining >= first.Remaining {
		t.Errorf("Remaining %s, then %s 1.5s later: it does not shrink", first.Remaining, later.Remaining)
	}
}

// acquireMany: each request of a batch is judged as Acquire judges it.
func (s *suite) acquireMany(t *testing.T) {
	ps := s.clients(t, 2)
	ba, ok := providers.As[providers.Batcher](ps[0])
	if !ok {
		t.Log("no Batcher: an agent acquires one lease per request")
		return
	}
	own := MustAcquire(t, ps[0], "own", "n1", longTTL)
	other := MustAcquire(t, ps[1], "other", "n2", longTTL)
	expired := MustAcquire(t, ps[1], "expired", "n2", s.opts.ShortTTL)
	sleepPast(time.Now(), s.opts.ShortTTL+s.opts.ShortTTL/2)
	reqs := []providers.AcquireRequest{
		{Key: "free", Holder: "n1", TTL: longTTL},
		{Key: "own", Holder: "n1", TTL: longTTL},
		{Key: "other", Holder: "n1", TTL: longTTL},
		{Key: "expired", Holder: "n1", TTL: longTTL},
	}
	got, errs := ba.AcquireMany(Context(t), reqs)
	if len(got) != len(reqs) || len(errs) != len(reqs) {
		t.Fatalf("AcquireMany returned %d leases and %d errors for %d", len(got), len(errs), len(reqs))
	}
	for i, want := range map[int]uint64{0: 1, 1: own.Token + 1, 3: expired.Token + 1} {
		if errs[i] != nil {
			t.Fatalf("AcquireMany %q: %v", reqs[i].Key, errs[i])
		}
		if got[i].Key != reqs[i].Key || got[i].Holder != "n1" || got[i].Token != want || got[i].TTL != longTTL {
			t.Errorf("AcquireMany %q: %+v, want holder n1, token %d, ttl %s", reqs[i].Key, got[i], want, longTTL)
		}
		if o := MustObserve(t, ps[1], reqs[i].Key); o.Holder != "n1" || o.Token != want {
			t.Errorf("after AcquireMany %q holds %+v", reqs[i].Key, o)
		}
	}
	WantHeld(t, errs[2], "other", "n2", other.Token)
	if o := MustObserve(t, ps[1], "other"); o.Holder != "n2" || o.Token != other.Token {
		t.Errorf("AcquireMany took a lease held by another: %+v", o)
	}
	// A batch's leases renew and release like any other.
	if _, err := ps[0].Renew(Context(t), got[0]); err != nil {
		t.Errorf("Renew of a lease from AcquireMany: %v", err)
	}
	if err := ps[0].Release(Context(t), got[3]); err != nil {
		t.Errorf("Release of a lease from AcquireMany: %v", err)
	}
	dba, dctx, ok := s.downBatcher(t)
	if !ok {
		return
	}
	_, errs = dba.AcquireMany(dctx, reqs[:2])
	for i, err := range errs {
		if err == nil || errors.Is(err, providers.ErrHeld) {
			t.Errorf("AcquireMany against a store that is down: request %d: %v, want a store error", i, err)
		}
	}
}

// concurrentAcquireMany: clients racing whole batches over the same keys
// never both win a key, and every key is won by someone.
func (s *suite) concurrentAcquireMany(t *testing.T) {
	const clients, keys = 4, 20
	ps := s.clients(t, clients)
	if _, ok := providers.As[providers.Batcher](ps[0]); !ok {
		t.Log("no Batcher")
		return
	}
	for round := range 5 {
		var wg sync.WaitGroup
		won := make([][]providers.Lease, clients)
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ba, _ := providers.As[providers.Batcher](ps[c])
				reqs := make([]providers.AcquireRequest, keys)
				for k := range reqs {
					reqs[k] = providers.AcquireRequest{Key: fmt.Sprintf("r%d-k%d", round, k), Holder: fmt.Sprintf("c%d", c), TTL: longTTL}
				}
				got, errs := ba.AcquireMany(Context(t), reqs)
				for k, err := range errs {
					switch {
					case err == nil:
						won[c] = append(won[c], got[k])
					case !errors.Is(err, providers.ErrHeld):
						t.Errorf("client %d, key %s: %v", c, reqs[k].Key, err)
					}
				}
			}()
		}
		wg.Wait()
		winner := map[string]string{}
		for c := range clients {
			for _, l := range won[c] {
				if w, dup := winner[l.Key]; dup {
					t.Fatalf("round %d: both %s and %s won %s", round, w, l.Holder, l.Key)
				}
				winner[l.Key] = l.Holder
			}
		}
		if len(winner) != keys {
			t.Errorf("round %d: %d of %d keys won", round, len(winner), keys)
		}
	}
}

// releaseMany: own leases are released; another holder's lease is not
// touched and answers ErrLost.
func (s *suite) releaseMany(t *testing.T) {
	ps := s.clients(t, 2)
	br, ok := providers.As[providers.Batcher](ps[0])
	if !ok {
		t.Log("no Batcher: a clean stop releases one lease per request")
		return
	}
	a := MustAcquire(t, ps[0], "a", "n1", longTTL)
	b := MustAcquire(t, ps[0], "b", "n1", longTTL)
	c := MustAcquire(t, ps[1], "c", "n2", longTTL)
	forged := c
	forged.Holder = "n1"
	errs := br.ReleaseMany(Context(t), []providers.Lease{a, b, forged})
	if len(errs) != 3 {
		t.Fatalf("ReleaseMany returned %d errors for 3", len(errs))
	}
	for i, l := range []providers.Lease{a, b} {
		if errs[i] != nil {
			t.Errorf("ReleaseMany %q: %v", l.Key, errs[i])
		}
		if o := MustObserve(t, ps[1], l.Key); o.Holder != "" {
			t.Errorf("after ReleaseMany %q is held by %q", l.Key, o.Holder)
		}
		next := MustAcquire(t, ps[1], l.Key, "n2", longTTL)
		if next.Token != l.Token+1 {
			t.Errorf("after ReleaseMany %q: token %d, want %d", l.Key, next.Token, l.Token+1)
		}
	}
	WantLost(t, "ReleaseMany of another holder's lease", errs[2])
	if o := MustObserve(t, ps[1], "c"); o.Holder != "n2" || o.Token != c.Token {
		t.Errorf("ReleaseMany touched another holder's lease: %+v", o)
	}
}

// downBatcher is the Batcher of a client on a store that is down
// (Options.Unreachable, closed with t) and a context of 5 s for its calls;
// ok is false when the options give no such client.
func (s *suite) downBatcher(t *testing.T) (b providers.Batcher, ctx context.Context, ok bool) {
	if s.opts.Unreachable == nil {
		return nil, nil, false
	}
	down := s.opts.Unreachable(t)
	t.Cleanup(func() { _ = down.Close() })
	if b, ok = providers.As[providers.Batcher](down); !ok {
		t.Fatal("the unreachable client does not batch, the reachable one does")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return b, ctx, true
}

// notify: a provider implements providers.Notifier exactly when
// Options.Notifier says so (looked up with providers.As, beneath wrappers);
// a subscriber hears of a release by another client, for that key and no
// other, soon enough that a waiting candidate takes over with the next
// token, and hears nothing once its subscription ends.
func (s *suite) notify(t *testing.T) {
	ps := s.clients(t, 2)
	n, ok := providers.As[providers.Notifier](ps[1])
	if ok != s.opts.Notifier {
		t.Fatalf("provider implements Notifier: %v, Options.Notifier says %v", ok, s.opts.Notifier)
	}
	if !ok {
		t.Log("no Notifier: waiting candidates poll every retry_every (or wait for the term's end)")
		return
	}
	a := MustAcquire(t, ps[0], "job", "a", longTTL)
	MustObserve(t, ps[1], "job") // warm the candidate up: measure the handover, not a first connection
	ctx, cancel := context.WithCancel(Context(t))
	keys := make(chan string, 100)
	if err := n.Notify(ctx, func(key string) {
		select {
		case keys <- key:
		default:
		}
	}); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	start := time.Now()
	if err := ps[0].Release(Context(t), a); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-keys:
		if k != "job" && k != "" {
			t.Fatalf("notified of %q: only job changed", k)
		}
	case <-time.After(NotifyWithin):
		t.Fatalf("no notification within %s of Release", NotifyWithin)
	}
	notified := time.Since(start)
	b := MustAcquire(t, ps[1], "job", "b", longTTL)
	t.Logf("release → notification %s, release → new holder's Acquire done %s", notified, time.Since(start))
	if b.Token != a.Token+1 {
		t.Fatalf("token %d, want %d", b.Token, a.Token+1)
	}
	if err := ps[1].Release(Context(t), b); err != nil {
		t.Fatal(err)
	}
	cancel()
	time.Sleep(500 * time.Millisecond) // the subscription winds down
	for len(keys) > 0 {
		if k := <-keys; k != "job" && k != "" {
			t.Errorf("notified of %q: only job changed", k)
		}
	}
	c := MustAcquire(t, ps[0], "job", "a", longTTL)
	if err := ps[0].Release(Context(t), c); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-keys:
		t.Errorf("notified of %q after the subscription ended", k)
	case <-time.After(time.Second):
	}
}

// floor: an Acquire with a floor writes a token above it, whether the
// lease is new, released, expired or the holder's own, and the tokens after
// it go on from there; a floor below the store's counter changes nothing.
// AcquireMany honours each request's floor. This is what keeps tokens
// rising when the store lost writes (the agent's mark, agent/mark.go).
func (s *suite) floor(t *testing.T) {
	ps := s.clients(t, 2)
	a, b := ps[0], ps[1]
	above := func(what string, req providers.AcquireRequest, want uint64) providers.Lease {
		t.Helper()
		l, err := a.Acquire(Context(t), req)
		if err != nil {
			t.Fatalf("%s: Acquire: %v", what, err)
		}
		if l.Token != want || l.Holder != req.Holder {
			t.Fatalf("%s: Acquire(floor %d) gave %+v, want token %d", what, req.Floor, l, want)
		}
		if o := MustObserve(t, b, req.Key); o.Token != want || o.Holder != req.Holder {
			t.Fatalf("%s: after Acquire the store holds %+v, want token %d", what, o, want)
		}
		return l
	}
	l := above("new key", providers.AcquireRequest{Key: "job", Holder: "a", TTL: longTTL, Floor: 41}, 42)
	l = above("own lease", providers.AcquireRequest{Key: "job", Holder: "a", TTL: longTTL, Floor: 99}, 100)
	if err := a.Release(Context(t), l); err != nil {
		t.Fatal(err)
	}
	// A floor below the counter: the counter goes on as without one.
	above("released, floor below", providers.AcquireRequest{Key: "job", Holder: "b", TTL: s.opts.ShortTTL, Floor: 7}, 101)
	sleepPast(time.Now(), s.opts.ShortTTL+s.opts.ShortTTL/2)
	above("expired", providers.AcquireRequest{Key: "job", Holder: "a", TTL: longTTL, Floor: 500}, 501)
	// No floor after a floor: still one above the store's counter.
	if l := MustAcquire(t, b, "job", "a", longTTL); l.Token != 502 {
		t.Fatalf("a plain Acquire after a floor of 500: token %d, want 502", l.Token)
	}
	// Refused: a floor does not take a held lease.
	_, err := a.Acquire(Context(t), providers.AcquireRequest{Key: "job", Holder: "c", TTL: longTTL, Floor: 1000})
	WantHeld(t, err, "job", "a", 502)

	ba, ok := providers.As[providers.Batcher](a)
	if !ok {
		return
	}
	MustAcquire(t, b, "old", "b", s.opts.ShortTTL)
	sleepPast(time.Now(), s.opts.ShortTTL+s.opts.ShortTTL/2)
	reqs := []providers.AcquireRequest{
		{Key: "fresh", Holder: "n1", TTL: longTTL, Floor: 9},
		{Key: "old", Holder: "n1", TTL: longTTL, Floor: 20},
		{Key: "plain", Holder: "n1", TTL: longTTL},
	}
	got, errs := ba.AcquireMany(Context(t), reqs)
	for i, want := range []uint64{10, 21, 1} {
		if errs[i] != nil {
			t.Fatalf("AcquireMany %q: %v", reqs[i].Key, errs[i])
		}
		if got[i].Token != want {
			t.Errorf("AcquireMany %q floor %d: token %d, want %d", reqs[i].Key, reqs[i].Floor, got[i].Token, want)
		}
		if o := MustObserve(t, b, reqs[i].Key); o.Token != want || o.Holder != "n1" {
			t.Errorf("after AcquireMany %q the store holds %+v, want token %d", reqs[i].Key, o, want)
		}
	}
}
