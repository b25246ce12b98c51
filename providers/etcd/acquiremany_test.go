package etcd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
)

// TestAcquireReleaseManyRequests acquires 300 keys in one AcquireMany and
// releases them in one ReleaseMany, and counts from etcd's /metrics the
// requests that reached it: reads and writes in transactions of 64 keys,
// no LeaseGrant (the new terms go on the session the first Acquires
// granted), one LeaseTimeToLive per holder's session and no LeaseRevoke. Each item is judged as Acquire and Release judge it.
//
//	go test -count=1 -v -run TestAcquireReleaseManyRequests ./providers/etcd/
func TestAcquireReleaseManyRequests(t *testing.T) {
	t.Parallel()
	endpoint, s := ownServer(t)
	p, other := open(t, s), open(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 300
	const (
		theirs   = 0 // held by b
		mine     = 1 // already a's: a new term
		released = 2 // released with a value: token + 1, value carried
		repeat   = n // k-003 again, by c: held by a by then
		invalid  = n + 1
	)
	held, err := other.Acquire(ctx, providers.AcquireRequest{Key: "k-000", Holder: "b", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	own, err := p.Acquire(ctx, providers.AcquireRequest{Key: "k-001", Holder: "a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	old, err := p.Acquire(ctx, providers.AcquireRequest{Key: "k-002", Holder: "a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	old.Value = "carried"
	if err := p.Release(ctx, old); err != nil {
		t.Fatal(err)
	}
	var reqs []providers.AcquireRequest
	for i := range n {
		reqs = append(reqs, providers.AcquireRequest{Key: fmt.Sprintf("k-%03d", i), Holder: "a", TTL: time.Minute})
	}
	reqs = append(reqs,
		providers.AcquireRequest{Key: "k-003", Holder: "c", TTL: time.Minute},
		providers.AcquireRequest{Key: "bad/key", Holder: "a", TTL: time.Minute},
	)
	before := scrape(t, endpoint)
	start := time.Now()
	leases, errs := p.AcquireMany(ctx, reqs)
	took := time.Since(start)
	after := scrape(t, endpoint)
	d := after.sub(before)
	t.Logf("AcquireMany of %d keys: %s; requests: %s", len(reqs), took.Round(time.Millisecond), d)
	for i, l := range leases[:n] {
		err := errs[i]
		switch i {
		case theirs:
			var h *providers.HeldError
			if !errors.As(err, &h) || h.Holder != "b" || h.Token != held.Token {
				t.Fatalf("k-000: %v, want held by b token %d", err, held.Token)
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
			if err != nil || l.Token != 1 || l.Holder != "a" || l.Key != reqs[i].Key || l.Expires.Before(start.Add(time.Minute)) {
				t.Fatalf("%s: %+v, %v, want a first term", reqs[i].Key, l, err)
			}
		}
	}
	var h *providers.HeldError
	if !errors.As(errs[repeat], &h) || h.Holder != "a" || h.Token != 1 {
		t.Fatalf("repeat of k-003 by c: %v, want held by a", errs[repeat])
	}
	if errs[invalid] == nil || errors.Is(errs[invalid], providers.ErrHeld) {
		t.Fatalf("key with a slash: %v, want a refusal", errs[invalid])
	}
	// 5 read and 5 write transactions, one keep-alive of the session (sent
	// beside the reads), one LeaseTimeToLive for the holder's session of
	// the held key, and the repeat's Acquire (a read, its own keep-alive
	// beside it, and the LeaseTimeToLive of its HeldError): no request per
	// new term or held key.
	if d.started["Txn"] > 12 || d.started["LeaseGrant"] != 0 || d.msgs["LeaseKeepAlive"] > 2 || d.started["LeaseTimeToLive"] != 2 || d.started["LeaseRevoke"] != 0 {
		t.Errorf("AcquireMany sent %s", d)
	}
	for i := 0; i < n; i += 37 {
		o, err := other.Observe(ctx, reqs[i].Key)
		if i != theirs && (err != nil || o.Holder != "a" || o.Token != leases[i].Token) {
			t.Fatalf("Observe %s after AcquireMany: %+v, %v", reqs[i].Key, o, err)
		}
	}
	// Renew one term: its key is on the session.
	if _, err := p.Renew(ctx, leases[5]); err != nil {
		t.Fatalf("Renew after AcquireMany: %v", err)
	}

	// ReleaseMany of a's terms, one of them taken meanwhile.
	mineNow, stolen := providertest.OneStolen(t, p, other, leases[:n], theirs)
	before = scrape(t, endpoint)
	rerrs := p.ReleaseMany(ctx, mineNow)
	d = scrape(t, endpoint).sub(before)
	t.Logf("ReleaseMany of %d keys: requests: %s", len(mineNow), d)
	for i, l := range mineNow {
		if l.Key == stolen.Key {
			if !errors.Is(rerrs[i], providers.ErrLost) {
				t.Fatalf("ReleaseMany of a lost lease: %v, want ErrLost", rerrs[i])
			}
			continue
		}
		if rerrs[i] != nil {
			t.Fatalf("ReleaseMany %s: %v", l.Key, rerrs[i])
		}
	}
	// The terms a wrote are released without a read, 64 to a transaction;
	// the stolen one, which a released and forgot, is read (and found lost).
	if want := (len(mineNow)-1+keysPerTxn-1)/keysPerTxn + 1; d.started["Txn"] != want || d.started["LeaseRevoke"] != 0 {
		t.Errorf("ReleaseMany sent %s, want %d transactions", d, want)
	}
	for i := 0; i < len(mineNow); i += 41 {
		l := mineNow[i]
		if l.Key == stolen.Key {
			continue
		}
		o, err := other.Observe(ctx, l.Key)
		if err != nil || o.Holder != "" || o.Token != l.Token || o.Value != l.Value {
			t.Fatalf("Observe %s after ReleaseMany: %+v, %v; want free, token %d, value %q", l.Key, o, err, l.Token, l.Value)
		}
	}
}

// TestNotifyDown: with etcd unreachable Notify fails within its
// dial_timeout (the batches' store errors are the conformance suite's
// BatchStoreDown).
func TestNotifyDown(t *testing.T) {
	t.Parallel()
	p := open(t, Settings{Endpoints: []string{teststore.Addr(teststore.MustFreePort(t))}, DialTimeout: time.Second})
	start := time.Now()
	if err := p.Notify(context.Background(), func(string) {}); err == nil {
		t.Fatal("Notify with etcd down succeeded")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Notify failed only after %s with a 1s dial_timeout", took)
	}
}

// testRemaining: a refused Acquire reports etcd's time to live of the
// holder's term, rounded up to its second; a candidate that waits it out
// finds the term gone.
func testRemaining(t *testing.T, endpoint string) {
	s := Settings{Endpoints: []string{endpoint}, Prefix: randomPrefix(t)}
	a, b := open(t, s), open(t, s)
	ctx := context.Background()
	la, h := providertest.Refused(t, a, b, "job", 3*time.Second)
	if h.Remaining < 2*time.Second || h.Remaining > 3*time.Second {
		t.Fatalf("Remaining right after a 3s Acquire = %s, want 3s (2 s truncated, + 1)", h.Remaining)
	}
	time.Sleep(h.Remaining)
	// etcd's expiry sweep runs every 500 ms.
	deadline := time.Now().Add(time.Second)
	for {
		lb, err := b.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: time.Minute})
		if err == nil {
			if lb.Token != la.Token+1 {
				t.Fatalf("token %d after expiry, want %d", lb.Token, la.Token+1)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still refused 1s after Remaining ran out: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testNotify: one prefix watch reports every key's acquire, release and
// expiry, not a Value write, and nothing of another prefix.
func testNotify(t *testing.T, endpoint string) {
	s := Settings{Endpoints: []string{endpoint}, Prefix: randomPrefix(t)}
	a, b := open(t, s), open(t, s)
	stranger := open(t, Settings{Endpoints: []string{endpoint}, Prefix: randomPrefix(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan string, 100)
	// changed("") says a watch that etcd ended was started again (a loaded
	// server can end one): the changes between its end and the new watch
	// are not reported, and the hint stands for them; the agent wakes
	// every candidate on it. So a hint may stand in for a change waited for
	// here, and is no change where none is expected.
	if err := b.Notify(ctx, func(key string) { got <- key }); err != nil {
		t.Fatal(err)
	}
	// wantKeys waits for changed(k) of every key, or a hint that stands for
	// those still missing.
	wantKeys := func(within time.Duration, keys ...string) {
		t.Helper()
		missing := map[string]bool{}
		for _, k := range keys {
			missing[k] = true
		}
		hinted := false
		deadline := time.After(within)
		for len(missing) > 0 {
			select {
			case k := <-got:
				switch {
				case k == "":
					t.Log(`changed(""): the watch was started again`)
					hinted = true
				case missing[k]:
					delete(missing, k)
				default:
					t.Fatalf("changed(%q), want changed of %q", k, keys)
				}
			case <-deadline:
				if !hinted {
					t.Fatalf("no changed of %v within %s", slices.Sorted(maps.Keys(missing)), within)
				}
				return
			}
		}
	}
	want := func(key string, within time.Duration) { t.Helper(); wantKeys(within, key) }
	// wantBoth: one batch's keys change in one etcd revision, in no
	// promised order.
	wantBoth := func(a, b string) { t.Helper(); wantKeys(time.Second, a, b) }
	// quiet: nothing was heard since the last change waited for. A watch
	// reports changes in revision order: once it has reported a marker
	// key acquired now, it has reported any change before it, and
	// wantKeys fails on any other key.
	markers := 0
	quiet := func() {
		t.Helper()
		markers++
		key := fmt.Sprintf("marker-%d", markers)
		if _, err := a.Acquire(ctx, providers.AcquireRequest{Key: key, Holder: "a", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		want(key, 5*time.Second)
	}
	if _, err := stranger.Acquire(ctx, providers.AcquireRequest{Key: "one", Holder: "x", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	quiet()
	l, err := a.Acquire(ctx, providers.AcquireRequest{Key: "one", Holder: "a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	want("one", time.Second)
	l.Value = "new value"
	if _, err := a.Renew(ctx, l); err != nil {
		t.Fatal(err)
	}
	quiet()
	if err := a.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	want("one", time.Second)
	if _, err := a.Acquire(ctx, providers.AcquireRequest{Key: "short", Holder: "a", TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	want("short", time.Second)
	want("short", 5*time.Second) // etcd deletes the key at expiry
	leases, errs := a.AcquireMany(ctx, []providers.AcquireRequest{{Key: "m1", Holder: "a", TTL: time.Minute}, {Key: "m2", Holder: "a", TTL: time.Minute}})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	wantBoth("m1", "m2")
	a.ReleaseMany(ctx, leases)
	wantBoth("m1", "m2")
	// After ctx ends, changed is not called any more: a witness watch,
	// still live, hears the next acquisition, and b's does not.
	witness := make(chan string, 100)
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if err := a.Notify(wctx, func(key string) { witness <- key }); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := a.Acquire(context.Background(), providers.AcquireRequest{Key: "after", Holder: "a", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for timeout := time.After(5 * time.Second); ; {
		select {
		case k := <-witness:
			if k != "after" {
				continue
			}
		case <-timeout:
			t.Fatal(`the witness heard no changed("after") within 5s`)
		}
		break
	}
	select {
	case k := <-got:
		t.Fatalf("changed(%q) after ctx ended", k)
	default:
	}
}

// testNotifyCompacted: a watch that etcd ends because its revision was
// compacted is started again from the current revision, with changed("").
func testNotifyCompacted(t *testing.T, endpoint string) {
	p := open(t, Settings{Endpoints: []string{endpoint}, Prefix: randomPrefix(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := p.client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, err := cli.Put(ctx, p.leaseKey("x"), "{}")
	if err != nil {
		t.Fatal(err)
	}
	last, err := cli.Put(ctx, p.leaseKey("y"), "{}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, last.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 10)
	go p.notify(ctx, cli, first.Header.Revision, func(key string) { got <- key })
	select {
	case k := <-got:
		if k != "" {
			t.Fatalf("first call changed(%q), want changed(\"\") for the compacted watch", k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no changed(\"\") after the watch's revision was compacted")
	}
	if _, err := p.Acquire(ctx, providers.AcquireRequest{Key: "z", Holder: "a", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-got:
		if k != "z" {
			t.Fatalf("changed(%q), want z", k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification on the restarted watch")
	}
}
