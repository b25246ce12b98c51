package redis_test

import (
	"context"
	"errors"
	"fmt"
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
		a, b := open(t, s), open(t, s)
		t.Cleanup(func() { a.Close(); b.Close() })
		ctx := ctxT(t, 30*time.Second)
		const ttl = 10 * time.Second
		l, err := a.Acquire(ctx, "job", "a", ttl)
		if err != nil {
			t.Fatal(err)
		}
		remaining := func() time.Duration {
			t.Helper()
			_, err := b.Acquire(ctx, "job", "b", ttl)
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
		time.Sleep(500 * time.Millisecond)
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
		short, err := a.Acquire(ctx, "short", "a", 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Acquire(ctx, "short", "b", ttl)
		var held *providers.HeldError
		if !errors.As(err, &held) || held.Remaining <= 0 {
			t.Fatalf("Acquire of a held short lease: %v", err)
		}
		time.Sleep(held.Remaining + 5*time.Millisecond)
		if nl, err := b.Acquire(ctx, "short", "b", ttl); err != nil || nl.Token != short.Token+1 {
			t.Fatalf("Acquire %s after Remaining: %+v, %v", held.Remaining, nl, err)
		}
	})
}

// TestBatch: AcquireMany, RenewMany and ReleaseMany judge each item as the
// single operations do: new terms with token + 1, the caller's own lease
// taken again, a held lease refused with its holder and Remaining, a repeat
// of a key judged after the first, a bad item refused alone.
func TestBatch(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, addrs []string) {
		s := redis.Settings{Addresses: addrs, Prefix: randomPrefix()}
		a, b := open(t, s), open(t, s)
		t.Cleanup(func() { a.Close(); b.Close() })
		ctx := ctxT(t, 60*time.Second)
		const n = 1200 // more than one pipeline
		const ttl = 20 * time.Second
		held := mustAcquire(t, b, "k-7", "b")
		mine := mustAcquire(t, a, "k-8", "a")
		old := mustAcquire(t, a, "k-9", "a")
		old.Value = "carried"
		if err := a.Release(ctx, old); err != nil {
			t.Fatal(err)
		}
		var reqs []providers.AcquireRequest
		for i := range n {
			reqs = append(reqs, providers.AcquireRequest{Key: fmt.Sprintf("k-%d", i), Holder: "a", TTL: ttl})
		}
		reqs = append(reqs,
			providers.AcquireRequest{Key: "k-1", Holder: "c", TTL: ttl}, // repeat: held by a by then
			providers.AcquireRequest{Key: "", Holder: "a", TTL: ttl},    // invalid
		)
		start := time.Now()
		leases, errs := a.AcquireMany(ctx, reqs)
		t.Logf("AcquireMany of %d: %s", len(reqs), time.Since(start))
		if len(leases) != len(reqs) || len(errs) != len(reqs) {
			t.Fatalf("got %d leases and %d errors for %d requests", len(leases), len(errs), len(reqs))
		}
		for i := range n {
			l, err := leases[i], errs[i]
			switch i {
			case 7:
				var h *providers.HeldError
				if !errors.As(err, &h) || h.Holder != "b" || h.Token != held.Token || h.Remaining <= 0 || h.Remaining > time.Minute {
					t.Fatalf("k-7: %v (%+v), want held by b token %d with a Remaining", err, h, held.Token)
				}
			case 8:
				if err != nil || l.Token != mine.Token+1 {
					t.Fatalf("k-8, already a's: %+v, %v, want token %d", l, err, mine.Token+1)
				}
			case 9:
				if err != nil || l.Token != old.Token+1 || l.Value != "carried" {
					t.Fatalf("k-9, released: %+v, %v, want token %d and the value", l, err, old.Token+1)
				}
			default:
				if err != nil || l.Token != 1 || l.Holder != "a" || l.Key != reqs[i].Key || l.TTL != ttl || l.Expires.IsZero() {
					t.Fatalf("%s: %+v, %v, want a first term", reqs[i].Key, l, err)
				}
			}
		}
		var h *providers.HeldError
		if !errors.As(errs[n], &h) || h.Holder != "a" || h.Token != 1 {
			t.Fatalf("repeat of k-1 by c: %v, want held by a", errs[n])
		}
		if errs[n+1] == nil || errors.Is(errs[n+1], providers.ErrHeld) {
			t.Fatalf("empty key: %v, want a refusal", errs[n+1])
		}
		for i := range n {
			if got, err := b.Observe(ctx, reqs[i].Key); i != 7 && (err != nil || got.Holder != "a" || got.Token != leases[i].Token) {
				t.Fatalf("Observe %s = %+v, %v", reqs[i].Key, got, err)
			}
		}

		// RenewMany: every lease of a, one of them lost meanwhile.
		var mineNow []providers.Lease
		for i := range n {
			if i != 7 {
				l := leases[i]
				l.Value = "v-" + l.Key
				mineNow = append(mineNow, l)
			}
		}
		stolen := mineNow[3]
		if err := a.Release(ctx, stolen); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, b, stolen.Key, "b")
		renewed, rerrs := a.RenewMany(ctx, mineNow)
		for i, l := range mineNow {
			if i == 3 {
				if !errors.Is(rerrs[i], providers.ErrLost) {
					t.Fatalf("RenewMany of a lost lease: %v, want ErrLost", rerrs[i])
				}
				continue
			}
			if rerrs[i] != nil || renewed[i].Token != l.Token || renewed[i].Value != l.Value || !renewed[i].Expires.After(l.Expires.Add(-time.Second)) {
				t.Fatalf("RenewMany %s: %+v, %v", l.Key, renewed[i], rerrs[i])
			}
		}

		// ReleaseMany: the values stay, the holder goes, tokens count on.
		rel := append([]providers.Lease(nil), renewed...)
		rel[3] = stolen
		relErrs := a.ReleaseMany(ctx, rel)
		for i, l := range rel {
			if i == 3 {
				if !errors.Is(relErrs[i], providers.ErrLost) {
					t.Fatalf("ReleaseMany of a lost lease: %v, want ErrLost", relErrs[i])
				}
				continue
			}
			if relErrs[i] != nil {
				t.Fatalf("ReleaseMany %s: %v", l.Key, relErrs[i])
			}
		}
		for _, l := range rel[:50] {
			got, err := b.Observe(ctx, l.Key)
			if l.Key == stolen.Key {
				continue
			}
			if err != nil || got.Holder != "" || got.Token != l.Token || got.Value != l.Value {
				t.Fatalf("Observe %s after ReleaseMany = %+v, %v, want free, token %d, value %q", l.Key, got, err, l.Token, l.Value)
			}
		}
		last := map[string]uint64{}
		for _, l := range rel {
			last[l.Key] = l.Token
		}
		last[held.Key] = held.Token
		breqs := append([]providers.AcquireRequest(nil), reqs[:20]...)
		for i := range breqs {
			breqs[i].Holder = "b"
		}
		again, errs := b.AcquireMany(ctx, breqs)
		for i, l := range again {
			want := last[reqs[i].Key] + 1
			if reqs[i].Key == stolen.Key {
				want = stolen.Token + 2 // b's term after a's release
			}
			if errs[i] != nil || l.Token != want {
				t.Fatalf("b's AcquireMany after ReleaseMany, %s: %+v, %v, want token %d", reqs[i].Key, l, errs[i], want)
			}
		}
	})
}

