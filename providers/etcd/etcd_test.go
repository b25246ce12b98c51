package etcd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/internal/configtest"
	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
)

// shortTTL is the conformance suite's expiry ttl: etcd's minimum lease at
// default settings is 2 s, so the suite's default of 1 s would be granted as
// 2 s and its expiry cases would look too early (see TestGrantedTTL).
const shortTTL = 2 * time.Second

func randomPrefix(t *testing.T) string {
	return "/electd-test/" + providertest.UniqueName(t) + "/"
}

// ownServer starts an etcd server of t's own and returns its endpoint and
// settings on it under a fresh prefix.
func ownServer(t *testing.T) (endpoint string, s Settings) {
	endpoint, _ = teststore.StartEtcd(t)
	return endpoint, Settings{Endpoints: []string{endpoint}, Prefix: randomPrefix(t)}
}

func open(t *testing.T, s Settings) *Provider {
	t.Helper()
	p := providertest.Open(t, New, s)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// TestEtcd runs the cases that share one etcd server, each under a prefix
// of its own. TestRestart has a server of its own, since it stops it.
func TestEtcd(t *testing.T) {
	endpoint, _ := teststore.StartEtcd(t)
	providertest.RunShared(t, endpoint, []providertest.Case{
		{Name: "GrantedTTL", Fn: testGrantedTTL},
		{Name: "ExpiryNotEarly", Fn: testExpiryNotEarly},
		{Name: "Handover", Fn: testHandover},
		{Name: "RenewOtherTTL", Fn: testRenewOtherTTL},
		{Name: "Remaining", Fn: testRemaining},
		{Name: "Notify", Fn: testNotify},
		{Name: "NotifyCompacted", Fn: testNotifyCompacted},
	})
	t.Run("Conformance", func(t *testing.T) { testConformance(t, endpoint) })
}

func testConformance(t *testing.T, endpoint string) {
	providertest.Run(t, func(t *testing.T) func(t *testing.T) providers.Provider {
		s := Settings{Endpoints: []string{endpoint}, Prefix: randomPrefix(t)}
		return func(t *testing.T) providers.Provider { return providertest.Open(t, New, s) }
	}, providertest.Options{
		Unreachable: func(t *testing.T) providers.Provider {
			// Nothing listens there.
			return providertest.Open(t, New, Settings{Endpoints: []string{teststore.Addr(teststore.MustFreePort(t))}})
		},
		Notifier:         true,
		ShortTTL:         shortTTL,
		BadKey:           "bad/key",
		NoBatchRemaining: "a batch's HeldErrors carry no Remaining, which would cost a LeaseTimeToLive per held key",
	})
}

func TestLeaseSeconds(t *testing.T) {
	for _, c := range []struct {
		name string
		ttl  time.Duration
		want int64
		err  bool
	}{
		{"one nanosecond", time.Nanosecond, 1, false},
		{"one second", time.Second, 1, false},
		{"rounded up", 1500 * time.Millisecond, 2, false},
		{"just over", 2*time.Second + time.Millisecond, 3, false},
		{"default", 15 * time.Second, 15, false},
		{"zero", 0, 0, true},
		{"negative", -time.Second, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := leaseSeconds(c.ttl)
			if (err != nil) != c.err || got != c.want {
				t.Fatalf("leaseSeconds(%s) = %d, %v; want %d, error %v", c.ttl, got, err, c.want, c.err)
			}
		})
	}
}

// testGrantedTTL: what etcd actually grants for a ttl, read back from etcd.
// A ttl is rounded up to whole seconds and raised to etcd's minimum lease
// (ceil(1.5 × election timeout) = 2 s with default settings).
func testGrantedTTL(t *testing.T, endpoint string) {
	p := open(t, Settings{Endpoints: []string{endpoint}, Prefix: randomPrefix(t)})
	ctx := context.Background()
	for _, c := range []struct {
		ttl  time.Duration
		want int64
	}{
		{500 * time.Millisecond, 2},
		{time.Second, 2},
		{1500 * time.Millisecond, 2},
		{2 * time.Second, 2},
		{2*time.Second + time.Millisecond, 3},
		{15 * time.Second, 15},
	} {
		sent := time.Now()
		l, err := p.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: c.ttl})
		if err != nil {
			t.Fatal(err)
		}
		cli, _ := p.client(ctx)
		st, err := p.read(ctx, cli, "job")
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := cli.TimeToLive(ctx, st.leaseID)
		if err != nil {
			t.Fatal(err)
		}
		// etcd 3.4 truncates the remaining time to whole seconds.
		if ttl.TTL != c.want-1 {
			t.Errorf("ttl %s: TimeToLive right after Acquire says %d s left, want %d (granted %d, truncated)", c.ttl, ttl.TTL, c.want-1, c.want)
		}
		if ttl.GrantedTTL != c.want {
			t.Errorf("ttl %s: etcd granted %d s, want %d s", c.ttl, ttl.GrantedTTL, c.want)
		}
		if d := l.Expires.Sub(sent); d < c.ttl {
			t.Errorf("ttl %s: Acquire reports an expiry %s after it was sent, sooner than the ttl", c.ttl, d)
		}
	}
}

