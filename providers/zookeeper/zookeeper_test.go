package zookeeper

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
)

func randomRoot(t *testing.T) string {
	return "/electd-test/" + providertest.UniqueName(t)
}

func open(t *testing.T, s Settings) *Provider {
	t.Helper()
	p := providertest.Open(t, New, s)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// notified subscribes p to the store's changes and returns the keys it is
// told of; past 16 unread, more are dropped.
func notified(t *testing.T, p *Provider) <-chan string {
	t.Helper()
	keys := make(chan string, 16)
	if err := p.Notify(providertest.Context(t), func(k string) {
		select {
		case keys <- k:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestZooKeeper runs the cases that share one ZooKeeper server, each under
// a root of its own. The cases that stop or cut off the server have one of
// their own.
func TestZooKeeper(t *testing.T) {
	addr, _ := teststore.StartZooKeeper(t)
	providertest.RunShared(t, addr, []providertest.Case{
		{Name: "Handover", Fn: testHandover},
		{Name: "SessionTimeoutBounds", Fn: testSessionTimeoutBounds},
		{Name: "RenewOtherTTL", Fn: testRenewOtherTTL},
		{Name: "CrashedHolder", Fn: testCrashedHolder},
		{Name: "Lapse", Fn: testLapse},
		{Name: "Digest", Fn: testDigest},
		{Name: "RootCreated", Fn: testRootCreated},
		{Name: "NotifyNewKey", Fn: testNotifyNewKey},
	})
	t.Run("Conformance", func(t *testing.T) { testConformance(t, addr) })
}

func testConformance(t *testing.T, addr string) {
	providertest.Run(t, func(t *testing.T) func(t *testing.T) providers.Provider {
		s := Settings{Servers: []string{addr}, Root: randomRoot(t)}
		return func(t *testing.T) providers.Provider { return providertest.Open(t, New, s) }
	}, providertest.Options{
		Unreachable: func(t *testing.T) providers.Provider {
			// Nothing listens there.
			return providertest.Open(t, New, Settings{Servers: []string{teststore.Addr(teststore.MustFreePort(t))}})
		},
		Notifier:    true,
		NoRemaining: "ZooKeeper does not tell a client how long another client's session has left",
	})
}

// testHandover measures a graceful handover as the agent sees it: the
// candidate, refused before, waits on Notify and acquires when told.
//
//	go test -count=1 -v -run 'TestZooKeeper/Handover' ./providers/zookeeper/
func testHandover(t *testing.T, addr string) {
	s := Settings{Servers: []string{addr}, Root: randomRoot(t)}
	a, b := open(t, s), open(t, s)
	providertest.Handover(t, a, b, providertest.HandoverOptions{Target: 100 * time.Millisecond})
}

// testSessionTimeoutBounds: the test server grants sessions of 200 ms to
// 60 s. A ttl above its maximum is refused with an error that says what to
// change (a shorter session would let ZooKeeper end a term before its
// leader stops); one below its minimum gets the longer session, which is
// safe.
func testSessionTimeoutBounds(t *testing.T, addr string) {
	p := open(t, Settings{Servers: []string{addr}, Root: randomRoot(t)})
	_, err := p.Acquire(providertest.Context(t), providers.AcquireRequest{Key: "long", Holder: "a", TTL: 90 * time.Second})
	if err == nil || errors.Is(err, providers.ErrHeld) || !strings.Contains(err.Error(), "maxSessionTimeout") {
		t.Fatalf("Acquire with a ttl above the server's maxSessionTimeout: %v, want an error naming maxSessionTimeout", err)
	}
	if got := providertest.MustObserve(t, p, "long"); got.Holder != "" {
		t.Fatalf("the refused Acquire took the lease: %+v", got)
	}
	l := providertest.MustAcquire(t, p, "short", "a", 100*time.Millisecond)
	s, err := p.session(providertest.Context(t), l.TTL, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.timeout(); got != 200*time.Millisecond {
		t.Fatalf("session timeout for a 100ms ttl: %s, want the server's minimum 200ms", got)
	}
	for _, ttl := range []time.Duration{time.Second, 2500 * time.Millisecond, 30 * time.Second} {
		s, err := p.session(providertest.Context(t), ttl, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.timeout(); got != ttl {
			t.Errorf("ttl %s: session timeout %s, want the ttl", ttl, got)
		}
	}
}

// testRenewOtherTTL: a Renew with another ttl moves the term's holder znode
// into the session of that ttl, token unchanged.
func testRenewOtherTTL(t *testing.T, addr string) {
	s := Settings{Servers: []string{addr}, Root: randomRoot(t)}
	p, q := open(t, s), open(t, s)
	l := providertest.MustAcquire(t, p, "job", "a", 5*time.Second)
	l.TTL = 7 * time.Second
	r, err := p.Renew(providertest.Context(t), l)
	if err != nil {
		t.Fatal(err)
	}
	if r.Token != l.Token {
		t.Fatalf("token %d after a renew with another ttl, want %d", r.Token, l.Token)
	}
	got := providertest.MustObserve(t, q, "job")
	if got.Holder != "a" || got.TTL != 7*time.Second || got.Token != l.Token {
		t.Fatalf("Observe = %+v, want holder a, ttl 7s, token %d", got, l.Token)
	}
	s7, err := p.session(providertest.Context(t), 7*time.Second, true)
	if err != nil {
		t.Fatal(err)
	}
	_, stat, err := s7.conn.Get(p.holderPath("job"))
	if err != nil {
		t.Fatal(err)
	}
	if stat.EphemeralOwner != s7.conn.SessionID() {
		t.Fatalf("holder znode owned by session %x, want the 7s session %x", stat.EphemeralOwner, s7.conn.SessionID())
	}
}

// testLapse: a live provider whose holder stops renewing loses the term one
// ttl after the last Renew was sent, though its session lives on (the
// client pings), and a subscriber hears of it.
func testLapse(t *testing.T, addr string) {
	s := Settings{Servers: []string{addr}, Root: randomRoot(t)}
	p, q := open(t, s), open(t, s)
	const ttl = 1500 * time.Millisecond
	l := providertest.MustAcquire(t, p, "job", "a", ttl)
	keys := notified(t, q)
	sent := time.Now()
	if _, err := p.Renew(providertest.Context(t), l); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-keys:
		if k != "job" && k != "" {
			t.Fatalf("notified of %q", k)
		}
		if d := time.Since(sent); d < ttl {
			t.Fatalf("the term ended %s after its last Renew was sent, before its ttl %s", d, ttl)
		} else {
			t.Logf("term ended %s after its last Renew was sent (ttl %s)", d.Round(time.Millisecond), ttl)
		}
	case <-time.After(ttl + 3*time.Second):
		t.Fatal("no notification of the lapsed term")
	}
	if got := providertest.MustObserve(t, q, "job"); got.Holder != "" || got.Token != l.Token {
		t.Fatalf("Observe after the lapse = %+v, want holder \"\" and token %d", got, l.Token)
	}
}

// testRootCreated: root and its parents are created when missing; Observe
// before any lease was taken answers a zero lease.
func testRootCreated(t *testing.T, addr string) {
	root := randomRoot(t) + "/deep/er"
	p := open(t, Settings{Servers: []string{addr}, Root: root})
	if got := providertest.MustObserve(t, p, "job"); got != (providers.Lease{Key: "job"}) {
		t.Fatalf("Observe under a missing root = %+v", got)
	}
	providertest.MustAcquire(t, p, "job", "a", 5*time.Second)
	s, err := p.anySession(providertest.Context(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := s.conn.Exists(root + "/job"); err != nil || !ok {
		t.Fatalf("%s/job: exists %v, %v", root, ok, err)
	}
}

// testNotifyNewKey: a key acquired for the first time after the
// subscription started is announced and watched from then on.
func testNotifyNewKey(t *testing.T, addr string) {
	s := Settings{Servers: []string{addr}, Root: randomRoot(t)}
	p, q := open(t, s), open(t, s)
	keys := make(chan string, 16)
	if err := q.Notify(providertest.Context(t), func(k string) { keys <- k }); err != nil {
		t.Fatal(err)
	}
	l := providertest.MustAcquire(t, p, "fresh", "a", 5*time.Second)
	want := func(what string) {
		t.Helper()
		select {
		case k := <-keys:
			if k != "fresh" {
				t.Fatalf("%s: notified of %q, want fresh", what, k)
			}
		case <-time.After(providertest.NotifyWithin):
			t.Fatalf("%s: no notification within %s", what, providertest.NotifyWithin)
		}
	}
	want("first Acquire of a new key")
	if err := p.Release(providertest.Context(t), l); err != nil {
		t.Fatal(err)
	}
	want("Release of the new key")
}
