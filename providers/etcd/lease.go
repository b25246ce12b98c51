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

// attempts bounds the retries of an operation whose guarded transaction
// failed because a key changed between the read and the write (an expiry, a
// racing client): each retry re-reads and decides again.
const attempts = 5

var errChanged = errors.New("lease changed hands during the operation; gave up after retries")

// Acquire starts a new term on key for holder when the lease key is absent
// (never held, released, or deleted by etcd at expiry) or names holder.
// The new term's token is above req.Floor too.
func (p *Provider) Acquire(ctx context.Context, req providers.AcquireRequest) (providers.Lease, error) {
	key := req.Key
	l, err := p.acquire(ctx, key, req.Holder, req.TTL, req.Floor)
	return l, providers.WrapFailure("etcd", "acquire", key, p.explain(err))
}

func (p *Provider) acquire(ctx context.Context, key, holder string, ttl time.Duration, floor uint64) (providers.Lease, error) {
	if err := limits.CheckKey(key); err != nil {
		return providers.Lease{}, err
	}
	if err := limits.CheckHolder(holder); err != nil {
		return providers.Lease{}, err
	}
	secs, err := leaseSeconds(ttl)
	if err != nil {
		return providers.Lease{}, err
	}
	cli, err := p.client(ctx)
	if err != nil {
		return providers.Lease{}, err
	}
	since := time.Now()
	p.refreshAhead(ctx, cli, secs, since)
	for range attempts {
		st, err := p.read(ctx, cli, key)
		if err != nil {
			return providers.Lease{}, err
		}
		if st.held && st.hold.Holder != holder {
			p.ready(cli, secs)
			left, alive, err := p.timeLeft(ctx, cli, st.leaseID, true)
			if err != nil {
				return providers.Lease{}, err
			}
			if !alive {
				// Revoked since the read, by etcd or by timeLeft, which
				// proved it expired: the key is gone.
				continue
			}
			// etcd's own measure, rounded up to the end of its second, or
			// when the next read would prove the lease expired (see
			// timeLeft): a candidate that waits it out is not back before
			// the term can end. etcd deletes the key then, and a Notify
			// subscription hears it sooner.
			return providers.Lease{}, &providers.HeldError{Key: key, Holder: st.hold.Holder, Token: st.hold.Token, Expires: time.Now().Add(left), Remaining: left}
		}
		sess, err := p.session(ctx, cli, secs, since)
		if err != nil {
			return providers.Lease{}, err
		}
		next := record{Holder: holder, Token: providers.NextToken(st.rec.Token, floor), Value: st.rec.Value}
		resp, err := cli.Txn(ctx).If(p.unchanged(key, st)...).Then(
			clientv3.OpPut(p.leaseKey(key), encode(holding{Holder: holder, Token: next.Token, TTL: secs}), clientv3.WithLease(sess.id)),
			clientv3.OpPut(p.recordKey(key), encode(next)),
		).Commit()
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			p.expired(sess.id) // the session expired since its keep-alive
			continue
		case err != nil:
			// The outcome is unknown: if the write landed, the key must
			// not stay on the session (the caller was told no).
			p.abandon(providers.Lease{Key: key, Holder: holder, Token: next.Token, Value: st.rec.Value})
			return providers.Lease{}, err
		case !resp.Succeeded:
			continue
		}
		// A returning holder's previous term was on a session of this
		// provider or on an etcd lease of an earlier process; either way
		// the key has moved off it, and it expires by itself.
		l := providers.Lease{
			Key:     key,
			Holder:  holder,
			Token:   next.Token,
			TTL:     ttl,
			Expires: sess.expires(),
			Value:   st.rec.Value,
		}
		p.remember(l, secs, sess.id)
		return l, nil
	}
	return providers.Lease{}, errChanged
}

// Renew refreshes the term's etcd lease and stores lease.Value when holder
// and token still match. A term that expired and that nobody took may be
// renewed: it gets a new etcd lease.
func (p *Provider) Renew(ctx context.Context, lease providers.Lease) (providers.Lease, error) {
	exp, err := p.renew(ctx, lease)
	if err != nil {
		return providers.Lease{}, providers.WrapFailure("etcd", "renew", lease.Key, p.explain(err))
	}
	lease.Expires = exp
	return lease, nil
}

