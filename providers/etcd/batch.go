package etcd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/electd/electd/providers"
)

// maxTxnOps is etcd's default --max-txn-ops: the most Gets, compares or
// puts one transaction may carry. A cluster run with a lower limit answers
// "too many operations"; reads are then split in halves, writes fall back
// to single renewals.
const maxTxnOps = 128

// keysPerTxn is how many job keys one transaction covers: two Gets (or two
// compares) per key.
const keysPerTxn = maxTxnOps / 2

// readsInFlight bounds the read transactions of one batch sent at once:
// 10,000 keys take 157 of them, and one after another their round trips to
// a remote etcd would add up.
const readsInFlight = 4

var _ providers.Batcher = (*Provider)(nil)

// RenewMany renews many leases with a handful of requests, however many
// there are: the holder and token checks in transactions of up to 64 keys
// (128 Gets), one keep-alive per session the terms are on (one per ttl,
// session.go), and the changed Values written in guarded
// transactions of up to 64 keys. Each lease gets the answer Renew would
// give: the renewed lease, lost, or the error of the request that failed
// (a lease whose keep-alive etcd answered is renewed even when a later
// request fails). Leases that Renew would move to a new etcd lease (expired
// and not taken, another ttl) and those whose transaction lost a race are
// renewed by Renew itself, as are repeats of a key in one batch.
func (p *Provider) RenewMany(ctx context.Context, leases []providers.Lease) ([]providers.Lease, []error) {
	b := &batch{p: p, leases: leases, out: make([]providers.Lease, len(leases)), errs: make([]error, len(leases))}
	b.run(ctx)
	return b.out, b.errs
}

// batch is one RenewMany: every lease ends with out[i] or errs[i] set, or
// in single, for Renew to decide.
type batch struct {
	p      *Provider
	leases []providers.Lease
	out    []providers.Lease
	errs   []error
	single []int
}

// pending is a lease of the batch between the phases: its state as read,
// then etcd's answer to its keep-alive.
type pending struct {
	i   int
	st  state
	ans keptAlive
}

func (b *batch) fail(i int, err error) {
	b.errs[i] = providers.Wrap("etcd", "renew", b.leases[i].Key, b.p.explain(err))
}

func (b *batch) failAll(idx []int, err error) {
	for _, i := range idx {
		b.fail(i, err)
	}
}

// renewed reports lease i renewed, until the granted ttl after etcd's
// answer arrived, as Renew does.
func (b *batch) renewed(i int, ans keptAlive) {
	l := b.leases[i]
	l.Expires = ans.at.Add(time.Duration(ans.ttl) * time.Second)
	b.out[i] = l
}

// renewedRead reports a lease renewed by the reading path, and remembers
// its term so that the next renewal need not read it.
func (b *batch) renewedRead(a pending) {
	b.renewed(a.i, a.ans)
	b.p.remember(b.leases[a.i], a.st.hold.TTL, a.st.leaseID)
}

func (b *batch) run(ctx context.Context) {
	defer b.renewSingly(ctx)
	b.p.startSweep()
	var idx []int
	var keys []string
	seen := make(map[string]bool, len(b.leases))
	for i, l := range b.leases {
		if _, err := checkRenew(l); err != nil {
			b.fail(i, err)
			continue
		}
		if seen[l.Key] {
			// Two Gets of one key are fine, two puts in one transaction are
			// not: etcd refuses the whole transaction.
			b.single = append(b.single, i)
			continue
		}
		seen[l.Key] = true
		idx, keys = append(idx, i), append(keys, l.Key)
	}
	if len(idx) == 0 {
		return
	}
	cli, err := b.p.client(ctx)
	if err != nil {
		b.failAll(idx, err)
		b.failAll(b.single, err)
		b.single = nil
		return
	}
	if idx = b.renewAttached(ctx, cli, idx); len(idx) == 0 {
		return
	}
	keys = keys[:0]
	for _, i := range idx {
		keys = append(keys, b.leases[i].Key)
	}
	states, err := b.p.readMany(ctx, cli, keys)
	if err != nil {
		b.failAll(idx, err)
		b.failAll(b.single, err)
		b.single = nil
		return
	}
	var alive []pending
	for n, i := range idx {
		l, st := b.leases[i], states[n]
		secs, _ := checkRenew(l)
		switch {
		case st.recordRev == 0 || st.rec.Holder != l.Holder || st.rec.Token != l.Token:
			b.p.forget(l.Key)
			b.errs[i] = lost(l)
		case st.held && st.hold.TTL == secs:
			alive = append(alive, pending{i: i, st: st})
		default:
			b.single = append(b.single, i)
		}
	}
	b.keepAlive(ctx, cli, alive)
}

