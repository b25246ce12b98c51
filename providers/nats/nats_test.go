package nats

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
)

// machineServer is the machine's nats-server, which scripts/services.sh
// starts; the test fails with that advice when it does not answer.
func machineServer(t testing.TB) string {
	t.Helper()
	teststore.SkipShort(t, "the machine's nats-server")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := teststore.NATSReady(teststore.NATSAddr)(ctx); err != nil {
		t.Fatalf("no nats-server with JetStream at %s (scripts/services.sh starts it): %v", teststore.NATSAddr, err)
	}
	server := "nats://" + teststore.NATSAddr
	keepOnce.Do(func() { keepErr = keepBucket(server) })
	if keepErr != nil {
		t.Fatalf("nats-server at %s: bucket %s: %v", teststore.NATSAddr, keepName, keepErr)
	}
	return server
}

// keepName is a bucket the tests create on the machine's server and never
// delete. nats-server 2.9 removes an account's store directory when its last
// stream is deleted, and a stream created at that moment fails with "could
// not create storage directory ... no such file or directory" (seen in make
// test: one test's cleanup deleted the last bucket while another created
// one). With this bucket the account always has a stream.
const keepName = "electd_test_keep"

var (
	keepOnce sync.Once
	keepErr  error
)

func keepBucket(server string) error {
	nc, err := nats.Connect(server, nats.Timeout(2*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: keepName})
	return err
}

// testBucket is a bucket name of the test's own, deleted when it ends.
func testBucket(t testing.TB, server string) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "electd_test_" + hex.EncodeToString(b)
	t.Cleanup(func() { deleteBucket(server, name) })
	return name
}