// testExpiryNotEarly checks the timing rule from the store's side: a term
// acquired at t (send time) is not given to anyone else before t + ttl, and
// is free soon after etcd's granted ttl (its expiry sweep runs every 500 ms).
func testExpiryNotEarly(t *testing.T, endpoint string) {
	s := Settings{Endpoints: []string{endpoint}, Prefix: randomPrefix(t)}
	a, b := open(t, s), open(t, s)
	ctx := context.Background()
	if _, err := b.Observe(ctx, "warm-up"); err != nil {
		t.Fatal(err)
	}
	const ttl = 3 * time.Second
	start := time.Now()
	la, err := a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	for {
		lb, err := b.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: time.Minute})
		if err == nil {
			took := time.Since(start)
			t.Logf("ttl %s: another holder got the lease %s after the Acquire was sent", ttl, took.Round(time.Millisecond))
			if took < ttl {
				t.Fatalf("lease of ttl %s was taken after %s", ttl, took)
			}
			if took > ttl+1500*time.Millisecond {
				t.Fatalf("lease of ttl %s was free only after %s", ttl, took)
			}
			if lb.Token != la.Token+1 {
				t.Fatalf("token %d after expiry, want %d", lb.Token, la.Token+1)
			}
			return
		}
		if !errors.Is(err, providers.ErrHeld) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testRenewOtherTTL: a Renew with another ttl than the term's (a reloaded
// job) moves the term to the session of that ttl, and no key stays on the
// old one; the token stays.
func testRenewOtherTTL(t *testing.T, endpoint string) {
	p := open(t, Settings{Endpoints: []string{endpoint}, Prefix: randomPrefix(t)})
	ctx := context.Background()
	l, err := p.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	cli, _ := p.client(ctx)
	before, err := p.read(ctx, cli, "job")
	if err != nil {
		t.Fatal(err)
	}
	l.TTL = 5 * time.Second
	r, err := p.Renew(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	after, err := p.read(ctx, cli, "job")
	if err != nil {
		t.Fatal(err)
	}
	if r.Token != l.Token || after.hold.Token != l.Token || after.leaseID == before.leaseID {
		t.Fatalf("after Renew with a new ttl: token %d/%d (want %d), lease %x (was %x)", r.Token, after.hold.Token, l.Token, after.leaseID, before.leaseID)
	}
	if ttl, err := cli.TimeToLive(ctx, after.leaseID); err != nil || ttl.GrantedTTL != 5 {
		t.Fatalf("new etcd lease: %+v, %v; want granted 5 s", ttl, err)
	}
	if ttl, err := cli.TimeToLive(ctx, before.leaseID, clientv3.WithAttachedKeys()); err != nil || len(ttl.Keys) != 0 {
		t.Fatalf("old session: %+v, %v; want no key attached", ttl, err)
	}
	if _, err := p.Renew(ctx, r); err != nil {
		t.Fatalf("Renew on the new etcd lease: %v", err)
	}
}

func TestKeyWithSlashRefused(t *testing.T) {
	p := open(t, Settings{Endpoints: []string{"127.0.0.1:1"}})
	_, err := p.Acquire(context.Background(), providers.AcquireRequest{Key: "a/record", Holder: "a", TTL: time.Minute})
	if err == nil || errors.Is(err, providers.ErrHeld) || !strings.Contains(err.Error(), `"/"`) {
		t.Fatalf("Acquire of a key with a slash: %v, want a key error", err)
	}
}

func TestOpenSettings(t *testing.T) {
	ctx := context.Background()
	if _, err := (&Settings{}).Open(ctx, nil); err == nil {
		t.Fatal("Open without endpoints succeeded")
	}
	p, err := (&Settings{Endpoints: []string{"127.0.0.1:1"}}).Open(ctx, nil)
	if err != nil {
		t.Fatalf("Open does no I/O, so an unreachable endpoint is no error: %v", err)
	}
	if p.(*Provider).prefix != DefaultPrefix {
		t.Fatalf("prefix %q, want %q", p.(*Provider).prefix, DefaultPrefix)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Observe(ctx, "job"); err == nil {
		t.Fatal("Observe after Close succeeded")
	}
}

// TestExampleConfig keeps examples/etcd-scheduler.hcl valid and its provider
// block one that Open accepts.
func TestExampleConfig(t *testing.T) {
	t.Setenv("ELECTD_ETCD_PASSWORD", "not-a-real-password")
	pc := configtest.LoadExample(t, "etcd-scheduler.hcl", "etcd", Type(), "etcd.main")
	p, err := pc.Settings.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := p.(*Provider).cfg.Password; got != "not-a-real-password" {
		t.Fatalf("password from env() not passed to the client: %q", got)
	}
}
