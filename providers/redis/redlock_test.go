package redis_test

import (
	"context"
	"errors"
	"strconv"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/electd/electd/internal/cluster"
	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
	"github.com/electd/electd/providers/redis"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// fresh starts n redis-servers for the test and returns settings on them
// under a fresh prefix, the servers, and a context that ends after 30 s.
func fresh(t *testing.T, n int) (redis.Settings, []*teststore.Proc, context.Context) {
	t.Helper()
	addrs, procs := servers(t, n)
	return redis.Settings{Addresses: addrs, Prefix: randomPrefix()}, procs, ctxT(t, 30*time.Second)
}

// client opens a client on s, closed with t.
func client(t *testing.T, s redis.Settings) *redis.Provider {
	t.Helper()
	p := open(t, s)
	t.Cleanup(func() { p.Close() })
	return p
}

// wantStoreError: err is an error, and not a lease verdict.
func wantStoreError(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded, want an error", what)
	}
	if errors.Is(err, providers.ErrHeld) || errors.Is(err, providers.ErrLost) {
		t.Fatalf("%s: %v, want a store error, not a lease verdict", what, err)
	}
	t.Logf("%s: %v", what, err)
}

// TestRedlockOneDown: with one of three servers killed, a quorum of two
// still acquires, renews, releases, hands over and notifies.
func TestRedlockOneDown(t *testing.T) {
	t.Parallel()
	s, procs, ctx := fresh(t, 3)
	a, b := client(t, s), client(t, s)

	l, err := a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	procs[0].Stop()

	if l, err = a.Renew(ctx, l); err != nil {
		t.Fatalf("Renew with 2 of 3 servers: %v", err)
	}
	var held *providers.HeldError
	if _, err := b.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: 10 * time.Second}); !errors.As(err, &held) || held.Holder != "a" || held.Token != l.Token {
		t.Fatalf("Acquire by another with 2 of 3 servers: %v, want held by a token %d", err, l.Token)
	}
	if got, err := b.Observe(ctx, "job"); err != nil || got.Holder != "a" || got.Token != l.Token {
		t.Fatalf("Observe with 2 of 3 servers = %+v, %v", got, err)
	}
	ch := make(chan string, 100)
	if err := b.Notify(ctx, func(key string) { ch <- key }); err != nil {
		t.Fatalf("Notify with 2 of 3 servers: %v", err)
	}
	l.Value = "slot-7"
	if err := a.Release(ctx, l); err != nil {
		t.Fatalf("Release with 2 of 3 servers: %v", err)
	}
	select {
	case k := <-ch:
		if k != "job" {
			t.Fatalf("changed(%q) for the Release with 2 of 3 servers, want changed(\"job\")", k)
		}
	case <-time.After(providertest.NotifyWithin):
		t.Fatalf("no notification within %s of Release with 2 of 3 servers", providertest.NotifyWithin)
	}
	nb, err := b.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: 10 * time.Second})
	if err != nil {
		t.Fatalf("Acquire after Release with 2 of 3 servers: %v", err)
	}
	if nb.Token != l.Token+1 || nb.Value != "slot-7" {
		t.Fatalf("new term = %+v, want token %d and value slot-7", nb, l.Token+1)
	}
	// A key first taken while a server is down.
	if _, err := a.Acquire(ctx, providers.AcquireRequest{Key: "fresh", Holder: "a", TTL: 10 * time.Second}); err != nil {
		t.Fatalf("Acquire of a new key with 2 of 3 servers: %v", err)
	}
}

