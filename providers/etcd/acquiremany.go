package etcd

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/providers"
)

// newTerm is a key of an AcquireMany that was free (or the caller's) when
// read: its state as read and the session its new term goes on.
type newTerm struct {
	i     int
	st    state
	id    clientv3.LeaseID
	ttl   int64
	at    time.Time
	token uint64
}

// AcquireMany tries many Acquires with a handful of requests: the keys are
// read in transactions of up to 64 keys (as RenewMany reads them), every key
// found free or the caller's goes on the session of its ttl (one keep-alive
// or grant per ttl, session.go), and the new terms are written in transactions of up to 64 keys, each guarded by
// the ModRevisions read, as Acquire guards one. Each request gets the answer
// Acquire would give: a *HeldError's Expires and Remaining come from one
// LeaseTimeToLive per holder's session (up to 16 sessions; the keys of
// others get none), whose answers also let a candidate revoke a crashed
// holder's expired session (expired.go). The keys of a
// transaction that lost a race (a key changed since the read) are acquired
// by Acquire itself, as are repeats of a key in one batch.
func (p *Provider) AcquireMany(ctx context.Context, reqs []providers.AcquireRequest) ([]providers.Lease, []error) {
	since := time.Now()
	out := make([]providers.Lease, len(reqs))
	errs := make([]error, len(reqs))
	fail := func(i int, err error) {
		errs[i] = providers.Wrap("etcd", "acquire", reqs[i].Key, p.explain(err))
	}
	var (
		idx, single []int
		keys        []string
		secs        = make([]int64, len(reqs))
		seen        = make(map[string]bool, len(reqs))
	)
	for i, r := range reqs {
		s, err := checkAcquire(r)
		if err != nil {
			fail(i, err)
			continue
		}
		secs[i] = s
		if seen[r.Key] {
			single = append(single, i) // after the batch, in order
			continue
		}
		seen[r.Key] = true
		idx, keys = append(idx, i), append(keys, r.Key)
	}
	var retry []int
	func() {
		if len(idx) == 0 {
			return
		}
		cli, err := p.client(ctx)
		if err == nil {
			for _, s := range distinct(secs, idx) {
				p.refreshAhead(ctx, cli, s, since)
			}
			// Keys the watch saw released are written without a read.
			var fidx []int
			var fstates []state
			idx, keys, fidx, fstates = p.takeFreed(reqs, idx, keys)
			retry = p.acquireFreed(ctx, cli, since, reqs, secs, fidx, fstates, out, fail)
			if len(idx) == 0 {
				return
			}
			var states []state
			if states, err = p.readMany(ctx, cli, keys); err == nil {
				retry = append(retry, p.acquireRead(ctx, cli, since, reqs, secs, idx, states, out, errs, fail)...)
				return
			}
		}
		for _, i := range idx {
			fail(i, err)
		}
	}()
	providers.Singly(retry, single, func(i int) { out[i], errs[i] = p.Acquire(ctx, reqs[i]) })
	return out, errs
}

// acquireRead decides the requests idx from their states, grants and writes
// the new terms, and returns the requests left to Acquire.
func (p *Provider) acquireRead(ctx context.Context, cli *clientv3.Client, since time.Time, reqs []providers.AcquireRequest, secs []int64, idx []int, states []state, out []providers.Lease, errs []error, fail func(int, error)) (retry []int) {
	var terms []*newTerm
	var refused []int
	for n, i := range idx {
		st := states[n]
		if st.held && st.hold.Holder != reqs[i].Holder {
			errs[i] = &providers.HeldError{Key: reqs[i].Key, Holder: st.hold.Holder, Token: st.hold.Token}
			refused = append(refused, i)
			continue
		}
		terms = append(terms, &newTerm{i: i, st: st, ttl: secs[i], token: providers.NextToken(st.rec.Token, reqs[i].Floor)})
	}
	for _, s := range distinct(secs, refused) {
		p.ready(cli, s)
	}
	retry = p.judgeHeld(ctx, cli, states, idx, refused, errs)
	// Every new term goes on the session of its ttl: one keep-alive (or
	// grant) per ttl, however many terms.
	var placed []*newTerm
	sessions := map[int64]session{}
	for _, t := range terms {
		sess, ok := sessions[t.ttl]
		if !ok {
			var err error
			if sess, err = p.session(ctx, cli, t.ttl, since); err != nil {
				fail(t.i, err)
				continue
			}
			sessions[t.ttl] = sess
		}
		t.id, t.ttl, t.at = sess.id, sess.ttl, sess.at
		placed = append(placed, t)
	}
	return append(retry, p.writePlaced(ctx, cli, reqs, secs, placed, out, fail, nil)...)
}

