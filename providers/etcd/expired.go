package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A crashed holder's lease key lives on after the lease's ttl until etcd's
// lessor revokes the lease, from a loop that runs every 500 ms: a candidate
// waiting for the key's deletion takes over up to 500 ms late. A candidate
// can revoke the lease itself once it is expired, which is what the loop
// would do: an expired lease can no longer be renewed (etcd's Renew of an
// expired lease waits for its revocation and answers "not found"), so the
// revoke takes nothing from a holder who could still keep it.
//
// The hard part is knowing that it is expired. LeaseTimeToLive answers
// trunc(remaining) in whole seconds, so TTL 0 means anything in (-1 s, 1 s):
// TTL 0 alone is not "expired". The candidate's own clock alone is not
// either (the holder may have renewed). Together they are: each answer
// bounds remaining from above, remaining(read) < TTL + 1 s, and while the
// holder does not renew, remaining falls as time passes, so a later read
// sent at s has remaining < TTL_i + 1 s - (s - r_i) for every earlier read i
// (answered at r_i). A renewal sets remaining back to the granted ttl G, so
// etcd answers TTL >= 1 for the G-1 s after it: two reads less than G-1 s
// apart (the send of one to the answer of the next) see any renewal between
// them as a TTL that went up. A chain of such reads with no TTL going up is
// a stretch without renewals, and when a read of it is sent at or after
// r_i + TTL_i + 1 s of an earlier one, the lease was expired when etcd
// answered it. Only then is it revoked.
//
// Candidates poll at retry_every (or when HeldError.Remaining says), so the
// chain is made of the reads Acquire makes anyway; Remaining is cut to the
// point where the chain would prove the expiry.

// chainMargin covers the difference in rate between this host's clock and
// the etcd leader's over a chain (a few seconds at most) and the time
// between a read's answer and the local timestamp taken of it.
const chainMargin = 20 * time.Millisecond

// ttlChain is the reads of one lease's time to live since it was last seen
// renewed, on this host's monotonic clock.
type ttlChain struct {
	lastSent time.Time     // send of the newest read
	lastTTL  int64         // its answer
	deadline time.Time     // min over the chain of answer + TTL + 1 s: the lease has expired by then
	gap      time.Duration // the longest a renewal stays visible: G - 1 s, less the margin
}

// ttlChains holds the chains of the leases this provider has asked about.
type ttlChains struct {
	mu sync.Mutex
	m  map[clientv3.LeaseID]*ttlChain
}

// observe adds a read of lease id (sent at sent, answered at answered with
// ttl and granted) to its chain and reports whether the chain proves that
// the lease was expired when etcd answered, and the instant from which the
// next read would prove it (zero when that read would come too late to
// carry the chain on).
func (c *ttlChains) observe(id clientv3.LeaseID, sent, answered time.Time, ttl, granted int64) (expired bool, proofAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[clientv3.LeaseID]*ttlChain{}
	}
	bound := answered.Add(time.Duration(ttl+1) * time.Second)
	ch, ok := c.m[id]
	switch {
	case ok && answered.Sub(ch.lastSent) < ch.gap && ttl <= ch.lastTTL:
		// No renewal could hide between the two reads: the chain goes on.
		expired = !sent.Before(ch.deadline.Add(chainMargin))
		if bound.Before(ch.deadline) {
			ch.deadline = bound
		}
	default:
		// A first read, a renewal seen, or reads too far apart: a chain
		// starts here.
		gap := time.Duration(granted-1)*time.Second - chainMargin
		if gap <= 0 {
			delete(c.m, id)
			return false, time.Time{}
		}
		ch = &ttlChain{deadline: bound, gap: gap}
		c.m[id] = ch
	}
	ch.lastSent, ch.lastTTL = sent, ttl
	if expired {
		delete(c.m, id)
		return true, time.Time{}
	}
	c.prune(answered)
	proofAt = ch.deadline.Add(chainMargin)
	if proofAt.Sub(sent) > ch.gap*4/5 {
		// Too far for one more read to carry the chain on: the reads of
		// a candidate polling at retry_every may.
		return false, time.Time{}
	}
	return false, proofAt
}

// forget drops the chain of a lease that is gone.
func (c *ttlChains) forget(id clientv3.LeaseID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

// prune drops chains no read extended for a minute (a candidate that gave
// up, a holder that renewed and was not asked about again).
func (c *ttlChains) prune(now time.Time) {
	if len(c.m) < 64 {
		return
	}
	for id, ch := range c.m {
		if now.Sub(ch.lastSent) > time.Minute {
			delete(c.m, id)
		}
	}
}

// timeLeft asks etcd how long the lease has left (LeaseTimeToLive), by the
// clock of etcd's lessor. etcd answers in whole seconds, truncated, so the
// lease ends within the second after TTL: TTL+1 s is reported, never less
// than etcd's own, or less when the reads of this provider will prove the
// lease expired sooner (ttlChain). alive is false, and left 0, when the
// lease is gone: expired and revoked by etcd since the key was read, or
// proven expired by the reads of its chain and revoked here.
func (p *Provider) timeLeft(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID) (left time.Duration, alive bool, err error) {
	sent := time.Now()
	resp, err := cli.TimeToLive(ctx, id)
	answered := time.Now()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL < 0) {
		p.chains.forget(id)
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("lease time to live: %w", err)
	}
	left = time.Duration(resp.TTL+1) * time.Second
	expired, proofAt := p.chains.observe(id, sent, answered, resp.TTL, resp.GrantedTTL)
	if expired {
		if _, err := cli.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return 0, false, fmt.Errorf("revoke expired lease: %w", err)
		}
		p.log.Debug("revoked an expired lease", "lease", fmt.Sprintf("%x", int64(id)), "ttl_read", resp.TTL)
		return 0, false, nil
	}
	if !proofAt.IsZero() {
		left = min(left, max(proofAt.Sub(answered), time.Millisecond))
	}
	return left, true, nil
}
