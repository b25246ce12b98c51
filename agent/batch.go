package agent

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/electd/electd/metrics"
	"github.com/electd/electd/providers"
)

// A batch is sent once no renewal joined it for batchWindow, or batchMaxWait
// after its first renewal: thousands of jobs waking at one grid point take
// a few scheduler rounds to all ask.
const (
	batchWindow  = 10 * time.Millisecond
	batchMaxWait = 100 * time.Millisecond
)

// batcher sends the renewals of one provider's jobs that fall due together
// as one request (providers.BatchRenewer), so the store's load grows with
// the number of agents, not of jobs. Jobs align their renewals to a shared
// grid (align), which is what makes them fall due together.
type batcher struct {
	br      providers.BatchRenewer
	ref     string
	metrics *metrics.Metrics
	base    time.Time // the grid's origin

	mu      sync.Mutex
	pending []*batchReq
	first   time.Time // when the oldest pending renewal asked
	seen    int       // pending at the last tick
}

type batchReq struct {
	ctx   context.Context
	lease providers.Lease
	res   chan batchRes
}

type batchRes struct {
	lease providers.Lease
	err   error
}

func newBatcher(br providers.BatchRenewer, ref string, m *metrics.Metrics, now time.Time) *batcher {
	return &batcher{br: br, ref: ref, metrics: m, base: now}
}

// Renew queues lease for the next batch and waits for its answer or ctx.
func (b *batcher) Renew(ctx context.Context, lease providers.Lease) (providers.Lease, error) {
	req := &batchReq{ctx: ctx, lease: lease, res: make(chan batchRes, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, req)
	if len(b.pending) == 1 {
		b.first, b.seen = time.Now(), 1
		time.AfterFunc(batchWindow, b.tick)
	}
	b.mu.Unlock()
	select {
	case r := <-req.res:
		return r.lease, r.err
	case <-ctx.Done():
		return providers.Lease{}, ctx.Err()
	}
}

// tick sends the batch, unless renewals are still joining it.
func (b *batcher) tick() {
	b.mu.Lock()
	if n := len(b.pending); n != b.seen && time.Since(b.first) < batchMaxWait {
		b.seen = n
		b.mu.Unlock()
		time.AfterFunc(batchWindow, b.tick)
		return
	}
	b.mu.Unlock()
	b.flush()
}

// flush sends what is pending. The request carries the earliest deadline
// of the renewals in it: none may wait past its own step-down point.
func (b *batcher) flush() {
	b.mu.Lock()
	reqs := b.pending
	b.pending = nil
	b.mu.Unlock()
	live := reqs[:0]
	var deadline time.Time
	for _, r := range reqs {
		if r.ctx.Err() != nil {
			continue
		}
		live = append(live, r)
		if d, ok := r.ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
	}
	if len(live) == 0 {
		return
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(30 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	leases := make([]providers.Lease, len(live))
	for i, r := range live {
		leases[i] = r.lease
	}
	start := time.Now()
	out, errs := b.br.RenewMany(ctx, leases)
	var storeErr error
	for i, r := range live {
		if errs[i] != nil && !errors.Is(errs[i], providers.ErrLost) && storeErr == nil {
			storeErr = errs[i]
		}
		r.res <- batchRes{out[i], errs[i]}
	}
	if b.metrics != nil {
		b.metrics.ObserveBatch(b.ref, start, storeErr)
	}
}

// align moves a renewal due at t back to the grid point at or before it, so
// that the renewals of all jobs meet in one batch per renew_every. A
// renewal is only ever moved earlier (never past the time its term's rule
// set): a job renews a little more often, never less.
func (b *batcher) align(t, now time.Time, renewEvery time.Duration) time.Time {
	grid := max(renewEvery, 50*time.Millisecond)
	a := b.base.Add(t.Sub(b.base) / grid * grid)
	if a.Before(now) {
		return t
	}
	return a
}
