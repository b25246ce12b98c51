package zookeeper

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/electd/electd/providers"
)

// attempts bounds the retries of an operation whose multi-op failed because
// a znode changed between the read and the write (an expiry, a racing
// client): each retry reads again and decides again.
const attempts = 5

// Acquire starts a new term on key for holder when the holder znode is
// absent (never held, released, or deleted by ZooKeeper when its session
// expired) or names holder.
// The new term's token is above req.Floor too.
func (p *Provider) Acquire(ctx context.Context, req providers.AcquireRequest) (providers.Lease, error) {
	key := req.Key
	l, err := p.acquire(ctx, key, req.Holder, req.TTL, req.Floor)
	return l, providers.WrapFailure("zookeeper", "acquire", key, err)
}

func (p *Provider) acquire(ctx context.Context, key, holder string, ttl time.Duration, floor uint64) (providers.Lease, error) {
	if err := limits.CheckKey(key); err != nil {
		return providers.Lease{}, err
	}
	if err := limits.CheckHolder(holder); err != nil {
		return providers.Lease{}, err
	}
	s, err := p.session(ctx, ttl, true)
	if err != nil {
		return providers.Lease{}, err
	}
	defer p.hangGuard(ctx, s)()
	if err := p.ensureRoot(ctx, s, false); err != nil {
		return providers.Lease{}, err
	}
	ms, _ := sessionMs(ttl)
	for range attempts {
		st, err := p.read(ctx, s, key)
		if err != nil {
			return providers.Lease{}, err
		}
		if st.held && st.hold.Holder != holder {
			return providers.Lease{}, &providers.HeldError{
				Key: key, Holder: st.hold.Holder, Token: st.hold.Token,
				// The server's time of the holder's last Acquire or
				// Renew, plus its ttl: the term ends no earlier (see
				// doc.go). ZooKeeper cannot say how long a session has
				// left, so there is no Remaining: a candidate hears of the
				// end through Notify, or polls.
				Expires: time.UnixMilli(st.hold0.Mtime).Add(st.hold.ttl()),
			}
		}
		next := record{Holder: holder, Token: providers.NextToken(st.rec.Token, floor), Value: st.rec.Value}
		var ops []any
		keyVersion := int32(0)
		if st.exists {
			ops = append(ops, &zk.SetDataRequest{Path: p.keyPath(key), Data: encode(next), Version: st.recStat.Version})
			keyVersion = st.recStat.Version + 1
		} else {
			ops = append(ops, &zk.CreateRequest{Path: p.keyPath(key), Data: encode(next), Acl: p.acl, Flags: zk.FlagPersistent})
		}
		if st.held {
			// The holder's own earlier term: it ends with this one's start.
			ops = append(ops, &zk.DeleteRequest{Path: p.holderPath(key), Version: st.hold0.Version})
		}
		ops = append(ops, &zk.CreateRequest{
			Path: p.holderPath(key), Acl: p.acl, Flags: zk.FlagEphemeral,
			Data: encode(holding{Holder: holder, Token: next.Token, TTLms: ms.Milliseconds()}),
		})
		sent := time.Now()
		ch := send(s, ops...)
		var r multiResult
		select {
		case r = <-ch:
		case <-ctx.Done():
			// The transaction may still commit. Nobody was told of that
			// term, so it is released as soon as it is known to have begun.
			go func() {
				if r := <-ch; r.err == nil {
					p.undo(s, key, next, keyVersion)
				}
			}()
			return providers.Lease{}, ctx.Err()
		}
		switch {
		case errors.Is(r.err, zk.ErrNoNode) && !st.exists:
			// root itself is gone (deleted by hand): create it again.
			if err := p.ensureRoot(ctx, s, true); err != nil {
				return providers.Lease{}, err
			}
			continue
		case conflict(r.err):
			continue
		case r.err != nil:
			if !errors.Is(r.err, zk.ErrNoAuth) {
				// The outcome is unknown (the connection broke): undo the
				// term should it have begun.
				go p.undo(s, key, next, keyVersion)
			}
			return providers.Lease{}, explain(r.err)
		}
		p.track(key, &term{
			holder: holder, token: next.Token, session: s,
			keyVersion: keyVersion, holdVersion: 0, deadline: sent.Add(ttl),
		})
		return providers.Lease{Key: key, Holder: holder, Token: next.Token, TTL: ttl, Expires: sent.Add(ttl), Value: next.Value}, nil
	}
	return providers.Lease{}, errChanged
}

// Renew keeps the term of lease when holder and token still match: it
// rewrites the holder znode (in the session of lease.TTL) and stores
// lease.Value, in one multi-op guarded by the versions read. A term whose
// holder znode is gone (its session expired) or lives in another session
// (another ttl) while nobody took the lease is moved into this session,
// token unchanged.
func (p *Provider) Renew(ctx context.Context, lease providers.Lease) (providers.Lease, error) {
	exp, err := p.renew(ctx, lease)
	if err != nil {
		return providers.Lease{}, providers.WrapFailure("zookeeper", "renew", lease.Key, err)
	}
	lease.Expires = exp
	return lease, nil
}

