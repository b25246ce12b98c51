package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	if !p.keeping {
		p.keeping = true
		go p.keepIdle(cli)
	}
	p.smu.Unlock()
	return s, nil
}

// refreshAhead starts refreshing the session of secs, when there is one
// etcd should still know, beside the caller's read of the keys it means to
// take: the caller's own session call then finds it refreshed since its
// start, or waits for the refresh under way (refreshing), instead of
// sending it after the read. On a handover that is a round trip less.
func (p *Provider) refreshAhead(ctx context.Context, cli *clientv3.Client, secs int64, since time.Time) {
	p.smu.Lock()
	s, ok := p.sessions[secs]
	p.smu.Unlock()
	if !ok || !s.sent.Before(since) || !time.Now().Before(s.expires()) {
		return
	}
	go func() { _, _ = p.session(ctx, cli, secs, since) }() // errors: the caller's session call meets them
}

// ready gets a session of secs seconds, in the background, for a candidate
// that was refused, unless there is one: when the key comes free, the
// candidate's Acquire refreshes it beside its read (refreshAhead) instead
// of granting one after the read, which is a write to etcd's log and a
// round trip more on every handover. keepIdle keeps it alive meanwhile.
func (p *Provider) ready(cli *clientv3.Client, secs int64) {
	p.smu.Lock()
	defer p.smu.Unlock()
	if s, ok := p.sessions[secs]; (ok && time.Now().Before(s.expires())) || p.readying[secs] {
		return
	}
	if p.readying == nil {
		p.readying = make(map[int64]bool)
	}
	p.readying[secs] = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.DialTimeout)
		defer cancel()
		if _, err := p.session(ctx, cli, secs, time.Now()); err != nil {
			p.log.Debug("making a session ready for a candidate failed; its Acquire will grant one", "ttl_seconds", secs, "error", err)
		}
		p.smu.Lock()
		delete(p.readying, secs)
		p.smu.Unlock()
	}()
}

// keepEvery is how often keepIdle looks for sessions to refresh: well
// within a third of etcd's shortest lease (2 s at its defaults).
const keepEvery = 500 * time.Millisecond

// keepIdle refreshes, every third of their ttl, the sessions that carry no
// term of this provider: a candidate's (ready), or one whose terms ended.
// A session with a term on it is refreshed only as its terms are renewed
// (RenewMany), so a term that is not renewed ends at its ttl; and none is
// refreshed while a term whose release failed may still be on one
// (abandoned), until the sweep has released it. It runs until Close.
func (p *Provider) keepIdle(cli *clientv3.Client) {
	t := time.NewTicker(keepEvery)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		ids := p.idleDue()
		if len(ids) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.DialTimeout)
		if _, err := p.keepAlive(ctx, cli, ids); err != nil {
			p.log.Debug("keeping an idle session alive failed", "error", err)
		}
		cancel()
	}
}

// idleDue returns the sessions keepIdle should refresh now.
func (p *Provider) idleDue() []clientv3.LeaseID {
	p.smu.Lock()
	if len(p.abandoned) > 0 {
		p.smu.Unlock()
		p.startSweep()
		return nil
	}
	var ids []clientv3.LeaseID
	for _, s := range p.sessions {
		if time.Since(s.sent) >= time.Duration(s.ttl)*time.Second/3 {
			ids = append(ids, s.id)
		}
	}
	p.smu.Unlock()
	idle := ids[:0]
	for _, id := range ids {
		if !p.carriesTerm(id) {
			idle = append(idle, id)
		}
	}
	return idle
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
	if limits.CheckHeld(l) != nil {
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

// revokeSessions ends at Close every session that may still carry a key of
// this process (a term it holds, or one whose release failed), so that no
// such key outlives it. A clean stop has released them all already; the
// sessions that carry nothing are left to expire within their ttl rather
// than revoked, each a write to etcd's log just as the next leader writes
// its Acquire of a job this agent released.
func (p *Provider) revokeSessions(cli *clientv3.Client) {
	p.smu.Lock()
	all := len(p.abandoned) > 0
	ids := make([]clientv3.LeaseID, 0, len(p.sessions))
	for _, s := range p.sessions {
		ids = append(ids, s.id)
	}
	p.sessions = nil
	p.smu.Unlock()
	if !all {
		ids = slices.DeleteFunc(ids, func(id clientv3.LeaseID) bool { return !p.carriesTerm(id) })
	}
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