// heldSessionsAsked bounds the LeaseTimeToLive requests of one AcquireMany:
// one per holder's session among the keys refused.
const heldSessionsAsked = 16

// judgeHeld asks etcd how long the sessions of the refused keys have left,
// one request per session (up to heldSessionsAsked), and fills in their
// HeldErrors' Expires and Remaining as Acquire does. The same reads prove
// a crashed holder's session expired (timeLeft): its keys, revoked now,
// are returned for Acquire to take.
func (p *Provider) judgeHeld(ctx context.Context, cli *clientv3.Client, states []state, idx, refused []int, errs []error) (retry []int) {
	stateOf := make(map[int]state, len(idx))
	for n, i := range idx {
		stateOf[i] = states[n]
	}
	type verdict struct {
		left  time.Duration
		alive bool
		err   error
	}
	asked := map[clientv3.LeaseID]verdict{}
	for _, i := range refused {
		id := stateOf[i].leaseID
		v, ok := asked[id]
		if !ok {
			if len(asked) >= heldSessionsAsked {
				continue
			}
			v.left, v.alive, v.err = p.timeLeft(ctx, cli, id, true)
			asked[id] = v
		}
		var h *providers.HeldError
		switch {
		case v.err != nil || !errors.As(errs[i], &h):
		case !v.alive:
			errs[i] = nil
			retry = append(retry, i)
		default:
			h.Remaining, h.Expires = v.left, time.Now().Add(v.left)
		}
	}
	return retry
}

// writePlaced writes the placed terms, in transactions of up to 64 keys,
// and returns the requests left to Acquire. confirm, when given, is asked
// about each term written before it is answered: nil keeps it (t.ttl and
// t.at set), errRetry leaves the request to Acquire, another error fails
// it and abandons the term.
func (p *Provider) writePlaced(ctx context.Context, cli *clientv3.Client, reqs []providers.AcquireRequest, secs []int64, placed []*newTerm, out []providers.Lease, fail func(int, error), confirm func(*newTerm) error) (retry []int) {
	for start := 0; start < len(placed); start += keysPerTxn {
		chunk := placed[start:min(start+keysPerTxn, len(placed))]
		ok, err := p.writeTerms(ctx, cli, reqs, secs, chunk)
		for _, t := range chunk {
			r := reqs[t.i]
			abandoned := providers.Lease{Key: r.Key, Holder: r.Holder, Token: t.token, Value: t.st.rec.Value}
			if ok && confirm != nil {
				if cerr := confirm(t); errors.Is(cerr, errRetry) {
					retry = append(retry, t.i)
					continue
				} else if cerr != nil {
					p.abandon(abandoned)
					fail(t.i, cerr)
					continue
				}
			}
			switch {
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				// The session expired since its keep-alive: nothing was
				// written, and Acquire starts a new one.
				p.expired(t.id)
				retry = append(retry, t.i)
			case err != nil && !errors.Is(err, rpctypes.ErrTooManyOps):
				// The outcome is unknown: if the write landed, the key must
				// not stay on the session (the caller is told no).
				p.abandon(abandoned)
				fail(t.i, err)
			case ok:
				out[t.i] = providers.Lease{
					Key: r.Key, Holder: r.Holder, Token: t.token, TTL: r.TTL,
					Expires: t.at.Add(time.Duration(t.ttl) * time.Second),
					Value:   t.st.rec.Value,
				}
				p.remember(out[t.i], secs[t.i], t.id)
			default:
				// A key changed since the read (or the cluster's
				// --max-txn-ops is lower): Acquire decides this one alone.
				retry = append(retry, t.i)
			}
		}
	}
	return retry
}

