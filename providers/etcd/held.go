package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/providers"
)

// held is what this provider last wrote for a term it holds: enough for
// RenewMany to renew the term without reading its keys (renewAttached).
type held struct {
	leaseKey string           // prefix + key, kept so renewals allocate none
	token    uint64           // the term's token
	value    string           // the record's Value as this provider wrote it
	secs     int64            // the ttl asked for, in etcd seconds
	id       clientv3.LeaseID // the session the lease key was put on
}

// remember records a term this provider wrote: acquired, renewed after a
// read, or moved to a session.
func (p *Provider) remember(l providers.Lease, secs int64, id clientv3.LeaseID) {
	// An Acquire whose write had an unknown outcome was abandoned, to be
	// released by a sweep. A term won on the key since is the key's now: its
	// token is the abandoned one's when that write did not land (the retry
	// read the same record), and the sweep would release this live term.
	p.smu.Lock()
	if a, ok := p.abandoned[l.Key]; ok && a.Holder == l.Holder && a.Token <= l.Token {
		delete(p.abandoned, l.Key)
	}
	p.smu.Unlock()
	p.hmu.Lock()
	defer p.hmu.Unlock()
	if p.held == nil {
		p.held = make(map[string]held)
		p.terms = make(map[clientv3.LeaseID]int)
	}
	was, ok := p.held[l.Key]
	lk := was.leaseKey
	if ok {
		p.untrack(was.id)
	} else {
		lk = p.leaseKey(l.Key)
	}
	p.held[l.Key] = held{leaseKey: lk, token: l.Token, value: l.Value, secs: secs, id: id}
	p.terms[id]++
}

// forget drops key's term: released, lost, or about to be.
func (p *Provider) forget(key string) {
	p.hmu.Lock()
	defer p.hmu.Unlock()
	if h, ok := p.held[key]; ok {
		delete(p.held, key)
		p.untrack(h.id)
	}
}

// untrack counts one term less on session id; hmu is held.
func (p *Provider) untrack(id clientv3.LeaseID) {
	if p.terms[id]--; p.terms[id] <= 0 {
		delete(p.terms, id)
	}
}

// carriesTerm reports whether a term this provider holds is on session id.
func (p *Provider) carriesTerm(id clientv3.LeaseID) bool {
	p.hmu.Lock()
	defer p.hmu.Unlock()
	return p.terms[id] > 0
}

// renewAttached renews, without reading a key, the leases of idx whose term
// this provider wrote as they stand (same token, Value and ttl): one
// LeaseTimeToLive with the attached keys per session, then one keep-alive
// per session. A lease key attached to a live session of this provider
// names this provider's term: another holder could only have taken the job
// after the key was gone, and only this provider writes keys on its
// sessions; the record's holder and token change only with the lease key.
// That is the check Renew makes by reading both keys, made by etcd's lessor
// instead of 128 Gets per 64 jobs. The leases it cannot vouch for (not
// remembered, another Value or ttl, a key no longer attached, a session
// gone) are returned for the reading path.
func (b *batch) renewAttached(ctx context.Context, cli *clientv3.Client, idx []int) (rest []int) {
	type member struct {
		i  int
		lk string
	}
	groups := map[clientv3.LeaseID][]member{}
	b.p.hmu.Lock()
	for _, i := range idx {
		l := b.leases[i]
		h, ok := b.p.held[l.Key]
		secs, _ := checkRenew(l)
		if !ok || h.token != l.Token || h.value != l.Value || h.secs != secs {
			rest = append(rest, i)
			continue
		}
		groups[h.id] = append(groups[h.id], member{i: i, lk: h.leaseKey})
	}
	b.p.hmu.Unlock()
	if len(groups) == 0 {
		return rest
	}
	var ids []clientv3.LeaseID
	var vouched [][]int
	for id, ms := range groups {
		resp, err := cli.TimeToLive(ctx, id, clientv3.WithAttachedKeys())
		if err != nil {
			for _, m := range ms {
				b.fail(m.i, fmt.Errorf("lease time to live: %w", err))
			}
			continue
		}
		if resp.TTL <= 0 {
			b.p.expired(id)
			for _, m := range ms {
				rest = append(rest, m.i)
			}
			continue
		}
		// Looked up by the remembered strings: a map index with
		// string(k) allocates nothing.
		at := make(map[string]int, len(ms))
		for n, m := range ms {
			at[m.lk] = n
		}
		found := make([]bool, len(ms))
		for _, k := range resp.Keys {
			if n, ok := at[string(k)]; ok {
				found[n] = true
			}
		}
		var ok []int
		for n, m := range ms {
			if found[n] {
				ok = append(ok, m.i)
			} else {
				rest = append(rest, m.i)
			}
		}
		if len(ok) > 0 {
			ids, vouched = append(ids, id), append(vouched, ok)
		}
	}
	if len(ids) == 0 {
		return rest
	}
	answers, err := b.p.keepAlive(ctx, cli, ids)
	for n, is := range vouched {
		for _, i := range is {
			switch {
			case n >= len(answers):
				b.fail(i, fmt.Errorf("keep lease alive: %w", err))
			case answers[n].ttl <= 0:
				rest = append(rest, i) // expired since: the reading path decides
			default:
				b.renewed(i, answers[n])
			}
		}
	}
	return rest
}

// written returns, for each lease, what this provider last wrote for its
// term, when that is the term given (same key and token).
func (p *Provider) written(leases []providers.Lease) (hs []held, ok []bool) {
	hs, ok = make([]held, len(leases)), make([]bool, len(leases))
	p.hmu.Lock()
	defer p.hmu.Unlock()
	for i, l := range leases {
		h, found := p.held[l.Key]
		if found && h.token == l.Token {
			hs[i], ok[i] = h, true
		}
	}
	return hs, ok
}

// releaseWritten releases, with one transaction and no read, leases whose
// terms this provider wrote (hs, from written): each record must still be
// the one it wrote, byte for byte. The record names holder and token, and
// it changes whenever the lease key does (every write puts both), so while
// it stands the lease key is this term's or gone (expired), and deleting
// it is the release. ok is false when any record changed: nothing was
// written, and the caller releases them by reading, as Release does.
func (p *Provider) releaseWritten(ctx context.Context, cli *clientv3.Client, leases []providers.Lease, hs []held) (ok bool, err error) {
	cmps := make([]clientv3.Cmp, 0, len(leases))
	ops := make([]clientv3.Op, 0, 2*len(leases))
	for n, l := range leases {
		rk := p.recordKey(l.Key)
		was := encode(record{Holder: l.Holder, Token: l.Token, Value: hs[n].value})
		cmps = append(cmps, clientv3.Compare(clientv3.Value(rk), "=", was))
		ops = append(ops, clientv3.OpPut(rk, encode(record{Token: l.Token, Value: l.Value})), clientv3.OpDelete(hs[n].leaseKey))
	}
	resp, err := cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}
