package etcd

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
)

// handoverRounds is how many graceful handovers testHandover measures.
const handoverRounds = 40

// testHandover measures a graceful handover as the agent sees it: a holder
// releases while a candidate, refused before, waits on Watch and acquires
// as soon as it is told. Time runs from the start of Release to the moment
// the candidate's Acquire returned the lease. Target: well under 100 ms.
func testHandover(t *testing.T, endpoint string) {
	s := config.EtcdSettings{Endpoints: []string{endpoint}, Prefix: randomPrefix(t)}
	a, b := open(t, s), open(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ch, err := b.Watch(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lease providers.Lease
		at    time.Time
		err   error
	}
	var notified, handover []time.Duration
	for round := range handoverRounds {
		la, err := a.Acquire(ctx, "job", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Acquire(ctx, "job", "b", time.Minute); !errors.Is(err, providers.ErrHeld) {
			t.Fatalf("round %d: candidate's first Acquire: %v, want ErrHeld", round, err)
		}
		for len(ch) > 0 {
			<-ch
		}
		var hinted time.Time
		done := make(chan result, 1)
		go func() {
			for {
				select {
				case <-ch:
				case <-time.After(2 * time.Second):
					done <- result{err: errors.New("no notification within 2s")}
					return
				}
				hinted = time.Now() // the hint that led to the lease counts
				lb, err := b.Acquire(ctx, "job", "b", time.Minute)
				// ErrHeld: a late hint of a's own Acquire; wait for the next.
				if !errors.Is(err, providers.ErrHeld) {
					done <- result{lb, time.Now(), err}
					return
				}
			}
		}()
		start := time.Now()
		if err := a.Release(ctx, la); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil {
			t.Fatalf("round %d: candidate: %v", round, r.err)
		}
		if r.lease.Token != la.Token+1 {
			t.Fatalf("round %d: candidate's token %d, want %d", round, r.lease.Token, la.Token+1)
		}
		notified = append(notified, hinted.Sub(start))
		handover = append(handover, r.at.Sub(start))
		if err := b.Release(ctx, r.lease); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d graceful handovers: release → notification %s", handoverRounds, percentiles(notified))
	t.Logf("%d graceful handovers: release → candidate holds the lease %s", handoverRounds, percentiles(handover))
	if p50 := percentile(handover, 50); p50 > 100*time.Millisecond {
		t.Errorf("median handover %s, target well under 100ms", p50)
	}
}

// percentile is the nearest-rank percentile of d (sorted in place).
func percentile(d []time.Duration, pct int) time.Duration {
	slices.Sort(d)
	i := (len(d)*pct + 99) / 100
	return d[max(i-1, 0)]
}

func percentiles(d []time.Duration) string {
	r := func(x time.Duration) time.Duration { return x.Round(10 * time.Microsecond) }
	return "min " + r(percentile(d, 0)).String() + " p50 " + r(percentile(d, 50)).String() +
		" p99 " + r(percentile(d, 99)).String() + " max " + r(percentile(d, 100)).String()
}
