package redis

import (
	"testing"
	"time"

	"github.com/electd/electd/providers"
)

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
