package datastore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/electd/electd/providers"
)

// record is the entity of one job: kind from the settings, key name = job
// key. Its properties are what an operator sees in the console.
type record struct {
	Holder string `datastore:"holder"`
	// Token only grows: the entity is never deleted.
	Token int64 `datastore:"token"`
	// Expires is the holder's wall clock when its last write began, plus ttl.
	Expires time.Time `datastore:"expires"`
	Value   string    `datastore:"value,noindex"`
}

func (r record) same(o record) bool {
	return r.Holder == o.Holder && r.Token == o.Token && r.Expires.Equal(o.Expires) && r.Value == o.Value
}

func (p *Provider) key(name string) *datastore.Key {
	k := datastore.NameKey(p.kind, name, nil)
	k.Namespace = p.namespace
	return k
}

// stamp rounds t as Datastore stores it (microseconds), so that the lease a
// write returns carries the expiry every later read sees.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// expired judges r on this node's wall clock. now must be read before the
// entity was: an earlier now can only make the lease look less expired.
func (p *Provider) expired(r record, now time.Time) bool {
	return !now.Before(r.Expires.Add(ClockSkew))
}

// held returns a *HeldError when r is held, unexpired, by another holder.
// Remaining is what the same judgement gives: the time until this node's
// clock reaches the written expiry + ClockSkew, when expired would say yes.
// It is measured on this node's wall clock, as expiry is judged here.
func (p *Provider) held(key string, r record, holder string, now time.Time) error {
	if r.Holder == "" || r.Holder == holder || p.expired(r, now) {
		return nil
	}
	return &providers.HeldError{Key: key, Holder: r.Holder, Token: uint64(r.Token), Expires: r.Expires,
		Remaining: r.Expires.Add(ClockSkew).Sub(now)}
}

// Acquire starts a new term on key for holder when the lease is free,
// expired (ClockSkew past its expiry, by this node's clock) or already held
// by holder.
// The new term's token is above req.Floor too.
func (p *Provider) Acquire(ctx context.Context, req providers.AcquireRequest) (providers.Lease, error) {
	key := req.Key
	l, err := p.acquire(ctx, key, req.Holder, req.TTL, req.Floor)
	return l, providers.WrapFailure("datastore", "acquire", key, err)
}

func (p *Provider) acquire(ctx context.Context, key, holder string, ttl time.Duration, floor uint64) (providers.Lease, error) {
	if err := limits.Check(key, holder, ttl); err != nil {
		return providers.Lease{}, err
	}
	k := p.key(key)
	// A plain strongly consistent read first: candidates polling a lease
	// that is held answer from it without a transaction, whose read lock
	// (with pessimistic concurrency, the default) would hold up the holder's
	// renewals. Taking the lease is decided in the transaction only.
	now := p.now()
	cur, _, err := p.get(ctx, k)
	if err != nil {
		return providers.Lease{}, err
	}
	if err := p.held(key, cur, holder, now); err != nil {
		return providers.Lease{}, err
	}

	var next record
	tried := false
	err = p.run(ctx, func(tx *datastore.Transaction) error {
		now := p.now()
		cur, _, err := getTx(tx, k)
		if err != nil {
			return err
		}
		if tried && cur.same(next) {
			// The previous run committed but its answer was lost: the
			// lease is ours already, a new write would skip a token.
			return nil
		}
		if err := p.held(key, cur, holder, now); err != nil {
			return err
		}
		next = record{Holder: holder, Token: int64(providers.NextToken(uint64(cur.Token), floor)), Expires: stamp(now.Add(ttl)), Value: cur.Value}
		if _, err := tx.Put(k, &next); err != nil {
			return err
		}
		tried = true
		return nil
	})
	if errors.Is(err, datastore.ErrConcurrentTransaction) {
		// Every run lost a race; the last winner is the answer.
		now := p.now()
		if cur, _, rerr := p.get(ctx, k); rerr == nil {
			if herr := p.held(key, cur, holder, now); herr != nil {
				return providers.Lease{}, herr
			}
		}
	}
	if err != nil {
		return providers.Lease{}, err
	}
	return providers.Lease{Key: key, Holder: holder, Token: uint64(next.Token), TTL: ttl, Expires: next.Expires, Value: next.Value}, nil
}

// Renew pushes the expiry to now + lease.TTL (this node's clock) and stores
// lease.Value when holder and token still match, expired or not.
func (p *Provider) Renew(ctx context.Context, lease providers.Lease) (providers.Lease, error) {
	l, err := p.renew(ctx, lease)
	return l, providers.WrapFailure("datastore", "renew", lease.Key, err)
}

