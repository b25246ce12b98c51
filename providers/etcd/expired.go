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
// either (the holder may have renewed). Together they are. A renewal sets
// remaining back to the granted ttl G, so etcd answers TTL >= 1 for the
// G-1 s after it. Take a run of reads that all answered TTL 0, each sent
// less than G-1 s before the next one was answered: a renewal between two
// of them would have made the later one answer >= 1, so there was none
// from the first read of the run to the last. The first read bounds
// remaining from above (< 1 s when etcd answered it, at or before its
// answer r_1); with no renewal since, remaining falls as time passes, so a
// read of the run sent at or after r_1 + 1 s was answered when the lease
// had expired. Only then is it revoked.
//
// Reads that answer TTL >= 1 bound nothing: a renewal after such a read
// leaves the next one at >= 1 too, unseen (with G = 2 and renewals every
// 500 ms, etcd answers 1 at every read of a live lease). They only say
// when the lease may reach its last second: remaining >= TTL, so not
// before TTL-1 s later, and Remaining sends the candidate back then, and
// every 100 ms once it can.
//
// Candidates poll at retry_every (or when HeldError.Remaining says), so the
// run is made of the reads Acquire and AcquireMany make anyway; Remaining
// is cut to the point where the run would prove the expiry. A prober
// (probe) adds reads of its own while a candidate waits for a lease in its
// last second, so the run starts within probeEvery of it.

// chainMargin covers the difference in rate between this host's clock and
// the etcd leader's over a chain (a few seconds at most) and the time
// between a read's answer and the local timestamp taken of it.
const chainMargin = 20 * time.Millisecond

// ttlChain is a run of reads of one lease's time to live that all
// answered 0, on this host's monotonic clock.
type ttlChain struct {
	lastSent time.Time     // send of the newest read
	deadline time.Time     // the first read's answer + 1 s: the lease has expired by then
	gap      time.Duration // the longest a renewal stays unseen: G - 1 s, less the margin
}

// ttlChains holds the runs of the leases this provider has asked about.
type ttlChains struct {
	mu sync.Mutex
	m  map[clientv3.LeaseID]*ttlChain
}

// nearEnd is how often a candidate reads a lease that may be in its last
// second (it answered TTL 1): the first read that answers 0 starts the run
// that proves the expiry, so this is how late after the lease's end the
// proof can come, at most, besides the margin.
const nearEnd = 100 * time.Millisecond

// observe adds a read of lease id (sent at sent, answered at answered with
// ttl and granted) and reports whether it proves that the lease was expired
// when etcd answered, and when to read next: the instant from which a read
// would prove it, or sooner to catch the lease's last second (zero: no
// advice).
func (c *ttlChains) observe(id clientv3.LeaseID, sent, answered time.Time, ttl, granted int64) (expired bool, next time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[clientv3.LeaseID]*ttlChain{}
	}
	gap := time.Duration(granted-1)*time.Second - chainMargin
	if ttl > 0 || gap <= 0 {
		delete(c.m, id)
		if ttl == 1 && gap > 0 {
			return false, answered.Add(nearEnd)
		}
		return false, time.Time{}
	}
	ch, ok := c.m[id]
	switch {
	case answered.Sub(sent) >= gap || (ok && sent.Before(ch.lastSent)):
		// A read that took longer than a renewal stays unseen, or one
		// sent before the run's newest read and answered after it (the
		// reads of a prober and of candidates overlap): where etcd
		// answered it within the run is unknown, so it is left out. The
		// rule holds for the reads it uses: leaving one out only makes a
		// proof later.
		if !ok {
			return false, time.Time{}
		}
	case ok && answered.Sub(ch.lastSent) < ch.gap:
		// No renewal could hide between the two reads: the run goes on.
		if !sent.Before(ch.deadline.Add(chainMargin)) {
			delete(c.m, id)
			return true, time.Time{}
		}
		ch.lastSent = sent
	default:
		// The first read of a run, or one too far from the last.
		ch = &ttlChain{deadline: answered.Add(time.Second), gap: gap, lastSent: sent}
		c.m[id] = ch
	}
	c.prune(answered)
	next = ch.deadline.Add(chainMargin)
	if next.Sub(ch.lastSent) > ch.gap*4/5 {
		next = ch.lastSent.Add(ch.gap / 2) // a read halfway keeps the run going
	}
	return false, next
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
// than etcd's own, or less when a read sooner may prove the lease expired
// (ttlChain). alive is false, and left 0, when the
// lease is gone: expired and revoked by etcd since the key was read, or
// proven expired by the reads of its chain and revoked here. A candidate's
// (probe true) lease that may be in its last second gets a prober besides.
func (p *Provider) timeLeft(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID, probe bool) (left time.Duration, alive bool, err error) {
	a, err := p.askTTL(ctx, cli, id)
	if err != nil || !a.alive {
		return 0, false, err
	}
	left = time.Duration(a.ttl+1) * time.Second
	if !a.next.IsZero() {
		left = min(left, max(a.next.Sub(a.answered), time.Millisecond))
	}
	if probe && a.ttl <= 1 && a.granted >= 2 {
		p.probe(cli, id)
	}
	return left, true, nil
}

