package redis_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
)

// TestHandover measures a graceful handover: the holder releases; the
// candidate, refused before and now waiting on Watch, is notified and
// acquires. Target: well under 100 ms.
func TestHandover(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3} {
		t.Run(map[int]string{1: "single", 3: "redlock"}[n], func(t *testing.T) {
			t.Parallel()
			addrs, _ := servers(t, n)
			s := config.RedisSettings{Addresses: addrs, Prefix: randomPrefix()}
			a, b := open(t, s), open(t, s)
			t.Cleanup(func() { a.Close(); b.Close() })
			ctx := ctxT(t, 60*time.Second)
			ch, err := b.Watch(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			const rounds = 40
			var notify, handover []time.Duration
			for round := range rounds {
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
				start := time.Now()
				if err := a.Release(ctx, la); err != nil {
					t.Fatal(err)
				}
				select {
				case <-ch:
				case <-time.After(time.Second):
					t.Fatalf("round %d: no notification within 1s of Release", round)
				}
				notify = append(notify, time.Since(start))
				lb, err := b.Acquire(ctx, "job", "b", time.Minute)
				if err != nil {
					t.Fatalf("round %d: candidate's Acquire after the notification: %v", round, err)
				}
				handover = append(handover, time.Since(start))
				if lb.Token != la.Token+1 {
					t.Fatalf("round %d: token %d after %d", round, lb.Token, la.Token)
				}
				if err := b.Release(ctx, lb); err != nil {
					t.Fatal(err)
				}
			}
			slices.Sort(notify)
			slices.Sort(handover)
			pct := func(d []time.Duration, p int) time.Duration { return d[(len(d)-1)*p/100] }
			t.Logf("%d rounds, %d server(s): release → notification p50 %s p99 %s; release → candidate holds the lease p50 %s p99 %s max %s",
				rounds, n, pct(notify, 50), pct(notify, 99), pct(handover, 50), pct(handover, 99), handover[len(handover)-1])
			if pct(handover, 50) > 100*time.Millisecond {
				t.Errorf("median handover %s, target under 100ms", pct(handover, 50))
			}
		})
	}
}
