package agent

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
)

// countingBatch counts the batched renewal requests that reach the store.
type countingBatch struct {
	providers.Provider
	requests, leases atomic.Int64
}

func (c *countingBatch) Unwrap() providers.Provider { return c.Provider }

func (c *countingBatch) RenewMany(ctx context.Context, ls []providers.Lease) ([]providers.Lease, []error) {
	if jobs := jobLeases(ls, func(l providers.Lease) string { return l.Key }); jobs > 0 {
		c.requests.Add(1)
		c.leases.Add(int64(jobs))
	}
	return c.Provider.(providers.Batcher).RenewMany(ctx, ls)
}

func (c *countingBatch) AcquireMany(ctx context.Context, reqs []providers.AcquireRequest) ([]providers.Lease, []error) {
	return c.Provider.(providers.Batcher).AcquireMany(ctx, reqs)
}

func (c *countingBatch) ReleaseMany(ctx context.Context, ls []providers.Lease) []error {
	return c.Provider.(providers.Batcher).ReleaseMany(ctx, ls)
}

// jobLeases counts the items of a batch that are jobs' leases: the agent's
// membership record (members.go) is not one.
func jobLeases[T any](items []T, key func(T) string) int {
	n := 0
	for _, it := range items {
		if !strings.HasPrefix(key(it), memberPrefix) {
			n++
		}
	}
	return n
}

func (c *countingBatch) Renew(ctx context.Context, l providers.Lease) (providers.Lease, error) {
	panic("a batching store got a single renewal")
}

// Many jobs on one store: their renewals reach it as a few requests per
// renew period, not one per job, and every job keeps its lease.
func TestRenewalsBatched(t *testing.T) {
	const jobs = 200
	var b strings.Builder
	// A longer ttl than the other tests: 200 first acquisitions at once
	// queue up on SQLite's one writer, and a renewal behind them must not
	// run out of term.
	for i := range jobs {
		fmt.Fprintf(&b, "job \"j%03d\" {\n  ttl = \"6s\"\n  renew_every = \"500ms\"\n  retry_every = \"200ms\"\n}\n", i)
	}
	var counter *countingBatch
	a := startAgent(t, loadConfig(t, agentConfig("node-1", sqliteDB(t), b.String())), func(o *Options) {
		open := o.Open
		o.Open = func(ctx context.Context, p config.Provider) (providers.Provider, error) {
			inner, err := open(ctx, p)
			counter = &countingBatch{Provider: inner}
			return counter, err
		}
	})
	eventually(t, 20*time.Second, "every job leads", func() bool {
		for _, j := range a.Jobs() {
			if j.State != "leader" {
				return false
			}
		}
		return len(a.Jobs()) == jobs
	})
	tokens := map[string]uint64{}
	for _, j := range a.Jobs() {
		tokens[j.Job] = j.Token
	}
	counter.requests.Store(0)
	counter.leases.Store(0)
	// Six renewals of every job (3s of renew_every 500ms), all aligned on
	// one 500ms grid: one request per renew_every however many jobs.
	var reqs, leases int64
	eventually(t, 30*time.Second, "six renewals of every job", func() bool {
		reqs, leases = counter.requests.Load(), counter.leases.Load()
		return leases >= jobs*6
	})
	t.Logf("%d jobs: %d renewals in %d requests", jobs, leases, reqs)
	if reqs > 6+2 {
		t.Errorf("%d requests for %d renewals: not batched", reqs, leases)
	}
	for _, j := range a.Jobs() {
		if j.State != "leader" || j.Token != tokens[j.Job] {
			t.Fatalf("job %s lost its lease while batched: %+v (token was %d)", j.Job, j, tokens[j.Job])
		}
	}
}