// ttlAnswer is one read of a lease's time to live, added to its chain.
type ttlAnswer struct {
	alive    bool      // false: the lease is gone (or was proven expired and revoked)
	ttl      int64     // etcd's TTL, whole seconds
	granted  int64     // the lease's granted ttl
	answered time.Time // when the answer came
	next     time.Time // from observe: when to read next (zero: no advice)
}

// askTTL reads lease id's time to live, adds the read to its chain, and
// revokes the lease when the chain proves it expired.
func (p *Provider) askTTL(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID) (ttlAnswer, error) {
	sent := time.Now()
	resp, err := cli.TimeToLive(ctx, id)
	answered := time.Now()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL < 0) {
		p.chains.forget(id)
		return ttlAnswer{}, nil
	}
	if err != nil {
		return ttlAnswer{}, fmt.Errorf("lease time to live: %w", err)
	}
	expired, next := p.chains.observe(id, sent, answered, resp.TTL, resp.GrantedTTL)
	if expired {
		if _, err := cli.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return ttlAnswer{}, fmt.Errorf("revoke expired lease: %w", err)
		}
		p.log.Debug("revoked an expired lease", "lease", fmt.Sprintf("%x", int64(id)), "ttl_read", resp.TTL)
		return ttlAnswer{}, nil
	}
	return ttlAnswer{alive: true, ttl: resp.TTL, granted: resp.GrantedTTL, answered: answered, next: next}, nil
}

// A candidate's own reads come at retry_every, or every nearEnd while the
// lease answers TTL 1, so the first read that answers 0 comes up to nearEnd
// after the lease enters its last second, and the proof a second after that
// read. A prober narrows it: while a candidate of this provider waits for a
// lease that may be in its last second (it answered TTL 1 or 0), one
// goroutine per lease reads it every probeEvery and, once the answers are
// 0, at the instants the chain asks for, and revokes it as soon as the
// chain proves it expired, by the same rule. A Notify subscription hears
// the deletion at once. It costs etcd a LeaseTimeToLive every probeEvery
// per lease waited for in its last second (one lease per holding agent and
// ttl), not per job; with a 2 s ttl, whose live leases always answer 1,
// that is for as long as a candidate waits.
const (
	probeEvery = 10 * time.Millisecond
	// probeIdle ends a prober when no candidate of this provider asked
	// about its lease for this long (it took the job, or gave up).
	probeIdle = 2 * time.Second
)

// leaseProbes holds the leases that have a prober running, with the last
// time a candidate asked about each.
type leaseProbes struct {
	mu    sync.Mutex
	asked map[clientv3.LeaseID]time.Time
}

// probe notes that a candidate asked about lease id, and starts its prober
// unless it runs.
func (p *Provider) probe(cli *clientv3.Client, id clientv3.LeaseID) {
	p.probes.mu.Lock()
	defer p.probes.mu.Unlock()
	if p.probes.asked == nil {
		p.probes.asked = make(map[clientv3.LeaseID]time.Time)
	}
	_, running := p.probes.asked[id]
	p.probes.asked[id] = time.Now()
	if !running {
		go p.runProbe(cli, id)
	}
}

// probeWanted reports whether a candidate asked about lease id lately; when
// none did, the prober is removed (a later ask starts another).
func (p *Provider) probeWanted(id clientv3.LeaseID) bool {
	p.probes.mu.Lock()
	defer p.probes.mu.Unlock()
	if time.Since(p.probes.asked[id]) < probeIdle {
		return true
	}
	delete(p.probes.asked, id)
	return false
}

// runProbe reads lease id until it is gone (by etcd, by another candidate,
// or revoked here once proven expired), renewed out of its last second
// (TTL 2 or more), unwanted, unreadable, or the provider is closed.
func (p *Provider) runProbe(cli *clientv3.Client, id clientv3.LeaseID) {
	wanted := true
	defer func() {
		if wanted {
			p.probes.mu.Lock()
			delete(p.probes.asked, id)
			p.probes.mu.Unlock()
		}
	}()
	t := time.NewTimer(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		if wanted = p.probeWanted(id); !wanted {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.DialTimeout)
		a, err := p.askTTL(ctx, cli, id)
		cancel()
		if err != nil || !a.alive || a.ttl > 1 {
			return
		}
		wait := probeEvery
		if a.ttl == 0 && !a.next.IsZero() {
			wait = max(time.Until(a.next), 0)
		}
		t.Reset(wait)
	}
}
