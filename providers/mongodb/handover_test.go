package mongodb_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
)

// pollEvery is how often the waiting candidate retries in the handover
// measurement (the provider has no Watcher).
const pollEvery = 100 * time.Millisecond

// TestHandover measures a graceful handover: a candidate is refused, then
// polls every 100 ms; the holder releases at a point spread over the
// polling cycle; the time from the Release call to the candidate holding
// the lease is recorded over 30 rounds. Against FerretDB, or the real MongoDB
// named by ELECTD_TEST_MONGODB_URI when it is set.
func TestHandover(t *testing.T) {
	t.Parallel()
	uri, where := os.Getenv(realMongoEnv), "MongoDB ($"+realMongoEnv+")"
	if uri == "" {
		uri, _ = teststore.StartFerretDB(t)
		where = "FerretDB v1.24"
	}
	s := reach(t, uri)
	open := s.factory(false)(t)
	holder, candidate := open(t), open(t)
	defer holder.Close()
	defer candidate.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const rounds = 30
	var took []time.Duration
	for round := range rounds {
		a, err := holder.Acquire(ctx, "job", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := candidate.Acquire(ctx, "job", "b", time.Minute); !errors.Is(err, providers.ErrHeld) {
			t.Fatalf("round %d: candidate's first Acquire: %v, want ErrHeld", round, err)
		}
		released := make(chan time.Time, 1)
		go func() {
			// Spread the release over the candidate's polling cycle.
			time.Sleep(pollEvery/2 + time.Duration(round)*pollEvery/rounds)
			start := time.Now()
			if err := holder.Release(ctx, a); err != nil {
				t.Error(err)
			}
			released <- start
		}()
		var b providers.Lease
		for {
			time.Sleep(pollEvery)
			b, err = candidate.Acquire(ctx, "job", "b", time.Minute)
			if err == nil {
				break
			}
			if !errors.Is(err, providers.ErrHeld) {
				t.Fatalf("round %d: candidate: %v", round, err)
			}
		}
		held := time.Now()
		took = append(took, held.Sub(<-released))
		if b.Token != a.Token+1 {
			t.Fatalf("round %d: candidate token %d, want %d", round, b.Token, a.Token+1)
		}
		if err := candidate.Release(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(took)
	pct := func(p int) time.Duration { return took[(len(took)-1)*p/100].Round(100 * time.Microsecond) }
	t.Logf("%s, %d rounds, candidate polling every %s: Release called → candidate holds the lease: min %s p50 %s p99 %s max %s",
		where, rounds, pollEvery, took[0].Round(100*time.Microsecond), pct(50), pct(99), took[len(took)-1].Round(100*time.Microsecond))
	if pct(50) > pollEvery+50*time.Millisecond {
		t.Errorf("p50 handover %s: want at most one polling interval plus an acquire", pct(50))
	}
}
