package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/electd/electd/providers"
)

// TestCrashTakeover: a holder stops renewing (a crash: no Renew, no
// Release); a candidate polling as the agent does (every 100 ms, or when
// HeldError.Remaining says), with Acquire and with AcquireMany (as the
// agent asks), revokes the expired lease itself instead of waiting for
// etcd's expiry loop (every 500 ms), and takes the term.
//
//	go test -count=1 -run TestCrashTakeover -v ./providers/etcd/
func TestCrashTakeover(t *testing.T) {
	t.Parallel()
	endpoint, s := ownServer(t)
	cand := open(t, s)
	const ttl, rounds, poll = 2 * time.Second, 6, 100 * time.Millisecond
	before := scrape(t, endpoint)
	var late []time.Duration
	for round := range rounds {
		key := fmt.Sprintf("job-%d", round)
		holder := open(t, s) // a process of its own, as a crashed agent was
		ctx := context.Background()
		la, err := holder.Acquire(ctx, providers.AcquireRequest{Key: key, Holder: "a", TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		// etcd granted or refreshed the session after the Acquire was sent
		// and before it was answered: the lease ends by then + ttl.
		end := time.Now().Add(ttl)
		for {
			var lb providers.Lease
			if round%2 == 0 {
				lb, err = cand.Acquire(ctx, providers.AcquireRequest{Key: key, Holder: "b", TTL: ttl})
			} else { // as the agent asks
				ls, errs := cand.AcquireMany(ctx, []providers.AcquireRequest{{Key: key, Holder: "b", TTL: ttl}})
				lb, err = ls[0], errs[0]
			}
			if err == nil {
				if lb.Token != la.Token+1 {
					t.Fatalf("token %d after the crash, want %d", lb.Token, la.Token+1)
				}
				late = append(late, time.Since(end))
				break
			}
			var h *providers.HeldError
			if !errors.As(err, &h) {
				t.Fatal(err)
			}
			if time.Until(end) > ttl/2+time.Second {
				t.Fatalf("%s left of the term, and the candidate took it", time.Until(end))
			}
			wait := poll
			if h.Remaining > 0 {
				wait = min(wait, h.Remaining+time.Millisecond)
			}
			time.Sleep(wait)
		}
		_ = cand.Release(ctx, providers.Lease{Key: key, Holder: "b", Token: la.Token + 1, TTL: ttl})
	}
	// etcd's own loop would revoke them up to 500 ms after expiry; the
	// candidate does it first, unless the loop happens to run just then.
	wantRevokedFirst(t, scrape(t, endpoint).sub(before), late, "takeover", "candidate", 250*time.Millisecond)
}

// TestLiveLeaseNotRevoked: a holder that renews late in each term (its
// lease down to ~0.5 s, so that etcd answers TTL 0 for a while every
// cycle) is never revoked by a candidate asking every 20 ms: TTL 0 alone
// is not expiry.
func TestLiveLeaseNotRevoked(t *testing.T) {
	t.Parallel()
	zeros := 0
	whileRenewed(t, 1500*time.Millisecond, 8*time.Second, func(cand *Provider, ttl time.Duration, renewed time.Time) {
		_, err := cand.Acquire(context.Background(), providers.AcquireRequest{Key: "job", Holder: "b", TTL: ttl})
		var h *providers.HeldError
		if !errors.As(err, &h) {
			t.Fatalf("candidate's Acquire of a live lease (renewed %s ago): %v", time.Since(renewed), err)
		}
		if h.Remaining < time.Second {
			zeros++
		}
	})
	if zeros == 0 {
		t.Fatal("etcd never answered TTL 0: the case did not happen")
	}
	t.Logf("%d answers with less than a second left, no revoke", zeros)
}

// TestLiveLeaseOftenRenewedNotRevoked: a holder renewing a 2 s lease every
// 500 ms (etcd answers TTL 1 at every read, and a renewal between two reads
// shows in neither) is never revoked by a candidate asking every 20 ms.
func TestLiveLeaseOftenRenewedNotRevoked(t *testing.T) {
	t.Parallel()
	whileRenewed(t, 500*time.Millisecond, 6*time.Second, func(cand *Provider, ttl time.Duration, renewed time.Time) {
		ls, errs := cand.AcquireMany(context.Background(), []providers.AcquireRequest{{Key: "job", Holder: "b", TTL: ttl}})
		if !errors.Is(errs[0], providers.ErrHeld) {
			t.Fatalf("candidate's AcquireMany of a live lease (renewed %s ago): %+v, %v", time.Since(renewed), ls[0], errs[0])
		}
	})
}

// whileRenewed has a holder take "job" for 2 s on a server of its own and
// renew it whenever more than every has passed since its last renewal was
// sent, for d, while ask runs every 20 ms on another client, the candidate
// (renewed: when the holder's last renewal was sent). No lease may be
// revoked meanwhile.
func whileRenewed(t *testing.T, every, d time.Duration, ask func(cand *Provider, ttl time.Duration, renewed time.Time)) {
	t.Helper()
	endpoint, s := ownServer(t)
	holder, cand := open(t, s), open(t, s)
	ctx := context.Background()
	const ttl = 2 * time.Second
	la, err := holder.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	before := scrape(t, endpoint)
	stop := time.Now().Add(d)
	renewed := time.Now()
	for time.Now().Before(stop) {
		if time.Since(renewed) > every {
			sent := time.Now()
			if la, err = holder.Renew(ctx, la); err != nil {
				t.Fatalf("the holder's renewal %s after the last: %v", sent.Sub(renewed), err)
			}
			renewed = sent
		}
		ask(cand, ttl, renewed)
		time.Sleep(20 * time.Millisecond)
	}
	if d := scrape(t, endpoint).sub(before); d.started["LeaseRevoke"] != 0 {
		t.Fatalf("LeaseRevoke %d: a live lease was revoked", d.started["LeaseRevoke"])
	}
}

// TestChain: the rule that proves a lease expired, on given reads.
func TestChain(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type read struct {
		sent, answered int // ms
		ttl            int64
	}
	for _, tc := range []struct {
		name    string
		granted int64
		reads   []read
		want    bool // the last read proves expiry
	}{
		{"one read of TTL 0 proves nothing", 2, []read{{0, 5, 0}}, false},
		{"TTL 0 for over a second, reads close", 2, []read{{0, 5, 0}, {400, 405, 0}, {800, 805, 0}, {1030, 1035, 0}}, true},
		{"TTL 0 for under a second", 2, []read{{0, 5, 0}, {400, 405, 0}, {800, 805, 0}, {1000, 1005, 0}}, false},
		{"reads too far apart for a renewal to show", 2, []read{{0, 5, 0}, {1030, 1035, 0}}, false},
		{"a renewal seen restarts the run", 2, []read{{0, 5, 0}, {500, 505, 1}, {900, 905, 0}, {1100, 1105, 0}}, false},
		{"TTL 1 reads bound nothing: a renewal after them is unseen", 2, []read{{0, 5, 1}, {600, 605, 1}, {1200, 1205, 1}, {1800, 1805, 1}, {2100, 2105, 0}}, false},
		{"from TTL 1 down, a second of zeros", 2, []read{{0, 5, 1}, {600, 605, 0}, {1200, 1205, 0}, {1630, 1635, 0}}, true},
		{"a 10 s lease read rarely", 10, []read{{0, 5, 3}, {3000, 3005, 0}, {4030, 4035, 0}}, true},
		{"a read sent before the run's newest and answered after it is left out", 2, []read{{0, 5, 0}, {900, 905, 0}, {100, 950, 0}, {1090, 1095, 0}}, true},
		{"a read that took longer than a renewal stays unseen is left out", 2, []read{{0, 1000, 0}, {10, 20, 0}, {900, 905, 0}, {1800, 1805, 0}}, true},
		{"granted 1 s: no renewal can be excluded", 1, []read{{0, 5, 0}, {200, 205, 0}, {1100, 1105, 0}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c ttlChains
			var got bool
			for i, r := range tc.reads {
				got, _ = c.observe(1, at(r.sent), at(r.answered), r.ttl, tc.granted)
				if got && i != len(tc.reads)-1 {
					t.Fatalf("read %d proved expiry already", i)
				}
			}
			if got != tc.want {
				t.Fatalf("expired = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestProbeRevokes: a candidate asks about a crashed holder's 2 s lease
// twice (refused), then only listens (Notify), as an agent does between
// its attempts; its prober proves the lease expired and revokes it, and the
// deletion is heard soon after the lease's end instead of at etcd's sweep
// (every 500 ms) or at the candidate's next read.
//
//	go test -count=1 -run TestProbeRevokes -v ./providers/etcd/
func TestProbeRevokes(t *testing.T) {
	t.Parallel()
	endpoint, s := ownServer(t)
	cand := open(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heard := make(chan string, 16)
	if err := cand.Notify(ctx, func(key string) { heard <- key }); err != nil {
		t.Fatal(err)
	}
	const ttl, rounds = 2 * time.Second, 4
	before := scrape(t, endpoint)
	var late []time.Duration
	for round := range rounds {
		key := fmt.Sprintf("job-%d", round)
		holder := open(t, s) // a process of its own, as a crashed agent was
		if _, err := holder.Acquire(ctx, providers.AcquireRequest{Key: key, Holder: "a", TTL: ttl}); err != nil {
			t.Fatal(err)
		}
		end := time.Now().Add(ttl) // the latest the lease can end (see TestCrashTakeover)
		if k := <-heard; k != key {
			t.Fatalf("heard %q, want the acquire of %q", k, key)
		}
		for range 2 {
			if _, err := cand.Acquire(ctx, providers.AcquireRequest{Key: key, Holder: "b", TTL: ttl}); !errors.Is(err, providers.ErrHeld) {
				t.Fatalf("candidate's Acquire of the live lease: %v", err)
			}
			time.Sleep(time.Second) // an agent's attempts, spaced against the lease's real-time end
		}
		select {
		case k := <-heard:
			if k != key {
				t.Fatalf("heard %q, want the deletion of %q", k, key)
			}
			late = append(late, time.Since(end))
		case <-time.After(5 * time.Second):
			t.Fatalf("the deletion of %q was not heard", key)
		}
	}
	// etcd's sweep (every 500 ms) deletes it a median 250 ms late; it can
	// beat the prober only when it happens to run just then.
	wantRevokedFirst(t, scrape(t, endpoint).sub(before), late, "deletion", "prober", 150*time.Millisecond)
}

// wantRevokedFirst judges len(late) crashed holders: late is how long after
// each lease's end what happened (a "takeover"), d the requests etcd
// counted meanwhile. who (the "candidate") must have revoked most of the
// expired leases before etcd's own sweep did, and the median be within
// most.
func wantRevokedFirst(t *testing.T, d counts, late []time.Duration, what, who string, most time.Duration) {
	t.Helper()
	rounds := len(late)
	slices.Sort(late)
	t.Logf("%s after the end of the lease, %d crashes: %v (LeaseRevoke %d)", what, rounds, late, d.started["LeaseRevoke"])
	if d.started["LeaseRevoke"] < rounds/2 {
		t.Errorf("the %s revoked %d of %d expired leases, want most", who, d.started["LeaseRevoke"], rounds)
	}
	if med := late[len(late)/2]; med > most {
		t.Errorf("median %s %s after the lease's end, want within %s", what, med, most)
	}
}