// TestBatchStoreDown: with the store unreachable every item of every batch
// gets a store error, never a verdict or a success.
func TestBatchStoreDown(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3} {
		p := open(t, redis.Settings{Addresses: closedAddrs(t, n), Prefix: "electd:"})
		t.Cleanup(func() { p.Close() })
		ctx := ctxT(t, 30*time.Second)
		reqs := []providers.AcquireRequest{{Key: "a", Holder: "h", TTL: time.Second}, {Key: "b", Holder: "h", TTL: time.Second}}
		leases, errs := p.AcquireMany(ctx, reqs)
		for i := range reqs {
			if leases[i].Token != 0 {
				t.Fatalf("AcquireMany with the store down gave %+v", leases[i])
			}
			wantStoreError(t, "AcquireMany with the store down", errs[i])
		}
		ls := []providers.Lease{{Key: "a", Holder: "h", Token: 1, TTL: time.Second}, {Key: "b", Holder: "h", Token: 1, TTL: time.Second}}
		_, errs = p.RenewMany(ctx, ls)
		for i := range ls {
			wantStoreError(t, "RenewMany with the store down", errs[i])
		}
		for _, err := range p.ReleaseMany(ctx, ls) {
			wantStoreError(t, "ReleaseMany with the store down", err)
		}
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
	addrs, _ := servers(t, 3)
	prefix := randomPrefix()
	s := redis.Settings{Addresses: addrs, Prefix: prefix}
	a := open(t, s)
	t.Cleanup(func() { a.Close() })
	ctx := ctxT(t, 30*time.Second)
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
	addrs, procs := servers(t, 3)
	s := redis.Settings{Addresses: addrs, Prefix: randomPrefix()}
	a := open(t, s)
	t.Cleanup(func() { a.Close() })
	ctx := ctxT(t, 30*time.Second)
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
	restart(t, procs, addrs, 2)
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
			a, b := open(t, s), open(t, s)
			t.Cleanup(func() { a.Close(); b.Close() })
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
				if l, err = a.Acquire(ctx, "four", "a", time.Minute); err == nil {
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

			// After ctx ends, changed is not called any more.
			stop()
			time.Sleep(100 * time.Millisecond)
			for len(got) > 0 {
				<-got
			}
			l = mustAcquire(t, a, "five", "a")
			time.Sleep(200 * time.Millisecond)
			if len(got) > 0 {
				t.Fatalf("changed(%q) after ctx ended", <-got)
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
	select {
	case k := <-got:
		if k != "job" {
			t.Fatalf("changed(%q)", k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification")
	}
	time.Sleep(100 * time.Millisecond)
	if len(got) > 0 {
		t.Fatalf("heard another prefix's key too: %q", <-got)
	}
}

// TestNotifyDoesNotBlock: a changed that blocks holds up neither the
// provider's operations nor Notify's other subscriber.
func TestNotifyDoesNotBlock(t *testing.T) {
	t.Parallel()
	addrs, _ := servers(t, 1)
	s := redis.Settings{Addresses: addrs, Prefix: randomPrefix()}
	a := open(t, s)
	t.Cleanup(func() { a.Close() })
	ctx := ctxT(t, 30*time.Second)
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
