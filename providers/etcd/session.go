package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/providers"
)

// session is an etcd lease this provider attaches the lease keys of all its
// terms of one ttl to, as etcd's concurrency.Session does for elections:
// one keep-alive renews them all, where a lease per term cost etcd a
// keep-alive per job (at 10,000 jobs, most of etcd's CPU). Only this
// Provider writes keys with its sessions' ids, so refreshing a session can
// only extend this process's own terms, never revive another holder's.
type session struct {
	id   clientv3.LeaseID
	ttl  int64     // granted, in seconds
	sent time.Time // when the last grant or keep-alive was sent
	at   time.Time // when etcd's answer to it arrived
}

func (s session) expires() time.Time { return s.at.Add(time.Duration(s.ttl) * time.Second) }

// session returns the live session for leases of secs seconds, refreshed
// by a request sent at or after since, the start of the caller's operation:
// etcd then keeps the session at least ttl after since, as the timing rule
// asks of a term that began at since. That is the cached session if a
// refresh was sent since then (a concurrent caller's, or RenewMany's), else
// the cached one after a keep-alive, else a new grant. Refreshes are
// serialised (refreshing), so a burst of concurrent Acquires shares one
// request; the wait for another's ends with ctx. No lock is held over a
// request: RenewMany's answers (kept) must never wait for a refresh stuck
// on a store that does not answer, or a leader would learn too late that
// its renewal failed.
func (p *Provider) session(ctx context.Context, cli *clientv3.Client, secs int64, since time.Time) (session, error) {
	select {
	case p.refreshing <- struct{}{}:
		defer func() { <-p.refreshing }()
	case <-ctx.Done():
		return session{}, fmt.Errorf("keep lease alive: %w", ctx.Err())
	}
	p.smu.Lock()
	s, ok := p.sessions[secs]
	p.smu.Unlock()
	if ok && !s.sent.Before(since) {
		return s, nil
	}
	if ok {
		answers, err := p.keepAlive(ctx, cli, []clientv3.LeaseID{s.id})
		if err != nil {
			return session{}, fmt.Errorf("keep lease alive: %w", err)
		}
		if a := answers[0]; a.ttl > 0 {
			s.ttl, s.sent, s.at = a.ttl, a.sent, a.at
			return s, nil
		}
		// Expired: etcd deleted its keys, and kept forgot it.
	}
	sent := time.Now()
	g, err := cli.Grant(ctx, secs)
	if err != nil {
		return session{}, fmt.Errorf("grant lease: %w", err)
	}
	s = session{id: g.ID, ttl: g.TTL, sent: sent, at: time.Now()}
	p.smu.Lock()
	if p.sessions == nil {
		p.sessions = make(map[int64]session)
	}
	p.sessions[secs] = s
	p.smu.Unlock()
	return s, nil
}

// kept records etcd's answer to a keep-alive of lease id, sent by
// RenewMany: a later Acquire reuses the fresh session, and a session etcd
// no longer knows is forgotten, so the next term gets a new one.
func (p *Provider) kept(id clientv3.LeaseID, ans keptAlive) {
	p.smu.Lock()
	defer p.smu.Unlock()
	for secs, s := range p.sessions {
		if s.id != id {
			continue
		}
		if ans.ttl <= 0 {
			delete(p.sessions, secs)
		} else if ans.sent.After(s.sent) {
			s.ttl, s.sent, s.at = ans.ttl, ans.sent, ans.at
			p.sessions[secs] = s
		}
	}
}

// keepAlive sends a keep-alive for every id over one stream, as
// keepAliveMany does, and records each answer (kept).
func (p *Provider) keepAlive(ctx context.Context, cli *clientv3.Client, ids []clientv3.LeaseID) ([]keptAlive, error) {
	answers, err := keepAliveMany(ctx, cli, ids)
	for n, ans := range answers {
		p.kept(ids[n], ans)
	}
	return answers, err
}

// expired forgets session id after etcd refused a write attached to it
// (ErrLeaseNotFound: it expired between its keep-alive and the write).
func (p *Provider) expired(id clientv3.LeaseID) { p.kept(id, keptAlive{}) }

// abandon remembers a term whose lease key may still be attached to a
// session: a Release that failed, or a write whose outcome is unknown. With
// a lease per term such a key expired by itself; on a session that this
// provider's other terms keep alive it would not, so the next RenewMany
// releases it (sweep).
func (p *Provider) abandon(l providers.Lease) {
	if checkLease(l) != nil {
		return // refused before any write: nothing to clean up
	}
	p.smu.Lock()
	defer p.smu.Unlock()
	if p.abandoned == nil {
		p.abandoned = make(map[string]providers.Lease)
	}
	p.abandoned[l.Key] = l
}

// startSweep starts a sweep unless the last one is still running or there
// is nothing to sweep. It runs beside the renewals, never in their way: a
// sick store must not hold up the terms that still renew.
func (p *Provider) startSweep() {
	p.smu.Lock()
	defer p.smu.Unlock()
	if len(p.abandoned) == 0 || p.sweeping {
		return
	}
	p.sweeping = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.DialTimeout)
		defer cancel()
		p.sweep(ctx)
		p.smu.Lock()
		p.sweeping = false
		p.smu.Unlock()
	}()
}

// sweep releases the abandoned terms, each guarded by its holder and token
// as Release is: a term the caller took again since (a higher token) is
// left alone. A term that still cannot be released is tried again next time.
func (p *Provider) sweep(ctx context.Context) {
	p.smu.Lock()
	todo := make([]providers.Lease, 0, len(p.abandoned))
	for _, l := range p.abandoned {
		todo = append(todo, l)
	}
	p.smu.Unlock()
	for _, l := range todo {
		err := p.release(ctx, l)
		if err != nil && !errors.Is(err, providers.ErrLost) {
			p.log.Debug("releasing an abandoned term failed; trying again at the next renewal", "key", l.Key, "token", l.Token, "error", err)
			continue
		}
		p.smu.Lock()
		if cur, ok := p.abandoned[l.Key]; ok && cur.Token == l.Token {
			delete(p.abandoned, l.Key)
		}
		p.smu.Unlock()
	}
}

// revokeSessions ends every session at Close, so that no key of this
// process outlives it (a clean stop has released them all already).
func (p *Provider) revokeSessions(cli *clientv3.Client) {
	p.smu.Lock()
	ids := make([]clientv3.LeaseID, 0, len(p.sessions))
	for _, s := range p.sessions {
		ids = append(ids, s.id)
	}
	p.sessions = nil
	p.smu.Unlock()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.DialTimeout)
	defer cancel()
	for _, id := range ids {
		if _, err := cli.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			p.log.Debug("revoke etcd lease at close failed; it expires by itself", "lease_id", int64(id), "error", err)
		}
	}
}