// TestRedlockTwoDown: with two of three servers killed no operation can
// reach a quorum; each returns an error, never a false success or a verdict.
func TestRedlockTwoDown(t *testing.T) {
	t.Parallel()
	s, procs, ctx := fresh(t, 3)
	a := client(t, s)

	l, err := a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	procs[0].Stop()
	procs[2].Stop()

	_, err = a.Renew(ctx, l)
	wantStoreError(t, "Renew with 1 of 3 servers", err)
	wantStoreError(t, "Release with 1 of 3 servers", a.Release(ctx, l))
	_, err = a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: 10 * time.Second})
	wantStoreError(t, "Acquire by the holder with 1 of 3 servers", err)
	_, err = a.Acquire(ctx, providers.AcquireRequest{Key: "other", Holder: "a", TTL: 10 * time.Second})
	wantStoreError(t, "Acquire of a free key with 1 of 3 servers", err)
	_, err = a.Observe(ctx, "job")
	wantStoreError(t, "Observe with 1 of 3 servers", err)
	wantStoreError(t, "Notify with 1 of 3 servers", a.Notify(ctx, func(string) {}))
}

// TestRedlockHung: a server that hangs (SIGSTOP: its connections stay open
// and silent, as on a silent partition) costs a renewal, or an Observe of a
// held term, nothing once the other two have answered; with two hung, a
// renewal fails after one per-server timeout, a fifth of the ttl.
func TestRedlockHung(t *testing.T) {
	t.Parallel()
	s, procs, ctx := fresh(t, 3)
	a := client(t, s)
	const ttl = 5 * time.Second
	l, err := a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if err := procs[1].Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = procs[1].Signal(syscall.SIGCONT) })
	start := time.Now()
	if _, err := a.Renew(ctx, l); err != nil {
		t.Fatalf("Renew with one server hung: %v", err)
	}
	if d := time.Since(start); d > ttl/2 {
		t.Fatalf("Renew with one server hung took %s, want no wait for it", d)
	} else {
		t.Logf("Renew with one server hung: %s", d)
	}
	// Observe gives each server up to 3 s: one bounded by 1 s succeeds only
	// if it does not wait for the hung server.
	octx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := a.Observe(octx, "job"); err != nil {
		t.Fatalf("Observe with one server hung, bounded by 1s: %v", err)
	}
	if err := procs[2].Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = procs[2].Signal(syscall.SIGCONT) })
	start = time.Now()
	_, err = a.Renew(ctx, l)
	wantStoreError(t, "Renew with two servers hung", err)
	if d := time.Since(start); d > ttl/2 {
		t.Fatalf("Renew with two servers hung took %s", d)
	}
}

// TestRedlockServerLostData: a server restarted empty (no persistence) is
// brought back up to the quorum's counter; tokens keep growing as long as
// every quorum keeps one server that remembers the last term.
func TestRedlockServerLostData(t *testing.T) {
	t.Parallel()
	s, procs, ctx := fresh(t, 3)
	a := client(t, s)
	var last uint64
	cycle := func(what string) {
		t.Helper()
		l, err := a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: 10 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if l.Token <= last {
			t.Fatalf("%s: token %d after %d", what, l.Token, last)
		}
		t.Logf("%s: token %d", what, l.Token)
		last = l.Token
		if err := a.Release(ctx, l); err != nil {
			t.Fatalf("%s: release: %v", what, err)
		}
	}
	for range 3 {
		cycle("all servers")
	}
	restart(t, procs, s.Addresses, 2)
	cycle("server 2 restarted empty")
	procs[0].Stop()
	cycle("server 0 down, server 2 empty before the last term")
	cycle("again")
}

// TestRedlockTwoServersRestartedEmpty: two of three servers restarted
// empty form a quorum that agrees on token 1, while the third has kept its
// counter. The term must not take that token: a quorum's token is kept only
// when no server that answered reported a higher counter, and the next
// attempt raises the servers that are behind (the repair). No floor is
// given: this is the provider's own rule, not the agents' mark.
func TestRedlockTwoServersRestartedEmpty(t *testing.T) {
	t.Parallel()
	s, procs, ctx := fresh(t, 3)
	a := client(t, s)
	var last uint64
	for range 20 {
		l := mustAcquire(t, a, "job", "a")
		if err := a.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		last = l.Token
	}
	restart(t, procs, s.Addresses, 0)
	restart(t, procs, s.Addresses, 1)
	l := mustAcquire(t, a, "job", "b")
	if l.Token <= last {
		t.Fatalf("after two servers restarted empty: token %d, not above %d, the last term's", l.Token, last)
	}
	// The Acquire returns once a quorum has answered: the third server's
	// write may land a moment later.
	for i, addr := range s.Addresses {
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		var got string
		var err error
		cluster.Until(5*time.Second, 10*time.Millisecond, func() bool {
			got, err = c.HGet(ctx, s.Prefix+"lease:job", "token").Result()
			return err == nil && got == strconv.FormatUint(l.Token, 10)
		})
		c.Close()
		if err != nil || got != strconv.FormatUint(l.Token, 10) {
			t.Errorf("server %d: counter %q (%v), want %d within 5s: not repaired", i, got, err, l.Token)
		}
	}
}