func deleteBucket(server, name string) {
	nc, err := nats.Connect(server, nats.Timeout(2*time.Second))
	if err != nil {
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = js.DeleteKeyValue(ctx, name)
}

func open(t testing.TB, s Settings) *Provider {
	t.Helper()
	p, err := New(context.Background(), s, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// closedServer is a loopback URL nothing listens on.
func closedServer(t testing.TB) string {
	return "nats://" + teststore.Addr(teststore.MustFreePort(t))
}

// TestConformance runs the conformance suite on the machine's NATS, each
// case in a bucket of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	srv := machineServer(t)
	providertest.Run(t, func(t *testing.T) func(*testing.T) providers.Provider {
		s := Settings{Servers: []string{srv}, Bucket: testBucket(t, srv)}
		return func(t *testing.T) providers.Provider { return open(t, s) }
	}, providertest.Options{
		Unreachable: func(t *testing.T) providers.Provider {
			return open(t, Settings{Servers: []string{closedServer(t)}, Bucket: "electd"})
		},
		Notifier: true,
	})
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Keys of any bytes map to distinct bucket keys NATS accepts, and back.
func TestKeys(t *testing.T) {
	keys := []string{"job", "a.b", "a b", "a=2Eb", "_electd.member.0", "KEY1", "key1 ", "ünïcode/ä", "*", ">", "x\x00y", strings.Repeat("é", 127)}
	seen := map[string]string{}
	for _, k := range keys {
		kk := kvKey(k)
		if strings.Count(kk, ".") != 1 || strings.ContainsAny(kk, " *>\x00") {
			t.Errorf("kvKey(%q) = %q: not a two-token subject", k, kk)
		}
		if prev, dup := seen[kk]; dup {
			t.Errorf("kvKey(%q) = kvKey(%q) = %q", k, prev, kk)
		}
		seen[kk] = k
		if back, ok := leaseKey(kk); !ok || back != k {
			t.Errorf("leaseKey(kvKey(%q)) = %q, %v", k, back, ok)
		}
	}
	for _, k := range []string{clockKey, "lease.", "lease.a=4", "lease.a=ZZ", "other.x"} {
		if got, ok := leaseKey(k); ok {
			t.Errorf("leaseKey(%q) = %q, want no lease key", k, got)
		}
	}
	// Every key of the limits is accepted by the store.
	srv := machineServer(t)
	p := open(t, Settings{Servers: []string{srv}, Bucket: testBucket(t, srv)})
	for _, k := range append(keys, strings.Repeat("k", maxField), strings.Repeat(".", maxField)) {
		l, err := p.Acquire(ctxT(t, 10*time.Second), providers.AcquireRequest{Key: k, Holder: "a", TTL: time.Minute})
		if err != nil {
			t.Fatalf("Acquire(%q): %v", k, err)
		}
		if o, err := p.Observe(ctxT(t, 10*time.Second), k); err != nil || o.Holder != "a" || o.Token != l.Token {
			t.Fatalf("Observe(%q) = %+v, %v", k, o, err)
		}
	}
}

// A bucket electd creates has one revision per key and no ttl; a bucket
// with a ttl is refused, since its records (and tokens) would vanish.
func TestBucket(t *testing.T) {
	t.Parallel()
	srv := machineServer(t)
	nc, err := nats.Connect(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)

	t.Run("created when missing", func(t *testing.T) {
		// Several agents start at once: each creates or finds it, and
		// reads it at once. nats-server 2.9 refuses a create that races
		// another as a subject overlap, and may leave a read just after
		// the create unanswered: each was seen about once in a hundred
		// rounds of six, so the rounds are many.
		var first string
		for round := 0; round < 150 && !t.Failed(); round++ {
			name := testBucket(t, srv)
			if first == "" {
				first = name
			}
			var wg sync.WaitGroup
			for i := range 6 {
				p := open(t, Settings{Servers: []string{srv}, Bucket: name})
				wg.Add(1)
				go func() {
					defer wg.Done()
					start := time.Now()
					_, err := p.Observe(ctxT(t, 5*time.Second), "job")
					if err == nil {
						_, err = p.Acquire(ctxT(t, 5*time.Second), providers.AcquireRequest{Key: "job" + string(rune('a'+i)), Holder: "n", TTL: time.Minute})
					}
					if err != nil {
						t.Errorf("round %d, agent %d, after %s: %v", round, i, time.Since(start).Round(time.Millisecond), err)
					}
				}()
			}
			wg.Wait()
		}
		kv, err := js.KeyValue(ctxT(t, 5*time.Second), first)
		if err != nil {
			t.Fatal(err)
		}
		st, err := kv.Status(ctxT(t, 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		cfg := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
		if st.TTL() != 0 || st.History() != 1 || cfg.Storage != jetstream.FileStorage {
			t.Errorf("created bucket: ttl %s, history %d, storage %s; want no ttl, 1, file", st.TTL(), st.History(), cfg.Storage)
		}
	})

	t.Run("ttl refused", func(t *testing.T) {
		name := testBucket(t, srv)
		if _, err := js.CreateKeyValue(ctxT(t, 5*time.Second), jetstream.KeyValueConfig{Bucket: name, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		p := open(t, Settings{Servers: []string{srv}, Bucket: name})
		_, err := p.Acquire(ctxT(t, 5*time.Second), providers.AcquireRequest{Key: "job", Holder: "a", TTL: time.Minute})
		if err == nil || !strings.Contains(err.Error(), "has a ttl") || errors.Is(err, providers.ErrHeld) {
			t.Fatalf("Acquire in a bucket with a ttl: %v, want it refused", err)
		}
		t.Log(err)
	})
}

// A record another program wrote is reported, not overwritten.
func TestForeignRecord(t *testing.T) {
	t.Parallel()
	srv := machineServer(t)
	name := testBucket(t, srv)
	p := open(t, Settings{Servers: []string{srv}, Bucket: name})
	mustAcquire(t, p, "job", "a", time.Minute)
	nc, err := nats.Connect(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctxT(t, 5*time.Second), name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctxT(t, 5*time.Second), kvKey("job"), []byte("not json")); err != nil {
		t.Fatal(err)
	}
	_, err = p.Acquire(ctxT(t, 5*time.Second), providers.AcquireRequest{Key: "job", Holder: "b", TTL: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "not electd's") {
		t.Fatalf("Acquire over a foreign record: %v", err)
	}
	if e, err := kv.Get(ctxT(t, 5*time.Second), kvKey("job")); err != nil || string(e.Value()) != "not json" {
		t.Fatalf("the foreign record was touched: %v", err)
	}
}

// A renewal may change the term's ttl: expiry is judged with the ttl of the
// last write, from that write's time.
func TestRenewOtherTTL(t *testing.T) {
	t.Parallel()
	srv := machineServer(t)
	s := Settings{Servers: []string{srv}, Bucket: testBucket(t, srv)}
	a, b := open(t, s), open(t, s)
	l := mustAcquire(t, a, "job", "a", time.Minute)
	l.TTL = 500 * time.Millisecond
	if _, err := a.Renew(ctxT(t, 5*time.Second), l); err != nil {
		t.Fatal(err)
	}
	var held *providers.HeldError
	if _, err := b.Acquire(ctxT(t, 5*time.Second), providers.AcquireRequest{Key: "job", Holder: "b", TTL: time.Minute}); !errors.As(err, &held) || held.Remaining > 500*time.Millisecond {
		t.Fatalf("after a renewal for 500ms: %v (remaining %v), want held for at most 500ms", err, held)
	}
	time.Sleep(700 * time.Millisecond) // the 500ms term ends by the server's own clock
	if nl := mustAcquire(t, b, "job", "b", time.Minute); nl.Token != l.Token+1 {
		t.Fatalf("token %d after %d", nl.Token, l.Token)
	}
}

// Renewals are not notified, acquisitions and releases are.
func TestNotifyFiltersRenewals(t *testing.T) {
	t.Parallel()
	srv := machineServer(t)
	s := Settings{Servers: []string{srv}, Bucket: testBucket(t, srv)}
	a, b := open(t, s), open(t, s)
	keys := make(chan string, 100)
	if err := b.Notify(ctxT(t, 30*time.Second), func(k string) { keys <- k }); err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, a, "job", "a", time.Minute)
	wantKey(t, keys, "job")
	for range 5 {
		var err error
		if l, err = a.Renew(ctxT(t, 5*time.Second), l); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Release(ctxT(t, 5*time.Second), l); err != nil {
		t.Fatal(err)
	}
	wantKey(t, keys, "job") // the release, not a renewal
	// The watch delivers in the stream's order: once it has delivered a
	// marker acquired last, it has delivered anything notified before.
	mustAcquire(t, a, "marker", "a", time.Minute)
	wantKey(t, keys, "marker")
}

func wantKey(t *testing.T, keys <-chan string, want string) {
	t.Helper()
	select {
	case k := <-keys:
		if k != want {
			t.Fatalf("notified of %q, want %q", k, want)
		}
	case <-time.After(providertest.NotifyWithin):
		t.Fatalf("no notification of %q within %s", want, providertest.NotifyWithin)
	}
}

func mustAcquire(t *testing.T, p providers.Provider, key, holder string, ttl time.Duration) providers.Lease {
	t.Helper()
	return providertest.MustAcquire(t, p, key, holder, ttl)
}
