package mongodb_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.mongodb.org/mongo-driver/bson"

	"github.com/electd/electd/internal/syncbuf"
	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/mongodb"
	"github.com/electd/electd/providers/providertest"
)

// TestFerretDBProbe: FerretDB refuses pipeline updates, so Open picks the
// agent's clock, says so in a warning, and leaves no lease behind.
func TestFerretDBProbe(t *testing.T) {
	t.Parallel()
	uri, _ := teststore.StartFerretDB(t)
	s := reach(t, uri)
	settings := s.settings(t)
	var logs syncbuf.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
	p, err := mongodb.New(context.Background(), settings, log)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	server, err := p.ServerClock(context.Background())
	if err != nil || server {
		t.Fatalf("ServerClock = %v, %v: want the fallback on FerretDB", server, err)
	}
	out := logs.String()
	if !strings.Contains(out, "[WARN]") || !strings.Contains(out, "judged by each agent's clock") || !strings.Contains(out, "NotImplemented") {
		t.Fatalf("want a warning naming the fallback and its reason, got:\n%s", out)
	}
	if strings.Contains(out, uri) {
		t.Fatalf("the log repeats the connection URI:\n%s", out)
	}
	t.Logf("warning: %s", strings.TrimSpace(out))
	n, err := s.admin.Database(settings.Database).Collection(settings.Collection).CountDocuments(context.Background(), bson.D{})
	if err != nil || n != 0 {
		t.Fatalf("documents after the probe: %d (%v), want none", n, err)
	}
}

// TestFerretDBRacingAcquire: racing acquires have exactly one winner on
// FerretDB v1.24, on a key never acquired and on one released. FerretDB
// does not arbitrate racing updates of one document (it reads, matches the
// filter, then writes), and the provider before the log design let several
// racers win a released key there; every write is now an insert of a new
// _id, which FerretDB's unique index arbitrates.
func TestFerretDBRacingAcquire(t *testing.T) {
	t.Parallel()
	uri, _ := teststore.StartFerretDB(t)
	s := reach(t, uri)
	open := s.factory(false)(t)
	const clients, rounds = 8, 20
	ps := make([]providers.Provider, clients)
	for i := range ps {
		ps[i] = open(t)
		p := ps[i]
		t.Cleanup(func() { _ = p.Close() })
		providertest.MustObserve(t, p, "warm-up")
	}
	for round := range rounds {
		key := fmt.Sprintf("new-%d", round)
		if winners := race(t, ps, key); len(winners) != 1 {
			t.Fatalf("round %d, a key never acquired: %d winners %+v, want 1", round, len(winners), winners)
		}
		key = fmt.Sprintf("released-%d", round)
		l := providertest.MustAcquire(t, ps[0], key, "setup", time.Minute)
		if err := ps[0].Release(providertest.Context(t), l); err != nil {
			t.Fatal(err)
		}
		winners := race(t, ps, key)
		if len(winners) != 1 {
			t.Fatalf("round %d, a released key: %d winners %+v, want 1", round, len(winners), winners)
		}
		if winners[0].Token != l.Token+1 {
			t.Fatalf("round %d: token %d after a released term %d", round, winners[0].Token, l.Token)
		}
	}
}

// TestLogBounded: a term renewed many times leaves at most CleanEvery+1
// documents of its key, and a write into a slot the clean-up freed (a
// renewal delayed past the end of its term) is not taken as written.
func TestLogBounded(t *testing.T) {
	t.Parallel()
	uri, _ := teststore.StartFerretDB(t)
	s := reach(t, uri)
	settings := s.settings(t)
	p := open(t, settings).(*mongodb.Provider)
	defer p.Close()
	ctx := providertest.Context(t)
	a := providertest.MustAcquire(t, p, "job", "a", time.Minute)
	const renewals = 3 * mongodb.CleanEvery
	for range renewals {
		var err error
		if a, err = p.Renew(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	coll := s.admin.Database(settings.Database).Collection(settings.Collection)
	n, err := coll.CountDocuments(ctx, bson.D{{Key: "key", Value: "job"}})
	if err != nil {
		t.Fatal(err)
	}
	if n > mongodb.CleanEvery+1 {
		t.Fatalf("%d documents for one key after %d renewals, want at most %d", n, renewals, mongodb.CleanEvery+1)
	}
	if err := p.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := providertest.MustAcquire(t, p, "job", "b", time.Minute)
	// Slot 2 was a's first renewal, long deleted: a's term is over.
	if err := p.WriteEntry(ctx, "job", 2, "a", a.Token); !errors.Is(err, mongodb.ErrSlotTaken) {
		t.Fatalf("a delayed renewal written into a freed slot: %v, want it refused", err)
	}
	if got := providertest.MustObserve(t, p, "job"); got.Holder != "b" || got.Token != b.Token {
		t.Fatalf("after the delayed write: %+v, want holder b token %d", got, b.Token)
	}
	t.Logf("%d documents for the key after %d renewals", n, renewals)
}

// TestLegacyDocument: a lease document of an electd from before the log
// (one per key, _id the key) is where the key's log starts: its token goes
// on, its value is carried, and a live holder in it is respected.
func TestLegacyDocument(t *testing.T) {
	t.Parallel()
	uri, _ := teststore.StartFerretDB(t)
	s := reach(t, uri)
	settings := s.settings(t)
	coll := s.admin.Database(settings.Database).Collection(settings.Collection)
	ctx := providertest.Context(t)
	now := time.Now()
	if _, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: "free"}, {Key: "holder", Value: ""}, {Key: "token", Value: int64(41)}, {Key: "expires", Value: now}, {Key: "value", Value: "slot-7"}},
		bson.D{{Key: "_id", Value: "held"}, {Key: "holder", Value: "old"}, {Key: "token", Value: int64(9)}, {Key: "expires", Value: now.Add(time.Hour)}, {Key: "value", Value: ""}},
	}); err != nil {
		t.Fatal(err)
	}
	p := open(t, settings)
	defer p.Close()
	if got := providertest.MustObserve(t, p, "held"); got.Holder != "old" || got.Token != 9 {
		t.Fatalf("Observe of a held pre-log document: %+v", got)
	}
	_, err := p.Acquire(ctx, providers.AcquireRequest{Key: "held", Holder: "a", TTL: time.Minute})
	providertest.WantHeld(t, err, "held", "old", 9)
	l := providertest.MustAcquire(t, p, "free", "a", time.Minute)
	if l.Token != 42 || l.Value != "slot-7" {
		t.Fatalf("Acquire after a pre-log document: token %d value %q, want 42 and slot-7", l.Token, l.Value)
	}
	if err := p.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if b := providertest.MustAcquire(t, p, "free", "b", time.Minute); b.Token != 43 {
		t.Fatalf("token %d, want 43", b.Token)
	}
}

