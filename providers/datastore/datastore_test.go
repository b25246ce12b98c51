package datastore

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
)

const testProject = "electd-test"

// TestMain starts one emulator for the whole test binary (it takes seconds
// to start); every test works in a namespace of its own.
func TestMain(m *testing.M) {
	providertest.Main(m, "datastore", "the Datastore emulator", EmulatorHostEnv, teststore.StartDatastoreProc)
}

func newNamespace() string { return "t-" + rand.Text() }

func open(t *testing.T, ns string) *Provider {
	t.Helper()
	p, err := New(context.Background(), Settings{ProjectID: testProject, Namespace: ns}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T) func(t *testing.T) providers.Provider {
		ns := newNamespace()
		return func(t *testing.T) providers.Provider { return open(t, ns) }
	}, providertest.Options{
		Unreachable: func(t *testing.T) providers.Provider {
			// A port nobody listens on, in place of the running emulator.
			p, err := newProvider(context.Background(), Settings{ProjectID: testProject},
				hclog.NewNullLogger(), teststore.Addr(teststore.MustFreePort(t)))
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		// Expiry is judged ClockSkew (1s) after the written expiry; the
		// suite waits 1.5 ttl + 200ms, so ttl must leave room for it.
		ShortTTL: 3 * time.Second,
		// Over a batch's first transaction on the emulator (25 entities),
		// with a name Datastore reserves as the key it refuses.
		BatchSize: 120,
		BadKey:    "__bad__",
	})
}

// TestEntity pins the entity layout operators see in the console and may
// query: kind and namespace from the settings, key name = job key.
func TestEntity(t *testing.T) {
	t.Parallel()
	ns := newNamespace()
	p, err := New(context.Background(), Settings{ProjectID: testProject, Namespace: ns, Kind: "Lease"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	l, err := p.Acquire(ctx, providers.AcquireRequest{Key: "billing-sync", Holder: "web-1", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	l.Value = "slot-7"
	if l, err = p.Renew(ctx, l); err != nil {
		t.Fatal(err)
	}

	c, err := datastore.NewClient(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := datastore.NameKey("Lease", "billing-sync", nil)
	k.Namespace = ns
	var props datastore.PropertyList
	if err := c.Get(ctx, k, &props); err != nil {
		t.Fatalf("entity Lease/billing-sync in namespace %s: %v", ns, err)
	}
	got := map[string]datastore.Property{}
	for _, pr := range props {
		got[pr.Name] = pr
	}
	if len(got) != 4 || got["holder"].Value != "web-1" || got["token"].Value != int64(1) ||
		!got["expires"].Value.(time.Time).Equal(l.Expires) || got["value"].Value != "slot-7" || !got["value"].NoIndex {
		t.Fatalf("entity properties = %+v, want holder web-1, token 1, expires %v, value slot-7 (not indexed)", props, l.Expires)
	}
}

// TestClockSkewBound plays a candidate whose wall clock runs ahead of the
// holder's. Within the documented bound (ClockSkew + 1% of ttl) it takes the
// lease only after the holder's own deadline (send time of its write + 99% of
// ttl, the agent's safety rule); beyond the bound it takes it while the
// holder still leads: that is what the bound means.
func TestClockSkewBound(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	bound := ClockSkew + ttl/100
	for _, c := range []struct {
		name string
		skew time.Duration
		safe bool
	}{
		{"within bound", bound - 50*time.Millisecond, true},
		{"beyond bound", bound + 800*time.Millisecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ns := newNamespace()
			holder, candidate := open(t, ns), open(t, ns)
			candidate.now = func() time.Time { return time.Now().Add(c.skew) }
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			sent := time.Now()
			if _, err := holder.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: ttl}); err != nil {
				t.Fatal(err)
			}
			deadline := sent.Add(ttl - ttl/100)
			for {
				_, err := candidate.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: ttl})
				if err == nil {
					break
				}
				if !errors.Is(err, providers.ErrHeld) {
					t.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			took := time.Since(sent)
			early := time.Until(deadline)
			t.Logf("clock %s ahead: took the lease %s after the holder's write began; the holder's deadline is at %s",
				c.skew, took.Round(time.Millisecond), (ttl - ttl/100).Round(time.Millisecond))
			if c.safe && early > 0 {
				t.Fatalf("candidate %s ahead took the lease %s before the holder's deadline", c.skew, early)
			}
			if !c.safe && early <= 0 {
				t.Fatalf("candidate %s ahead waited past the holder's deadline: the documented bound is not tight", c.skew)
			}
		})
	}
}

// TestHandover measures a graceful handover without notifications: the
// candidate polls Acquire every 100ms.
//
//	go test -count=1 -run TestHandover -v ./providers/datastore/
func TestHandover(t *testing.T) {
	t.Parallel()
	ns := newNamespace()
	a, b := open(t, ns), open(t, ns)
	providertest.Handover(t, a, b, providertest.HandoverOptions{Target: 300 * time.Millisecond})
}
