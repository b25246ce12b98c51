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

// TestFerretDBRacingAcquire records what FerretDB v1 does with racing
// acquires. On a key never acquired the racers' upserts all try to insert
// the same _id and the unique index lets exactly one through: that is
// checked. On an existing, released lease FerretDB is not atomic (it reads
// the document, matches the filter, then writes), so several racers can win
// the same round (BACKENDS.md): that is counted and logged, not failed.
// What must hold in every round: each answer is a lease or a *HeldError,
// and the record ends with one of the winners. Exactly one winner on an
// existing lease is checked against real MongoDB by
// TestMongoDB/.../ReleasedKeyRace.
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
	multi, most, sameToken := 0, 0, 0
	for round := range rounds {
		key := fmt.Sprintf("new-%d", round)
		if winners := race(t, ps, key); len(winners) != 1 {
			t.Fatalf("round %d, a key never acquired: %d winners %+v, want 1 (the unique _id arbitrates inserts)", round, len(winners), winners)
		}
		key = fmt.Sprintf("released-%d", round)
		l := providertest.MustAcquire(t, ps[0], key, "setup", time.Minute)
		if err := ps[0].Release(providertest.Context(t), l); err != nil {
			t.Fatal(err)
		}
		if winners := race(t, ps, key); len(winners) > 1 {
			multi++
			most = max(most, len(winners))
			if winners[0].Token == winners[1].Token {
				sameToken++
			}
		}
	}
	t.Logf("FerretDB v1.24, %d racing clients: keys never acquired: one winner in each of %d rounds; released keys: "+
		"more than one winner in %d of %d rounds (up to %d; the same token for two winners in %d rounds); real MongoDB: always one",
		clients, rounds, multi, rounds, most, sameToken)
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
			leases[i], errs[i] = p.Acquire(ctx, key, fmt.Sprintf("c%d", i), time.Minute)
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
