package redis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/redis"
)

func forEachMode(t *testing.T, fn func(t *testing.T, addrs []string)) {
	for _, n := range []int{1, 3} {
		t.Run(map[int]string{1: "single", 3: "redlock"}[n], func(t *testing.T) {
			t.Parallel()
			addrs, _ := servers(t, n)
			fn(t, addrs)
		})
	}
}

// TestRemaining: a refused Acquire says how long the holder's term has left
// by the servers' clocks (PTTL), and a Renew pushes it out again.
func TestRemaining(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, addrs []string) {
		s := redis.Settings{Addresses: addrs, Prefix: randomPrefix()}
		a, b := client(t, s), client(t, s)
		ctx := ctxT(t, 30*time.Second)
		const ttl = 10 * time.Second
		l, err := a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		remaining := func() time.Duration {
			t.Helper()
			_, err := b.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: ttl})
			var held *providers.HeldError
			if !errors.As(err, &held) {
				t.Fatalf("Acquire of a held lease: %v, want a *HeldError", err)
			}
			if held.Remaining <= 0 || held.Remaining > ttl {
				t.Fatalf("Remaining = %s, want in (0, %s]", held.Remaining, ttl)
			}
			return held.Remaining
		}
		r1 := remaining()
		if r1 < ttl-2*time.Second {
			t.Fatalf("Remaining right after Acquire = %s, want close to %s", r1, ttl)
		}
		time.Sleep(500 * time.Millisecond) // the term runs down by the server's own clock
		r2 := remaining()
		if d := r1 - r2; d < 400*time.Millisecond || d > 2*time.Second {
			t.Fatalf("Remaining went from %s to %s in 500ms", r1, r2)
		}
		if _, err := a.Renew(ctx, l); err != nil {
			t.Fatal(err)
		}
		if r3 := remaining(); r3 <= r2 {
			t.Fatalf("Remaining after Renew = %s, not more than %s before", r3, r2)
		}
		// A candidate that waits Remaining after a short term finds it free.
		short, err := a.Acquire(ctx, providers.AcquireRequest{Key: "short", Holder: "a", TTL: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Acquire(ctx, providers.AcquireRequest{Key: "short", Holder: "b", TTL: ttl})
		var held *providers.HeldError
		if !errors.As(err, &held) || held.Remaining <= 0 {
			t.Fatalf("Acquire of a held short lease: %v", err)
		}
		time.Sleep(held.Remaining + 5*time.Millisecond)
		if nl, err := b.Acquire(ctx, providers.AcquireRequest{Key: "short", Holder: "b", TTL: ttl}); err != nil || nl.Token != short.Token+1 {
			t.Fatalf("Acquire %s after Remaining: %+v, %v", held.Remaining, nl, err)
		}
	})
}

// TestNotifyStoreDown: with the store unreachable Notify fails (the batches'
// store errors are the conformance suite's BatchStoreDown).
func TestNotifyStoreDown(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3} {
		p := open(t, redis.Settings{Addresses: closedAddrs(t, n), Prefix: "electd:"})
		t.Cleanup(func() { p.Close() })
		ctx := ctxT(t, 30*time.Second)
		if err := p.Notify(ctx, func(string) {}); err == nil {
			t.Fatal("Notify with the store down succeeded")
		}
	}
}

// TestRedlockBatchSplit: when the servers' counters disagree so that no
// quorum shares a token, AcquireMany goes on as Acquire does (a retry above
// the highest counter) and leaves no stray term on any server.
func TestRedlockBatchSplit(t *testing.T) {
	t.Parallel()
	s, _, ctx := fresh(t, 3)
	addrs, prefix := s.Addresses, s.Prefix
	a := client(t, s)
	for i, addr := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		if err := c.HSet(ctx, prefix+"lease:split", "holder", "", "token", 10*i).Err(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	leases, errs := a.AcquireMany(ctx, []providers.AcquireRequest{
		{Key: "split", Holder: "a", TTL: 10 * time.Second},
		{Key: "plain", Holder: "a", TTL: 10 * time.Second},
	})
	if errs[0] != nil || leases[0].Token != 22 {
		t.Fatalf("AcquireMany of a key whose servers disagree: %+v, %v, want token 22", leases[0], errs[0])
	}
	if errs[1] != nil || leases[1].Token != 1 {
		t.Fatalf("AcquireMany of a plain key: %+v, %v", leases[1], errs[1])
	}
	for _, addr := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		tok, _ := c.HGet(ctx, prefix+"lease:split", "token").Result()
		live, _ := c.Get(ctx, prefix+"live:split").Result()
		c.Close()
		if tok != "22" || live != "a" {
			t.Fatalf("server %s: token %q, live %q, want 22 and a", addr, tok, live)
		}
	}
}

