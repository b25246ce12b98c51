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

// An Acquire attempt's request that reaches a server after the same
// holder's later requests (a partition held it back, and the connection
// delivered it once the partition healed, after the holder had won a term
// and renewed it there) must not start a term over that one: it is refused
// with the live term, which keeps its token. Before, it started a term of
// the next token on that server, the renewals of the real term were refused
// there, and the term ended when one of its other servers was lost (the
// cluster suite's kill of a Redis server, after an isolation).
func TestStaleAcquireRefused(t *testing.T) {
	t.Parallel()
	p, ctx := redlock(t)
	sent := time.Now() // the delayed request's attempt
	l, err := p.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if l, err = p.Renew(ctx, l); err != nil {
		t.Fatal(err)
	}
	n := p.nodes[0]
	r, err := p.nodeAcquire(ctx, n, "job", "a", 10*time.Second, 0, sent.UnixMicro())
	if err != nil {
		t.Fatal(err)
	}
	if r.ok || r.holder != "a" || r.token != l.Token {
		t.Fatalf("a delayed request of the holder: %+v, want refused with its live term of token %d", r, l.Token)
	}
	if _, err := p.Renew(ctx, l); err != nil {
		t.Fatalf("the term after the delayed request: %v", err)
	}
	if v, err := n.c.HGet(ctx, p.stateKey("job"), "token").Result(); err != nil || v != "1" {
		t.Fatalf("the server's counter after the delayed request: %q (%v), want the term's 1", v, err)
	}
	// A request of the holder made after its latest one starts a new term,
	// as Acquire by the holder does.
	r, err = p.nodeAcquire(ctx, n, "job", "a", 10*time.Second, 0, time.Now().UnixMicro())
	if err != nil || !r.ok || r.token != l.Token+1 {
		t.Fatalf("a new request of the holder: %+v, %v; want the next token won", r, err)
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
