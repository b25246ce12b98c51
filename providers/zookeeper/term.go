package zookeeper

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"
)

// term is a term this provider started or renewed, kept so that it ends at
// its ttl even while this process lives.
//
// ZooKeeper ends a session, and so deletes its ephemeral holder znodes, only
// when it has heard nothing from the client for the session timeout. The
// client pings the server by itself (every third of the timeout), so a live
// agent keeps its sessions forever, whether or not it renews. The lease
// contract wants a term to end one ttl after its last Acquire or Renew was
// sent: the provider keeps a timer per term and deletes the holder znode
// when it fires (lapse). The timer runs on this process's monotonic clock,
// the clock the agent's own step-down rule runs on, and fires at the sent
// time + ttl, after the agent's deadline of sent + ttl × 0.99.
//
// When the process cannot run the timer (it crashed, is frozen, or is cut
// off from ZooKeeper), the server ends the term instead: its session stops
// being renewed and expires one session timeout (≥ ttl) after the server
// last heard from it, which is after the term's last Renew arrived.
type term struct {
	holder      string
	token       uint64
	session     *session
	keyVersion  int32 // root/<key>'s version after the write
	holdVersion int32 // root/<key>/holder's version after the write
	deadline    time.Time
	timer       *time.Timer
}

// track keeps t as the current term of key, replacing an earlier one, and
// arms its lapse.
func (p *Provider) track(key string, t *term) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.terms[key]; ok {
		old.timer.Stop()
	}
	if p.closed {
		return
	}
	t.timer = time.AfterFunc(time.Until(t.deadline), func() { p.lapse(key, t) })
	p.terms[key] = t
}

// forget drops the term of key with token (released, or found lost).
func (p *Provider) forget(key string, token uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.terms[key]; ok && t.token == token {
		t.timer.Stop()
		delete(p.terms, key)
	}
}

// lapse ends t at its deadline: it deletes the holder znode if nothing was
// written to the key since t's last write (a guarded multi-op), and leaves
// the record as an expiry leaves it (holder and token kept: the holder may
// still renew while nobody took the lease). It gives up when the term is
// not the key's current one any more, or when the znodes changed (another
// term, or ZooKeeper deleted the holder znode with its expired session).
func (p *Provider) lapse(key string, t *term) {
	for try := 0; ; try++ {
		p.mu.Lock()
		current := p.terms[key] == t && !p.closed
		p.mu.Unlock()
		if !current {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := multi(ctx, t.session,
			&zk.CheckVersionRequest{Path: p.keyPath(key), Version: t.keyVersion},
			&zk.DeleteRequest{Path: p.holderPath(key), Version: t.holdVersion},
		)
		cancel()
		if err == nil || conflict(err) || errors.Is(err, zk.ErrNoAuth) || try >= 20 {
			if err != nil && !conflict(err) {
				p.log.Warn("could not end a lapsed term; its session's expiry will", "key", key, "holder", t.holder, "token", t.token, "error", err)
			}
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	p.mu.Lock()
	if p.terms[key] == t {
		delete(p.terms, key)
	}
	p.mu.Unlock()
}

// undo releases a term that an Acquire may have started though its caller
// was told it failed (ctx ended, or the connection broke before the
// answer): if the key is still as that Acquire left it, the holder znode is
// deleted and the holder cleared, token and value kept, as Release does.
func (p *Provider) undo(s *session, key string, next record, keyVersion int32) {
	for try := 0; try < 20 && !p.isClosed(); try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := multi(ctx, s,
			&zk.SetDataRequest{Path: p.keyPath(key), Data: encode(record{Token: next.Token, Value: next.Value}), Version: keyVersion},
			&zk.DeleteRequest{Path: p.holderPath(key), Version: 0},
		)
		cancel()
		if err == nil || conflict(err) || errors.Is(err, zk.ErrNoAuth) {
			if err == nil {
				p.log.Debug("released a term whose Acquire was abandoned", "key", key, "token", next.Token)
			}
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}
