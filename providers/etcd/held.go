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
	p.hmu.Lock()
	defer p.hmu.Unlock()
	if p.held == nil {
		p.held = make(map[string]held)
	}
	lk := p.held[l.Key].leaseKey
	if lk == "" {
		lk = p.leaseKey(l.Key)
	}
	p.held[l.Key] = held{leaseKey: lk, token: l.Token, value: l.Value, secs: secs, id: id}
}

// forget drops key's term: released, lost, or about to be.
func (p *Provider) forget(key string) {
	p.hmu.Lock()
	defer p.hmu.Unlock()
	delete(p.held, key)
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
