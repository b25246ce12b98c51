package agent

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
	sqlprovider "github.com/electd/electd/providers/sql"
)

// countingAcquire counts the batched acquisitions that reach the store, and
// refuses single ones.
type countingAcquire struct {
	providers.Provider
	requests, leases atomic.Int64
}

func (c *countingAcquire) Unwrap() providers.Provider { return c.Provider }

func (c *countingAcquire) AcquireMany(ctx context.Context, reqs []providers.AcquireRequest) ([]providers.Lease, []error) {
	if jobs := jobLeases(reqs, func(r providers.AcquireRequest) string { return r.Key }); jobs > 0 {
		c.requests.Add(1)
		c.leases.Add(int64(jobs))
	}
	return c.Provider.(providers.Batcher).AcquireMany(ctx, reqs)
}

func (c *countingAcquire) RenewMany(ctx context.Context, ls []providers.Lease) ([]providers.Lease, []error) {
	return c.Provider.(providers.Batcher).RenewMany(ctx, ls)
}

func (c *countingAcquire) ReleaseMany(ctx context.Context, ls []providers.Lease) []error {
	return c.Provider.(providers.Batcher).ReleaseMany(ctx, ls)
}

func (c *countingAcquire) Acquire(context.Context, providers.AcquireRequest) (providers.Lease, error) {
	panic("a store that batches acquisitions got a single one")
}

func leadershipJobs(n int, ttl string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "job \"j%04d\" {\n  ttl = %q\n}\n", i, ttl)
	}
	return b.String()
}

func allLead(a *testAgent, n int) func() bool {
	return func() bool {
		jobs := a.Jobs()
		for _, j := range jobs {
			if j.State != StateLeader {
				return false
			}
		}
		return len(jobs) == n
	}
}

// A cold start of many jobs is a handful of requests, and a job costs no
// goroutine of its own: the agent runs as many goroutines for 1,000 jobs as
// for one, give or take the store's.
func TestManyJobsFewRequestsNoGoroutines(t *testing.T) {
	const jobs = 1000
	before := runtime.NumGoroutine()
	var counter *countingAcquire
	a := startAgent(t, loadConfig(t, agentConfig("node-1", sqliteDB(t), leadershipJobs(jobs, "10s"))), func(o *Options) {
		o.Logger = hclog.NewNullLogger() // a thousand "elected" lines say nothing
		open := o.Open
		o.Open = func(ctx context.Context, p config.Provider) (providers.Provider, error) {
			inner, err := open(ctx, p)
			counter = &countingAcquire{Provider: inner}
			return counter, err
		}
	})
	eventually(t, 30*time.Second, "every job leads", allLead(a, jobs))
	reqs, leases := counter.requests.Load(), counter.leases.Load()
	t.Logf("%d jobs led after %d acquisitions in %d requests", jobs, leases, reqs)
	if leases != jobs || reqs > jobs/maxBatch+2 {
		t.Errorf("%d acquisitions in %d requests for %d jobs: want each job once, in about %d requests",
			leases, reqs, jobs, jobs/maxBatch)
	}
	// The requests' goroutines end soon after their answers: wait for that
	// rather than a fixed time (a leak never ends).
	extra := runtime.NumGoroutine() - before
	for deadline := time.Now().Add(5 * time.Second); extra > 30 && time.Now().Before(deadline); extra = runtime.NumGoroutine() - before {
		time.Sleep(10 * time.Millisecond)
	}
	if extra > 30 {
		t.Errorf("%d goroutines more than before the agent for %d leadership-only jobs: want a handful", extra, jobs)
	}
}

// A candidate learns from the store when the leader's term ends and tries
// then: with retry_every far longer than the ttl, a lease left behind by a
// crashed leader is taken when it expires, not at the next poll.
func TestCandidateTriesWhenTheTermEnds(t *testing.T) {
	db := sqliteDB(t)
	settings := &sqlprovider.Settings{Driver: "sqlite", DSN: db}
	p, err := settings.Open(context.Background(), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// A leader that died: its lease runs out in 2s, nobody releases it.
	if _, err := p.Acquire(context.Background(), providers.AcquireRequest{Key: "orphan", Holder: "dead-node#01234567", TTL: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	a := startAgent(t, loadConfig(t, agentConfig("node-1", db, `
job "orphan" {
  ttl         = "3s"
  renew_every = "1s"
  retry_every = "1m"
}`)))
	eventually(t, 20*time.Second, "the orphaned lease taken", func() bool { return a.job("orphan").state == StateLeader })
	took := time.Since(start)
	t.Logf("taken %s after the agent started (the lease had 2s left)", took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("the lease was taken after %s: the candidate waited for retry_every, not for the term's end", took)
	}
	if took < 1900*time.Millisecond {
		t.Errorf("the lease was taken after %s, before it expired", took)
	}
}