// race has every client Acquire key at once and returns the winners' leases,
// after checking that the losers got *HeldError and that the record names a
// winner.
func race(t *testing.T, ps []providers.Provider, key string) []providers.Lease {
	t.Helper()
	ctx := providertest.Context(t)
	leases := make([]providers.Lease, len(ps))
	errs := make([]error, len(ps))
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			<-gate
			leases[i], errs[i] = p.Acquire(ctx, providers.AcquireRequest{Key: key, Holder: fmt.Sprintf("c%d", i), TTL: time.Minute})
		})
	}
	close(gate)
	wg.Wait()
	var winners []providers.Lease
	for i, err := range errs {
		switch {
		case err == nil:
			winners = append(winners, leases[i])
		case !errors.Is(err, providers.ErrHeld):
			t.Fatalf("%s, client %d: %v, want a lease or a *HeldError", key, i, err)
		}
	}
	if len(winners) == 0 {
		t.Fatalf("%s: no winner", key)
	}
	got := providertest.MustObserve(t, ps[0], key)
	for _, w := range winners {
		if w.Holder == got.Holder && w.Token == got.Token {
			return winners
		}
	}
	t.Fatalf("%s: record %+v is none of the winners %+v", key, got, winners)
	return nil
}

// TestFerretDBRestart: the store stops (an error, never a verdict) and comes
// back on the same data; the provider reconnects and tokens carry on.
func TestFerretDBRestart(t *testing.T) {
	t.Parallel()
	dir, port := t.TempDir(), teststore.MustFreePort(t)
	uri, proc := teststore.StartFerretDBAt(t, dir, port)
	settings := mongodb.Settings{URI: uri + "?serverSelectionTimeoutMS=2000", Database: "electd", Collection: "leases"}
	p := open(t, settings)
	defer p.Close()
	a := providertest.MustAcquire(t, p, "job", "a", time.Minute)

	proc.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := p.Renew(ctx, a)
	cancel()
	if err == nil || errors.Is(err, providers.ErrLost) {
		t.Fatalf("Renew while the store is down: %v, want a store error", err)
	}
	t.Logf("while down: %v", err)

	teststore.StartFerretDBAt(t, dir, port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err = p.Renew(ctx, a)
		cancel()
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("Renew after the store came back: %v", err)
	}
	if err := p.Release(providertest.Context(t), a); err != nil {
		t.Fatal(err)
	}
	if b := providertest.MustAcquire(t, p, "job", "b", time.Minute); b.Token != a.Token+1 {
		t.Fatalf("token after restart and release = %d, want %d", b.Token, a.Token+1)
	}
}

func TestSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    any
		wantErr string
	}{
		{"", "majority", ""},
		{"majority", "majority", ""},
		{"1", 1, ""},
		{"3", 3, ""},
		{"dc-east", "dc-east", ""},
		{"0", nil, "unacknowledged"},
		{"-1", nil, "unacknowledged"},
	} {
		got, err := mongodb.WriteConcernW(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("write_concern %q: error %v, want one containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("write_concern %q = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}

	ctx := context.Background()
	if _, err := mongodb.New(ctx, mongodb.Settings{}, nil); err == nil {
		t.Error("New with no uri succeeded")
	}
	const secret = "s3cr3t-pw"
	_, err := mongodb.New(ctx, mongodb.Settings{URI: "mongodb://user:" + secret + "@127.0.0.1:notaport/"}, nil)
	if err == nil {
		t.Fatal("New with a malformed uri succeeded")
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("error repeats the password: %v", err)
	}
	t.Logf("malformed uri: %v", err)
}