func (p *Provider) renew(ctx context.Context, lease providers.Lease) (time.Time, error) {
	if err := limits.CheckHeld(lease); err != nil {
		return time.Time{}, err
	}
	secs, err := leaseSeconds(lease.TTL)
	if err != nil {
		return time.Time{}, err
	}
	cli, err := p.client(ctx)
	if err != nil {
		return time.Time{}, err
	}
	key := lease.Key
	rec := record{Holder: lease.Holder, Token: lease.Token, Value: lease.Value}
	since := time.Now()
	for range attempts {
		st, err := p.read(ctx, cli, key)
		if err != nil {
			return time.Time{}, err
		}
		if st.recordRev == 0 || st.rec.Holder != lease.Holder || st.rec.Token != lease.Token {
			p.forget(key)
			return time.Time{}, lost(lease)
		}
		if st.held && st.hold.TTL == secs {
			// The term's key is on a session of this provider (session.go):
			// refreshing it extends only this process's own terms.
			answers, err := p.keepAlive(ctx, cli, []clientv3.LeaseID{st.leaseID})
			if err != nil {
				return time.Time{}, fmt.Errorf("keep lease alive: %w", err)
			}
			ka := answers[0]
			if ka.ttl <= 0 {
				continue // expired since the read: the next read sees it gone
			}
			if st.rec.Value != lease.Value {
				resp, err := cli.Txn(ctx).If(p.unchanged(key, st)...).Then(clientv3.OpPut(p.recordKey(key), encode(rec))).Commit()
				if err != nil {
					return time.Time{}, err
				}
				if !resp.Succeeded {
					continue
				}
			}
			p.remember(lease, secs, st.leaseID)
			return ka.at.Add(time.Duration(ka.ttl) * time.Second), nil
		}
		// Expired and not taken, or another ttl: the term moves to the
		// session of its ttl, token unchanged. (Not abandoned when the
		// outcome is unknown: the caller still leads, and renews or
		// releases it.)
		sess, err := p.session(ctx, cli, secs, since)
		if err != nil {
			return time.Time{}, err
		}
		resp, err := cli.Txn(ctx).If(p.unchanged(key, st)...).Then(
			clientv3.OpPut(p.leaseKey(key), encode(holding{Holder: lease.Holder, Token: lease.Token, TTL: secs}), clientv3.WithLease(sess.id)),
			clientv3.OpPut(p.recordKey(key), encode(rec)),
		).Commit()
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			p.expired(sess.id)
			continue
		case err != nil:
			return time.Time{}, err
		case !resp.Succeeded:
			continue
		}
		p.remember(lease, secs, sess.id)
		return sess.expires(), nil
	}
	return time.Time{}, errChanged
}

// Release deletes the lease key and clears the holder in the record when
// holder and token still match; the token and lease.Value stay in the
// record. The session stays: the provider's other terms are on it. A
// release that fails is tried again at the next RenewMany (abandon).
func (p *Provider) Release(ctx context.Context, lease providers.Lease) error {
	err := p.release(ctx, lease)
	if err != nil && !errors.Is(err, providers.ErrLost) {
		p.abandon(lease)
		return providers.Wrap("etcd", "release", lease.Key, p.explain(err))
	}
	return err
}

func (p *Provider) release(ctx context.Context, lease providers.Lease) error {
	if err := limits.CheckHeld(lease); err != nil {
		return err
	}
	cli, err := p.client(ctx)
	if err != nil {
		return err
	}
	key := lease.Key
	hs, written := p.written([]providers.Lease{lease})
	p.forget(key) // whatever the outcome, the next renewal reads the keys
	if written[0] {
		ok, err := p.releaseWritten(ctx, cli, []providers.Lease{lease}, hs)
		if ok || (err != nil && !errors.Is(err, rpctypes.ErrTooManyOps)) {
			return err
		}
	}
	for range attempts {
		st, err := p.read(ctx, cli, key)
		if err != nil {
			return err
		}
		if st.recordRev == 0 || st.rec.Holder != lease.Holder || st.rec.Token != lease.Token {
			return lost(lease)
		}
		ops := []clientv3.Op{clientv3.OpPut(p.recordKey(key), encode(record{Token: lease.Token, Value: lease.Value}))}
		if st.held {
			ops = append(ops, clientv3.OpDelete(p.leaseKey(key)))
		}
		resp, err := cli.Txn(ctx).If(p.unchanged(key, st)...).Then(ops...).Commit()
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			continue
		}
		return nil
	}
	return errChanged
}

// Observe returns the record of key; Holder is "" when the lease key is
// absent (free, released, or expired by etcd).
func (p *Provider) Observe(ctx context.Context, key string) (providers.Lease, error) {
	l, err := p.observe(ctx, key)
	if err != nil {
		return providers.Lease{}, providers.Wrap("etcd", "observe", key, p.explain(err))
	}
	return l, nil
}

func (p *Provider) observe(ctx context.Context, key string) (providers.Lease, error) {
	if err := limits.CheckKey(key); err != nil {
		return providers.Lease{}, err
	}
	cli, err := p.client(ctx)
	if err != nil {
		return providers.Lease{}, err
	}
	st, err := p.read(ctx, cli, key)
	if err != nil {
		return providers.Lease{}, err
	}
	l := providers.Lease{Key: key, Token: st.rec.Token, Value: st.rec.Value}
	if !st.held {
		return l, nil
	}
	exp, alive, err := p.expiry(ctx, cli, st.leaseID)
	if err != nil {
		return providers.Lease{}, err
	}
	if alive {
		l.Holder, l.TTL, l.Expires = st.hold.Holder, time.Duration(st.hold.TTL)*time.Second, exp
	}
	return l, nil
}

// expiry asks etcd how long the lease has left, as an instant on this
// host's clock (see timeLeft). alive is false when the lease is gone
// (expired or revoked since the key was read).
func (p *Provider) expiry(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID) (exp time.Time, alive bool, err error) {
	left, alive, err := p.timeLeft(ctx, cli, id, false)
	return time.Now().Add(left), alive, err
}