func (p *Provider) renew(ctx context.Context, lease providers.Lease) (providers.Lease, error) {
	if err := limits.CheckRenew(lease); err != nil {
		return providers.Lease{}, err
	}
	k := p.key(lease.Key)
	var next record
	err := p.run(ctx, func(tx *datastore.Transaction) error {
		now := p.now()
		cur, found, err := getTx(tx, k)
		if err != nil {
			return err
		}
		if !found || !holds(cur, lease) {
			return lost(lease)
		}
		next = cur
		next.Expires, next.Value = stamp(now.Add(lease.TTL)), lease.Value
		_, err = tx.Put(k, &next)
		return err
	})
	if errors.Is(err, datastore.ErrConcurrentTransaction) {
		if cur, found, rerr := p.get(ctx, k); rerr == nil && (!found || !holds(cur, lease)) {
			return providers.Lease{}, lost(lease)
		}
	}
	if err != nil {
		return providers.Lease{}, err
	}
	lease.Expires = next.Expires
	return lease, nil
}

// Release clears the holder and sets the expiry to now when holder and
// token still match; the token and lease.Value stay in the entity, which is
// never deleted.
func (p *Provider) Release(ctx context.Context, lease providers.Lease) error {
	return providers.WrapFailure("datastore", "release", lease.Key, p.release(ctx, lease))
}

func (p *Provider) release(ctx context.Context, lease providers.Lease) error {
	if err := limits.CheckHeld(lease); err != nil {
		return err
	}
	k := p.key(lease.Key)
	var next record
	tried := false
	err := p.run(ctx, func(tx *datastore.Transaction) error {
		now := p.now()
		cur, found, err := getTx(tx, k)
		if err != nil {
			return err
		}
		if tried && cur.same(next) {
			return nil // the previous run's commit went through
		}
		if !found || !holds(cur, lease) {
			return lost(lease)
		}
		next = cur
		next.Holder, next.Expires, next.Value = "", stamp(now), lease.Value
		if _, err := tx.Put(k, &next); err != nil {
			return err
		}
		tried = true
		return nil
	})
	if errors.Is(err, datastore.ErrConcurrentTransaction) {
		if cur, found, rerr := p.get(ctx, k); rerr == nil && (!found || !holds(cur, lease)) {
			return lost(lease)
		}
	}
	return err
}

func holds(r record, l providers.Lease) bool {
	return l.Token <= math.MaxInt64 && r.Holder == l.Holder && r.Token == int64(l.Token)
}

func lost(l providers.Lease) error {
	return fmt.Errorf("datastore: lease %q token %d of %q: %w", l.Key, l.Token, l.Holder, providers.ErrLost)
}

// Observe returns the entity of key; Holder is "" when the lease is free or
// expired (ClockSkew past its expiry, by this node's clock).
func (p *Provider) Observe(ctx context.Context, key string) (providers.Lease, error) {
	if err := limits.CheckKey(key); err != nil {
		return providers.Lease{}, providers.Wrap("datastore", "observe", key, err)
	}
	now := p.now()
	cur, found, err := p.get(ctx, p.key(key))
	if err != nil {
		return providers.Lease{}, providers.Wrap("datastore", "observe", key, err)
	}
	l := providers.Lease{Key: key}
	if !found {
		return l, nil
	}
	l.Holder, l.Token, l.Expires, l.Value = cur.Holder, uint64(cur.Token), cur.Expires, cur.Value
	if p.expired(cur, now) {
		l.Holder = ""
	}
	return l, nil
}

// run runs f in one transaction, run again by the client library after an
// abort (a lost race), up to txAttempts times.
func (p *Provider) run(ctx context.Context, f func(tx *datastore.Transaction) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	runs := 0
	_, err := p.client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
		if runs++; runs > 1 {
			p.log.Debug("transaction runs again after a conflict", "run", runs)
		}
		return f(tx)
	}, datastore.MaxAttempts(txAttempts))
	return withCtx(ctx, err)
}

// get reads one entity outside a transaction (lookups by key are strongly
// consistent). A missing entity is a zero record, found false.
func (p *Provider) get(ctx context.Context, k *datastore.Key) (record, bool, error) {
	if err := ctx.Err(); err != nil {
		return record{}, false, err
	}
	var r record
	found, err := loaded(p.client.Get(ctx, k, &r))
	return r, found, withCtx(ctx, err)
}

func getTx(tx *datastore.Transaction, k *datastore.Key) (record, bool, error) {
	var r record
	found, err := loaded(tx.Get(k, &r))
	return r, found, err
}

func loaded(err error) (found bool, _ error) {
	var mismatch *datastore.ErrFieldMismatch
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, datastore.ErrNoSuchEntity):
		return false, nil
	case errors.As(err, &mismatch):
		// A property someone added by hand: the lease fields loaded.
		return true, nil
	}
	return false, err
}

// withCtx makes a store error caused by ctx match ctx.Err() with errors.Is:
// gRPC reports a cancelled call as a status, not as context.Canceled.
func withCtx(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ctx.Err()) ||
		errors.Is(err, providers.ErrHeld) || errors.Is(err, providers.ErrLost) {
		return err
	}
	return fmt.Errorf("%w: %w", ctx.Err(), err)
}