// keepAlive refreshes the terms' etcd leases over one stream, then writes
// the Values that changed.
func (b *batch) keepAlive(ctx context.Context, cli *clientv3.Client, alive []pending) {
	if len(alive) == 0 {
		return
	}
	// The terms share a handful of sessions (one per ttl): one keep-alive
	// each, however many terms.
	var ids []clientv3.LeaseID
	slot := map[clientv3.LeaseID]int{}
	for _, a := range alive {
		if _, ok := slot[a.st.leaseID]; !ok {
			slot[a.st.leaseID] = len(ids)
			ids = append(ids, a.st.leaseID)
		}
	}
	answers, err := b.p.keepAlive(ctx, cli, ids)
	var writes []pending
	for _, a := range alive {
		n := slot[a.st.leaseID]
		if n >= len(answers) {
			b.fail(a.i, fmt.Errorf("keep lease alive: %w", err))
			continue
		}
		a.ans = answers[n]
		switch {
		case a.ans.ttl <= 0:
			// Expired since the read: Renew re-reads, and renews the term
			// on a new etcd lease if nobody took it.
			b.single = append(b.single, a.i)
		case a.st.rec.Value != b.leases[a.i].Value:
			writes = append(writes, a)
		default:
			b.renewedRead(a)
		}
	}
	for start := 0; start < len(writes); start += keysPerTxn {
		end := min(start+keysPerTxn, len(writes))
		ok, err := b.p.writeValues(ctx, cli, b.leases, writes[start:end])
		for _, w := range writes[start:end] {
			switch {
			case err != nil && !errors.Is(err, rpctypes.ErrTooManyOps):
				b.fail(w.i, err)
			case ok:
				b.renewedRead(w)
			default:
				// A key changed since the read (or the cluster's
				// --max-txn-ops is lower): Renew retries this one alone.
				b.single = append(b.single, w.i)
			}
		}
	}
}

// renewSingly gives the leases left in single to Renew, a few at a time
// (providers.SingleWorkers): a new etcd lease to grant, a race lost. After
// a reload that changed a ttl every job of the provider takes that path
// once.
func (b *batch) renewSingly(ctx context.Context) {
	providers.ForEach(b.single, func(i int) { b.out[i], b.errs[i] = b.p.Renew(ctx, b.leases[i]) })
}

// checkRenew checks a lease as Renew does and returns its ttl in etcd
// seconds.
func checkRenew(l providers.Lease) (int64, error) {
	if err := limits.CheckHeld(l); err != nil {
		return 0, err
	}
	return leaseSeconds(l.TTL)
}

// readMany reads both keys of every key, keysPerTxn keys per transaction,
// readsInFlight transactions at a time. Keys in different transactions come
// from different revisions, which is fine: each key's decision needs only
// its own two keys to agree.
func (p *Provider) readMany(ctx context.Context, cli *clientv3.Client, keys []string) ([]state, error) {
	states := make([]state, len(keys))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, readsInFlight)
	for start := 0; start < len(keys); start += keysPerTxn {
		end := min(start+keysPerTxn, len(keys))
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			st, err := p.readChunk(ctx, cli, keys[start:end])
			if err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
				return
			}
			copy(states[start:end], st)
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return states, nil
}