// TestRedlockMissedServerJoins: a term won on two of three servers (the
// third was down, and came back empty) survives the loss of one of those
// two. Either a renewal while all three answer has the third join the term
// (beside the renewal), or, when one of the two is lost first, the renewal
// that finds the term on one server only has the third join at once.
func TestRedlockMissedServerJoins(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		renewMore bool // renew once with all three up, before one of the two goes
	}{{"at a renewal", true}, {"at once", false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, procs, ctx := fresh(t, 3)
			a, b := client(t, s), client(t, s)

			procs[2].Stop()
			l, err := a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			restart(t, procs, s.Addresses, 2)
			if c.renewMore {
				if l, err = a.Renew(ctx, l); err != nil {
					t.Fatalf("Renew with the third server back, empty: %v", err)
				}
				// The join runs beside the renewal: wait until the third
				// server has the term (its live key names a).
				c := goredis.NewClient(&goredis.Options{Addr: s.Addresses[2]})
				t.Cleanup(func() { c.Close() })
				deadline := time.Now().Add(5 * time.Second)
				for v, _ := c.Get(ctx, s.Prefix+"live:job").Result(); v != "a"; v, _ = c.Get(ctx, s.Prefix+"live:job").Result() {
					if time.Now().After(deadline) {
						t.Fatal("the server that missed the term did not join it within 5s of a renewal")
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			procs[0].Stop()
			if l, err = a.Renew(ctx, l); err != nil {
				t.Fatalf("Renew after losing one of the two servers the term was won on: %v", err)
			}
			var held *providers.HeldError
			if _, err := b.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: 10 * time.Second}); !errors.As(err, &held) || held.Holder != "a" || held.Token != l.Token {
				t.Fatalf("Acquire by another: %v, want held by a token %d", err, l.Token)
			}
		})
	}
}

// TestRedlockJoinNeedsTheTerm: a server joins only a term that a quorum
// renewed, never one that does not exist or that it has seen end.
func TestRedlockJoinNeedsTheTerm(t *testing.T) {
	t.Parallel()
	s, _, ctx := fresh(t, 3)
	a := client(t, s)
	if _, err := a.Renew(ctx, providers.Lease{Key: "never", Holder: "a", Token: 7, TTL: 10 * time.Second}); !errors.Is(err, providers.ErrLost) {
		t.Fatalf("Renew of a term never acquired: %v, want ErrLost", err)
	}
	l, err := a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Renew(ctx, l); !errors.Is(err, providers.ErrLost) {
		t.Fatalf("Renew of a released term: %v, want ErrLost", err)
	}
	if got, err := a.Observe(ctx, "job"); err != nil || got.Holder != "" {
		t.Fatalf("Observe after the released term's renewal = %+v, %v; want free", got, err)
	}
}

