package azureblob_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/electd/electd/providers"
)

// TestHandover measures how long after a graceful Release a waiting
// candidate holds the lease. Azure cannot notify, so the candidate polls
// Acquire every 100 ms, as the agent does at retry_every = "100ms".
//
//	go test -count=1 -run TestHandover -v ./providers/azureblob/
func TestHandover(t *testing.T) {
	t.Parallel()
	const runs, poll = 100, 100 * time.Millisecond
	_, s := onAzurite(t)
	a, b := newProvider(t, s), newProvider(t, s)
	var took, releases []time.Duration
	for i := range runs {
		key := fmt.Sprintf("handover-%d", i)
		la := mustAcquire(t, a, key, "a", ttl)
		_, err := b.Acquire(ctxT(t), key, "b", ttl)
		wantHeld(t, err, "a", la.Token)

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		got := make(chan providers.Lease, 1)
		go func() {
			defer close(got)
			tick := time.NewTicker(poll)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				l, err := b.Acquire(ctx, key, "b", ttl)
				if err == nil {
					got <- l
					return
				}
				if !errors.Is(err, providers.ErrHeld) {
					t.Errorf("candidate: %v", err)
					return
				}
			}
		}()
		// Release at a random point of the candidate's polling cycle.
		time.Sleep(poll + rand.N(poll))
		start := time.Now()
		if err := a.Release(ctxT(t), la); err != nil {
			cancel()
			t.Fatal(err)
		}
		releases = append(releases, time.Since(start))
		lb, ok := <-got
		took = append(took, time.Since(start))
		cancel()
		if !ok {
			t.Fatalf("run %d: the candidate never got the lease", i)
		}
		if lb.Token != la.Token+1 {
			t.Fatalf("run %d: token %d, want %d", i, lb.Token, la.Token+1)
		}
	}
	pct := func(d []time.Duration, p float64) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[int(p*float64(len(d)-1)+0.5)].Round(100 * time.Microsecond)
	}
	t.Logf("%d handovers, candidate polling every %s: release → candidate holds the lease p50 %s, p90 %s, p99 %s, max %s (Release itself p50 %s)",
		runs, poll, pct(took, 0.5), pct(took, 0.9), pct(took, 0.99), pct(took, 1), pct(releases, 0.5))
	if p99 := pct(took, 0.99); p99 > poll+2*time.Second {
		t.Fatalf("p99 handover %s with a %s poll", p99, poll)
	}
}