func (p *Provider) renew(ctx context.Context, lease providers.Lease) (time.Time, error) {
	if err := limits.CheckHeld(lease); err != nil {
		return time.Time{}, err
	}
	s, err := p.session(ctx, lease.TTL, true)
	if err != nil {
		return time.Time{}, err
	}
	defer p.hangGuard(ctx, s)()
	ms, _ := sessionMs(lease.TTL)
	key := lease.Key
	confirmed := false
	for range attempts {
		st, err := p.read(ctx, s, key)
		if err != nil {
			return time.Time{}, err
		}
		if !st.exists || st.rec.Holder != lease.Holder || st.rec.Token != lease.Token {
			if confirmed {
				return time.Time{}, lost(lease)
			}
			// The server this session reads from may lag the ensemble's
			// leader by a moment: catch it up before answering "lost".
			if err := p.sync(ctx, s, key); err != nil {
				return time.Time{}, err
			}
			confirmed = true
			continue
		}
		rec := record{Holder: lease.Holder, Token: lease.Token, Value: lease.Value}
		hold := holding{Holder: lease.Holder, Token: lease.Token, TTLms: ms.Milliseconds()}
		sid := s.conn.SessionID()
		var ops []any
		t := &term{holder: lease.Holder, token: lease.Token, session: s}
		if st.held && st.hold0.EphemeralOwner == sid && st.hold.TTLms == hold.TTLms {
			// The usual case: the term's znode lives in this session.
			// Rewriting it proves the session alive on the server now and
			// gives observers the server's time of the renewal (mtime).
			if st.rec.Value != lease.Value {
				ops = append(ops, &zk.SetDataRequest{Path: p.keyPath(key), Data: encode(rec), Version: st.recStat.Version})
				t.keyVersion = st.recStat.Version + 1
			} else {
				ops = append(ops, &zk.CheckVersionRequest{Path: p.keyPath(key), Version: st.recStat.Version})
				t.keyVersion = st.recStat.Version
			}
			ops = append(ops, &zk.SetDataRequest{Path: p.holderPath(key), Data: encode(hold), Version: st.hold0.Version})
			t.holdVersion = st.hold0.Version + 1
		} else {
			// Expired and not taken, or in another session: a new holder
			// znode in this session. The record is rewritten too, so that
			// every new holder znode changes the record's version, which
			// guards every other write.
			ops = append(ops, &zk.SetDataRequest{Path: p.keyPath(key), Data: encode(rec), Version: st.recStat.Version})
			t.keyVersion = st.recStat.Version + 1
			if st.held {
				ops = append(ops, &zk.DeleteRequest{Path: p.holderPath(key), Version: st.hold0.Version})
			}
			ops = append(ops, &zk.CreateRequest{Path: p.holderPath(key), Data: encode(hold), Acl: p.acl, Flags: zk.FlagEphemeral})
		}
		sent := time.Now()
		_, err = multi(ctx, s, ops...)
		switch {
		case conflict(err):
			continue
		case err != nil:
			return time.Time{}, explain(err)
		}
		t.deadline = sent.Add(lease.TTL)
		p.track(key, t)
		return t.deadline, nil
	}
	return time.Time{}, errChanged
}

// Release deletes the holder znode and clears the holder in the record when
// holder and token still match; the token and lease.Value stay in the
// record.
func (p *Provider) Release(ctx context.Context, lease providers.Lease) error {
	return providers.WrapFailure("zookeeper", "release", lease.Key, p.release(ctx, lease))
}

func (p *Provider) release(ctx context.Context, lease providers.Lease) error {
	if err := limits.CheckHeld(lease); err != nil {
		return err
	}
	s, err := p.anySession(ctx, lease.TTL)
	if err != nil {
		return err
	}
	defer p.hangGuard(ctx, s)()
	key := lease.Key
	confirmed := false
	for range attempts {
		st, err := p.read(ctx, s, key)
		if err != nil {
			return err
		}
		if !st.exists || st.rec.Holder != lease.Holder || st.rec.Token != lease.Token {
			if confirmed {
				p.forget(key, lease.Token)
				return lost(lease)
			}
			if err := p.sync(ctx, s, key); err != nil {
				return err
			}
			confirmed = true
			continue
		}
		ops := []any{&zk.SetDataRequest{Path: p.keyPath(key), Data: encode(record{Token: lease.Token, Value: lease.Value}), Version: st.recStat.Version}}
		if st.held {
			ops = append(ops, &zk.DeleteRequest{Path: p.holderPath(key), Version: st.hold0.Version})
		}
		_, err = multi(ctx, s, ops...)
		switch {
		case conflict(err):
			continue
		case err != nil:
			return explain(err)
		}
		p.forget(key, lease.Token)
		return nil
	}
	return errChanged
}

// Observe returns the record of key; Holder is "" when the holder znode is
// absent (free, released, or expired).
func (p *Provider) Observe(ctx context.Context, key string) (providers.Lease, error) {
	l, err := p.observe(ctx, key)
	if err != nil {
		return providers.Lease{}, providers.Wrap("zookeeper", "observe", key, err)
	}
	return l, nil
}

func (p *Provider) observe(ctx context.Context, key string) (providers.Lease, error) {
	if err := limits.CheckKey(key); err != nil {
		return providers.Lease{}, err
	}
	s, err := p.anySession(ctx, 0)
	if err != nil {
		return providers.Lease{}, err
	}
	defer p.hangGuard(ctx, s)()
	st, err := p.read(ctx, s, key)
	if err != nil {
		return providers.Lease{}, err
	}
	l := providers.Lease{Key: key, Token: st.rec.Token, Value: st.rec.Value}
	if st.held {
		l.Holder, l.TTL = st.hold.Holder, st.hold.ttl()
		l.Expires = time.UnixMilli(st.hold0.Mtime).Add(l.TTL)
	}
	return l, nil
}

// sync makes the server this session reads from catch up with the leader
// of the ensemble, so that the next read sees every committed write.
func (p *Provider) sync(ctx context.Context, s *session, key string) error {
	err := do(ctx, func() error { _, err := s.conn.Sync(p.keyPath(key)); return err })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return explain(err)
	}
	return nil
}