// TestRedlockBatchServerLostData: a server restarted empty is brought up to
// the quorum's counter by AcquireMany too; its own term of a smaller token
// is undone.
func TestRedlockBatchServerLostData(t *testing.T) {
	t.Parallel()
	s, procs, ctx := fresh(t, 3)
	a := client(t, s)
	reqs := []providers.AcquireRequest{{Key: "x", Holder: "a", TTL: 10 * time.Second}, {Key: "y", Holder: "a", TTL: 10 * time.Second}}
	for range 3 {
		leases, errs := a.AcquireMany(ctx, reqs)
		for i := range reqs {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
		}
		if errs := a.ReleaseMany(ctx, leases); errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
	}
	restart(t, procs, s.Addresses, 2)
	// The first call may meet the connection the restart broke.
	var leases []providers.Lease
	var errs []error
	for deadline := time.Now().Add(10 * time.Second); ; {
		leases, errs = a.AcquireMany(ctx, reqs)
		if errs[0] == nil && errs[1] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(errs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i, l := range leases {
		if l.Token <= 3 {
			t.Fatalf("%s after a server lost its data: token %d, want more than 3", reqs[i].Key, l.Token)
		}
	}
	if errs := a.ReleaseMany(ctx, leases); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	procs[0].Stop()
	leases, errs = a.AcquireMany(ctx, reqs)
	for i, l := range leases {
		if errs[i] != nil || l.Token <= 4 {
			t.Fatalf("%s with server 0 down and server 2 restarted: %+v, %v", reqs[i].Key, l, errs[i])
		}
	}
}

// TestNotify: one subscription hears every key's acquire and release, and
// calls changed("") after it lost its connection and got it back.
func TestNotify(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3} {
		t.Run(map[int]string{1: "single", 3: "redlock"}[n], func(t *testing.T) {
			t.Parallel()
			addrs, procs := servers(t, n)
			s := redis.Settings{Addresses: addrs, Prefix: randomPrefix()}
			a, b := client(t, s), client(t, s)
			ctx := ctxT(t, 60*time.Second)
			got := make(chan string, 100)
			nctx, stop := context.WithCancel(ctx)
			if err := b.Notify(nctx, func(key string) { got <- key }); err != nil {
				t.Fatal(err)
			}
			want := func(key string) {
				t.Helper()
				timeout := time.After(10 * time.Second)
				for {
					select {
					case k := <-got:
						if k == key {
							return
						}
					case <-timeout:
						t.Fatalf("no changed(%q) within 10s", key)
					}
				}
			}
			for _, key := range []string{"one", "two"} {
				l := mustAcquire(t, a, key, "a")
				want(key)
				if err := a.Release(ctx, l); err != nil {
					t.Fatal(err)
				}
				want(key)
			}
			leases, _ := a.AcquireMany(ctx, []providers.AcquireRequest{{Key: "three", Holder: "a", TTL: time.Minute}})
			want("three")
			a.ReleaseMany(ctx, leases)
			want("three")

			restart(t, procs, addrs, 0)
			want("")
			// Let the subscription settle, then hear a release again.
			time.Sleep(time.Second)
			var l providers.Lease
			var err error
			for deadline := time.Now().Add(10 * time.Second); ; {
				if l, err = a.Acquire(ctx, providers.AcquireRequest{Key: "four", Holder: "a", TTL: time.Minute}); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("Acquire after the restart: %v", err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err := a.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
			want("four")

			// After ctx ends, changed is not called any more: a witness
			// subscription, still live, hears "five" from a quorum of the
			// servers (Notify returns once a quorum confirmed it), and b,
			// whose ctx ended before, does not.
			witness := make(chan string, 100)
			w := open(t, s)
			t.Cleanup(func() { w.Close() })
			if err := w.Notify(ctx, func(key string) { witness <- key }); err != nil {
				t.Fatal(err)
			}
			stop()
			l = mustAcquire(t, a, "five", "a")
			timeout := time.After(10 * time.Second)
			for heard := 0; heard < n/2+1; {
				select {
				case k := <-witness:
					if k == "five" {
						heard++
					}
				case <-timeout:
					t.Fatalf("the witness heard changed(\"five\") from %d of a quorum of %d servers within 10s", heard, n)
				}
			}
			for len(got) > 0 {
				if k := <-got; k == "five" {
					t.Fatalf("changed(%q) after ctx ended", k)
				}
			}
			_ = a.Release(ctx, l)
		})
	}
}

// TestNotifyPrefix: the pattern matches the prefix literally, whatever
// glob characters it holds, and nothing under another prefix.
func TestNotifyPrefix(t *testing.T) {
	t.Parallel()
	addrs, _ := servers(t, 1)
	odd := open(t, redis.Settings{Addresses: addrs, Prefix: "t*[x]?:"})
	other := open(t, redis.Settings{Addresses: addrs, Prefix: "tAx!:"})
	t.Cleanup(func() { odd.Close(); other.Close() })
	ctx := ctxT(t, 30*time.Second)
	got := make(chan string, 10)
	if err := odd.Notify(ctx, func(key string) { got <- key }); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, other, "job", "a")
	mustAcquire(t, odd, "job", "a")
	// One subscription hears the server's messages in order: once it has
	// heard the marker, published last, it has heard what came before.
	mustAcquire(t, odd, "marker", "a")
	var heard []string
	for timeout := time.After(5 * time.Second); !slices.Contains(heard, "marker"); {
		select {
		case k := <-got:
			heard = append(heard, k)
		case <-timeout:
			t.Fatalf("no changed(\"marker\") within 5s; heard %q", heard)
		}
	}
	if !slices.Equal(heard, []string{"job", "marker"}) {
		t.Fatalf("heard %q, want [job marker]: another prefix's key heard too, or this one's missed", heard)
	}
}

// TestNotifyDoesNotBlock: a changed that blocks holds up neither the
// provider's operations nor Notify's other subscriber.
func TestNotifyDoesNotBlock(t *testing.T) {
	t.Parallel()
	s, _, ctx := fresh(t, 1)
	a := client(t, s)
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	if err := a.Notify(ctx, func(string) { <-block }); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 50 {
		l := mustAcquire(t, a, fmt.Sprint("k", i), "a")
		if err := a.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("50 acquire/release pairs took %s with a blocked changed", d)
	}
}
