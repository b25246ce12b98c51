package redis

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/internal/cluster"
	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
)

// A server that refused a renewal may have the term by the time it is
// asked to join it: the Acquire's write to it, on another connection, had
// not landed yet (an Acquire returns once a quorum has answered). It counts
// as joined, and its live key is renewed; before, it answered "another term
// is live there" and the renewal failed with a quorum that had the term
// (TestRedlockHung under load, in CI).
func TestJoinCountsAServerThatHasTheTerm(t *testing.T) {
	t.Parallel()
	p, ctx := redlock(t)
	l, err := p.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Every server has the term once the Acquire's writes have landed,
	// the one it did not wait for too.
	for _, n := range p.nodes {
		if !cluster.Until(5*time.Second, 10*time.Millisecond, func() bool {
			v, _ := n.c.Get(ctx, p.liveKey("job")).Result()
			return v == "a"
		}) {
			t.Fatalf("%s does not have the term 5s after the Acquire", n.addr)
		}
		// A live key near its end, as after a renewal it missed.
		if err := n.c.PExpire(ctx, p.liveKey("job"), time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.join(ctx, l, []int{0, 1, 2}); got != 3 {
		t.Fatalf("join of three servers that have the term: %d joined, want 3", got)
	}
	for _, n := range p.nodes {
		if ttl, err := n.c.PTTL(ctx, p.liveKey("job")).Result(); err != nil || ttl < 5*time.Second {
			t.Errorf("%s: the live key's ttl after the join: %s (%v), want the term's 10s", n.addr, ttl, err)
		}
	}
	// Another term on a server is still never joined.
	other := l
	other.Holder, other.Token = "b", l.Token+1
	if got := p.join(ctx, other, []int{0}); got != 0 {
		t.Fatalf("join of a server where another term is live: %d joined, want 0", got)
	}
}

// redlock opens a provider on three fresh servers, closed with t, and
// gives a context that ends after 30 s, for the internal Redlock tests.
func redlock(t *testing.T) (*Provider, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	var addrs []string
	for range 3 {
		a, _ := teststore.StartRedis(t)
		addrs = append(addrs, a)
	}
	p, err := New(ctx, Settings{Addresses: addrs, Prefix: "internal-test:"}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, ctx
}
