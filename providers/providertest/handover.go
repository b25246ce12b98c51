package providertest

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

// HandoverOptions configure Handover. Zero values take the defaults.
type HandoverOptions struct {
	Rounds int           // default 40
	TTL    time.Duration // the lease's ttl; default 1 minute
	// Poll is how often a candidate without a Notifier retries Acquire, as
	// the agent does every retry_every; default 100ms.
	Poll time.Duration
	// Target, when set, fails the test if the median handover is longer.
	Target time.Duration
	// TokensMaySkip: the candidate's token need only be greater than the
	// holder's, not one more. Redlock's per-server counters move on every
	// server an attempt reached, so an attempt that missed its quorum
	// (a slow server under load) leaves a gap.
	TokensMaySkip bool
}

// HandoverResult holds the sorted durations from the start of Release to the
// waiting candidate holding the lease.
type HandoverResult struct {
	Durations []time.Duration
}

// Percentile returns the p-th percentile (0-100).
func (r HandoverResult) Percentile(p int) time.Duration {
	return r.Durations[(len(r.Durations)-1)*p/100]
}

func (r HandoverResult) String() string {
	return fmt.Sprintf("%d rounds: p50 %s p99 %s max %s", len(r.Durations),
		r.Percentile(50), r.Percentile(99), r.Durations[len(r.Durations)-1])
}

// Handover measures graceful handovers as the agent sees them: a holds the
// lease; b, refused once, waits — on Notify when b is a providers.Notifier
// (found with providers.As), else polling Acquire (AcquireMany when b is a
// providers.Batcher, as the agent's) every Poll — while a
// releases; the time runs from the start of Release until b holds the
// lease, whose token must be a's + 1.
func Handover(t *testing.T, a, b providers.Provider, o HandoverOptions) HandoverResult {
	t.Helper()
	if o.Rounds == 0 {
		o.Rounds = 40
	}
	if o.TTL == 0 {
		o.TTL = time.Minute
	}
	if o.Poll == 0 {
		o.Poll = 100 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wake chan struct{}
	if n, ok := providers.As[providers.Notifier](b); ok {
		wake = make(chan struct{}, 1)
		if err := n.Notify(ctx, func(key string) {
			if key != "handover" && key != "" { // "": any key may have changed
				return
			}
			select {
			case wake <- struct{}{}:
			default: // a wake-up is already pending
			}
		}); err != nil {
			t.Fatalf("Notify: %v", err)
		}
	}
	// The candidate acquires as the agent does: with AcquireMany where
	// the store batches.
	acquire := b.Acquire
	if m, ok := providers.As[providers.Batcher](b); ok {
		acquire = func(ctx context.Context, req providers.AcquireRequest) (providers.Lease, error) {
			ls, errs := m.AcquireMany(ctx, []providers.AcquireRequest{req})
			return ls[0], errs[0]
		}
	}
	var res HandoverResult
	for round := range o.Rounds {
		la, err := a.Acquire(ctx, providers.AcquireRequest{Key: "handover", Holder: "a", TTL: o.TTL})
		if err != nil {
			t.Fatalf("round %d: holder's Acquire: %v", round, err)
		}
		if _, err := b.Acquire(ctx, providers.AcquireRequest{Key: "handover", Holder: "b", TTL: o.TTL}); !errors.Is(err, providers.ErrHeld) {
			t.Fatalf("round %d: candidate's first Acquire: %v, want ErrHeld", round, err)
		}
		for wake != nil && len(wake) > 0 {
			<-wake
		}
		got := make(chan providers.Lease, 1)
		failed := make(chan error, 1)
		go func() {
			for {
				if wake != nil {
					select {
					case <-wake:
					case <-time.After(5 * time.Second): // a lost notification still ends
					case <-ctx.Done():
						return
					}
				} else {
					select {
					case <-time.After(o.Poll):
					case <-ctx.Done():
						return
					}
				}
				l, err := acquire(ctx, providers.AcquireRequest{Key: "handover", Holder: "b", TTL: o.TTL})
				if err == nil {
					got <- l
					return
				}
				if !errors.Is(err, providers.ErrHeld) {
					failed <- err
					return
				}
			}
		}()
		if wake == nil { // release at a random point of the candidate's polling cycle
			time.Sleep(rand.N(o.Poll))
		}
		start := time.Now()
		if err := a.Release(ctx, la); err != nil {
			t.Fatalf("round %d: Release: %v", round, err)
		}
		select {
		case lb := <-got:
			res.Durations = append(res.Durations, time.Since(start))
			if lb.Token != la.Token+1 && !(o.TokensMaySkip && lb.Token > la.Token) {
				t.Fatalf("round %d: the candidate's token %d after %d", round, lb.Token, la.Token)
			}
			if err := b.Release(ctx, lb); err != nil {
				t.Fatalf("round %d: candidate's Release: %v", round, err)
			}
		case err := <-failed:
			t.Fatalf("round %d: candidate: %v", round, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: the candidate did not get the lease within 30s of the release", round)
		}
	}
	slices.Sort(res.Durations)
	how := "polling every " + o.Poll.String()
	if wake != nil {
		how = "notified (Notify)"
	}
	t.Logf("graceful handover, candidate %s: %s", how, res)
	if o.Target > 0 && res.Percentile(50) > o.Target {
		t.Errorf("median handover %s, target under %s", res.Percentile(50), o.Target)
	}
	return res
}