// TestRedlockNoTokenTwiceAfterRestarts: two of three servers restarted
// empty while the third holds a live term. A candidate wins a quorum of the
// two empty servers whatever its floor: with its floor just below the
// term's token, on that very token, which the third server refuses with the
// live term of the same token. The candidate must be told the term is held
// (never given its token a second time, nor a token that ends a term its
// holder can keep), and the holder's next renewal has the empty servers
// join its term.
func TestRedlockNoTokenTwiceAfterRestarts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		floor func(token uint64) uint64
	}{
		{"no floor", func(uint64) uint64 { return 0 }},
		{"floor below the term's token", func(token uint64) uint64 { return token - 2 }},
		{"floor just below the term's token", func(token uint64) uint64 { return token - 1 }},
		{"floor at the term's token", func(token uint64) uint64 { return token }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, procs, ctx := fresh(t, 3)
			a, b := client(t, s), client(t, s)
			// a holds the term of token 4 on every server (written
			// directly: an Acquire returns once a quorum has answered).
			l := providers.Lease{Key: "job", Holder: "a", Token: 4, TTL: time.Minute}
			for _, addr := range s.Addresses {
				c := goredis.NewClient(&goredis.Options{Addr: addr})
				err := c.HSet(ctx, s.Prefix+"lease:job", "holder", "a", "token", 4).Err()
				if err == nil {
					err = c.Set(ctx, s.Prefix+"live:job", "a", time.Minute).Err()
				}
				c.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			if got, err := a.Renew(ctx, l); err != nil {
				t.Fatalf("a's renewal with every server: %v", err)
			} else {
				l = got
			}
			restart(t, procs, s.Addresses, 0)
			restart(t, procs, s.Addresses, 1)
			got, err := b.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: time.Minute, Floor: c.floor(l.Token)})
			var held *providers.HeldError
			if !errors.As(err, &held) || held.Holder != "a" || held.Token != l.Token {
				t.Fatalf("b's Acquire: %+v, %v; want held by a with token %d, live on the server that kept its data", got, err, l.Token)
			}
			if held.Remaining <= 0 || held.Remaining > time.Minute {
				t.Errorf("held: Remaining %s, want the live term's rest, within its minute", held.Remaining)
			}
			if _, err := a.Renew(ctx, l); err != nil {
				t.Fatalf("a's renewal after two servers restarted empty: %v", err)
			}
			for i, addr := range s.Addresses[:2] {
				c := goredis.NewClient(&goredis.Options{Addr: addr})
				v, err := c.Get(ctx, s.Prefix+"live:job").Result()
				c.Close()
				if v != "a" {
					t.Errorf("server %d after a's renewal: live key %q (%v), want a's term joined", i, v, err)
				}
			}
		})
	}
}

// TestRedlockServerBehindCatchesUp: a server whose counter is behind the
// others' (it missed terms: it was cut off, or an attempt's write reached
// it after a later one on another connection) hands out a token below the
// term's. It joins the term, its counter raised to the term's token, rather
// than being put back: put back, it stayed behind for good (every attempt
// won it with the same low token and undid it), and when the servers in
// step lost their data the repair raised them only to its old counter
// (TestRedlockTwoServersRestartedEmpty, under load).
func TestRedlockServerBehindCatchesUp(t *testing.T) {
	t.Parallel()
	s, _, ctx := fresh(t, 3)
	a := client(t, s)
	// Servers 1 and 2 have seen five terms, server 0 two.
	var behind *goredis.Client
	for i, addr := range s.Addresses {
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		counter := 5
		if i == 0 {
			behind, counter = c, 2
		}
		if err := c.HSet(ctx, s.Prefix+"lease:job", "holder", "", "token", counter).Err(); err != nil {
			t.Fatal(err)
		}
	}
	l := mustAcquire(t, a, "job", "b")
	if l.Token != 6 {
		t.Fatalf("token %d, want 6: two servers in step at 5", l.Token)
	}
	var got string
	if !cluster.Until(5*time.Second, 10*time.Millisecond, func() bool {
		got, _ = behind.HGet(ctx, s.Prefix+"lease:job", "token").Result()
		return got == "6"
	}) {
		t.Fatalf("the server behind has counter %s 5s after the term, want the term's 6", got)
	}
	if v, _ := behind.Get(ctx, s.Prefix+"live:job").Result(); v != "b" {
		t.Fatalf("the server behind: live key %q, want the term's holder b", v)
	}
}