func (p *Provider) readChunk(ctx context.Context, cli *clientv3.Client, keys []string) ([]state, error) {
	ops := make([]clientv3.Op, 0, 2*len(keys))
	for _, k := range keys {
		ops = append(ops, clientv3.OpGet(p.leaseKey(k)), clientv3.OpGet(p.recordKey(k)))
	}
	resp, err := cli.Txn(ctx).Then(ops...).Commit()
	if errors.Is(err, rpctypes.ErrTooManyOps) && len(keys) > 1 {
		half := len(keys) / 2
		a, err := p.readChunk(ctx, cli, keys[:half])
		if err != nil {
			return nil, err
		}
		b, err := p.readChunk(ctx, cli, keys[half:])
		if err != nil {
			return nil, err
		}
		return append(a, b...), nil
	}
	if err != nil {
		return nil, err
	}
	states := make([]state, len(keys))
	for n, k := range keys {
		if states[n], err = p.decode(k, resp.Header.Revision, resp.Responses[2*n], resp.Responses[2*n+1]); err != nil {
			return nil, err
		}
	}
	return states, nil
}

// writeValues stores the new Values of ws in one transaction guarded by
// both keys of each, as Renew does for one. ok is false when any key
// changed since it was read: nothing was written.
func (p *Provider) writeValues(ctx context.Context, cli *clientv3.Client, leases []providers.Lease, ws []pending) (ok bool, err error) {
	cmps := make([]clientv3.Cmp, 0, 2*len(ws))
	puts := make([]clientv3.Op, 0, len(ws))
	for _, w := range ws {
		l := leases[w.i]
		cmps = append(cmps, p.unchanged(l.Key, w.st)...)
		puts = append(puts, clientv3.OpPut(p.recordKey(l.Key), encode(record{Holder: l.Holder, Token: l.Token, Value: l.Value})))
	}
	resp, err := cli.Txn(ctx).If(cmps...).Then(puts...).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// keptAlive is etcd's answer to one keep-alive: the granted ttl (0 when the
// lease is gone), when the request was sent and when the answer arrived.
type keptAlive struct {
	ttl  int64
	sent time.Time
	at   time.Time
}

// keepAliveMany sends a keep-alive for every id over one LeaseKeepAlive
// stream and returns the answers in order. etcd handles a stream's requests
// one after another and answers each, so the answers come back in the order
// sent. On an error it returns the answers that arrived before it: those
// leases were refreshed. (clientv3's KeepAliveOnce opens a stream per lease;
// its KeepAlive keeps a lease alive until cancelled, which is not a single
// renewal.)
func keepAliveMany(ctx context.Context, cli *clientv3.Client, ids []clientv3.LeaseID) ([]keptAlive, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sentAt := time.Now()
	// The client's own lease client, with its retry policy and its
	// wait-for-ready, so the stream rides out a short outage as
	// KeepAliveOnce does.
	stream, err := clientv3.RetryLeaseClient(cli).LeaseKeepAlive(sctx, grpc.WaitForReady(true))
	if err != nil {
		return nil, clientv3.ContextError(ctx, err)
	}
	// Sent from a goroutine while the answers are read: with thousands of
	// requests in flight gRPC's flow control would otherwise stall both
	// ends.
	sent := make(chan error, 1)
	go func() {
		for _, id := range ids {
			if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)}); err != nil {
				sent <- err
				return
			}
		}
		sent <- stream.CloseSend()
	}()
	answers := make([]keptAlive, 0, len(ids))
	for len(answers) < len(ids) {
		resp, err := stream.Recv()
		at := time.Now()
		if err == nil && resp.ID != int64(ids[len(answers)]) {
			err = fmt.Errorf("etcd answered a keep-alive for lease %x, expected %x", resp.ID, int64(ids[len(answers)]))
		}
		if err != nil {
			cancel()
			<-sent
			return answers, clientv3.ContextError(ctx, err)
		}
		answers = append(answers, keptAlive{ttl: resp.TTL, sent: sentAt, at: at})
	}
	<-sent // every request was answered, so every send was done
	return answers, nil
}