// writeTerms writes the new terms ts in one transaction guarded by both
// keys of each, as Acquire does for one. ok is false when any key changed
// since it was read: nothing was written.
func (p *Provider) writeTerms(ctx context.Context, cli *clientv3.Client, reqs []providers.AcquireRequest, secs []int64, ts []*newTerm) (ok bool, err error) {
	cmps := make([]clientv3.Cmp, 0, 2*len(ts))
	puts := make([]clientv3.Op, 0, 2*len(ts))
	for _, t := range ts {
		r := reqs[t.i]
		cmps = append(cmps, p.unchanged(r.Key, t.st)...)
		puts = append(puts,
			clientv3.OpPut(p.leaseKey(r.Key), encode(holding{Holder: r.Holder, Token: t.token, TTL: secs[t.i]}), clientv3.WithLease(t.id)),
			clientv3.OpPut(p.recordKey(r.Key), encode(record{Holder: r.Holder, Token: t.token, Value: t.st.rec.Value})),
		)
	}
	resp, err := cli.Txn(ctx).If(cmps...).Then(puts...).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// ReleaseMany releases many leases with a handful of requests. The terms
// this provider wrote as they stand are released without a read, in
// transactions of up to 64 keys guarded by their records (releaseWritten).
// The others' keys are read in transactions of up to 64 keys, and the
// releases of the leases still held (holder and token as given) written in
// transactions of up to 64 keys, each guarded by the ModRevisions read, as
// Release guards one: the record keeps the token and takes the Value, the
// lease key is deleted. Each lease gets the answer Release would give; one
// that fails is tried again at the next RenewMany, as after Release. The
// keys of a transaction that lost a race are released by Release itself,
// as are repeats of a key in one batch.
func (p *Provider) ReleaseMany(ctx context.Context, leases []providers.Lease) []error {
	errs := make([]error, len(leases))
	fail := func(i int, err error) {
		p.abandon(leases[i]) // refused ones are not kept
		errs[i] = providers.Wrap("etcd", "release", leases[i].Key, p.explain(err))
	}
	hs, written := p.written(leases)
	var (
		idx, single, fast []int
		seen              = make(map[string]bool, len(leases))
	)
	for i, l := range leases {
		if err := limits.CheckHeld(l); err != nil {
			fail(i, err)
			continue
		}
		p.forget(l.Key) // whatever the outcome, the next renewal reads the keys
		switch {
		case seen[l.Key]:
			single = append(single, i)
			continue
		case written[i]:
			fast = append(fast, i)
		default:
			idx = append(idx, i)
		}
		seen[l.Key] = true
	}
	var retry []int
	func() {
		if len(idx)+len(fast) == 0 {
			return
		}
		cli, err := p.client(ctx)
		if err != nil {
			for _, i := range append(idx, fast...) {
				fail(i, err)
			}
			return
		}
		for start := 0; start < len(fast); start += keysPerTxn {
			chunk := fast[start:min(start+keysPerTxn, len(fast))]
			ls, hc := make([]providers.Lease, len(chunk)), make([]held, len(chunk))
			for n, i := range chunk {
				ls[n], hc[n] = leases[i], hs[i]
			}
			ok, err := p.releaseWritten(ctx, cli, ls, hc)
			for _, i := range chunk {
				switch {
				case ok:
					errs[i] = nil
				case err != nil && !errors.Is(err, rpctypes.ErrTooManyOps):
					fail(i, err)
				default:
					idx = append(idx, i) // a record changed: read them
				}
			}
		}
		if len(idx) == 0 {
			return
		}
		keys := make([]string, len(idx))
		for n, i := range idx {
			keys[n] = leases[i].Key
		}
		states, err := p.readMany(ctx, cli, keys)
		if err != nil {
			for _, i := range idx {
				fail(i, err)
			}
			return
		}
		var held []pending
		for n, i := range idx {
			l, st := leases[i], states[n]
			if st.recordRev == 0 || st.rec.Holder != l.Holder || st.rec.Token != l.Token {
				errs[i] = lost(l)
				continue
			}
			held = append(held, pending{i: i, st: st})
		}
		for start := 0; start < len(held); start += keysPerTxn {
			chunk := held[start:min(start+keysPerTxn, len(held))]
			cmps := make([]clientv3.Cmp, 0, 2*len(chunk))
			ops := make([]clientv3.Op, 0, 2*len(chunk))
			for _, h := range chunk {
				l := leases[h.i]
				cmps = append(cmps, p.unchanged(l.Key, h.st)...)
				ops = append(ops, clientv3.OpPut(p.recordKey(l.Key), encode(record{Token: l.Token, Value: l.Value})))
				if h.st.held {
					ops = append(ops, clientv3.OpDelete(p.leaseKey(l.Key)))
				}
			}
			resp, err := cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
			for _, h := range chunk {
				switch {
				case err != nil && !errors.Is(err, rpctypes.ErrTooManyOps):
					fail(h.i, err)
				case err == nil && resp.Succeeded:
					errs[h.i] = nil
				default:
					retry = append(retry, h.i)
				}
			}
		}
	}()
	providers.Singly(retry, single, func(i int) { errs[i] = p.Release(ctx, leases[i]) })
	return errs
}

// checkAcquire checks a request as Acquire does and returns its ttl in etcd
// seconds.
func checkAcquire(r providers.AcquireRequest) (int64, error) {
	if err := limits.CheckKey(r.Key); err != nil {
		return 0, err
	}
	if err := limits.CheckHolder(r.Holder); err != nil {
		return 0, err
	}
	return leaseSeconds(r.TTL)
}

// distinct returns the values of secs at idx, each once.
func distinct(secs []int64, idx []int) []int64 {
	var out []int64
	for _, i := range idx {
		if !slices.Contains(out, secs[i]) {
			out = append(out, secs[i])
		}
	}
	return out
}
