package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/electd/electd/providers"
)

var _ providers.Notifier = (*Provider)(nil)

// armWorkers bounds the watches set at once when many keys are (re)armed.
const armWorkers = 16

// Notify calls changed(key) whenever a key's holder znode is created or
// deleted (an Acquire, a Release, a lapse, and the deletion ZooKeeper makes
// when a holder's session expires), and changed("") after the session was
// disconnected or replaced, when notifications may have been missed.
//
// The client (go-zookeeper/zk v1.0.4) has no persistent recursive watches
// (ZooKeeper 3.6's AddWatch), so it uses one-shot child watches: one on root
// (a new key) and one on each key (its holder child comes or goes). A
// renewal rewrites the holder znode's data, which child watches do not see:
// only changes of hands are notified. A fired watch is set again before
// changed is called, so a change between the two is seen by the caller's
// read. The watches live in a session of their own, opened here and closed
// when ctx ends.
func (p *Provider) Notify(ctx context.Context, changed func(key string)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.isClosed() {
		return errors.New("zookeeper: notify: provider is closed")
	}
	w := &watcher{p: p, changed: changed, ctx: ctx, wake: make(chan struct{}, 1), known: map[string]bool{}}
	w.s = p.newSession(defaultSession)
	conn, _, err := zk.Connect(p.servers, defaultSession,
		zk.WithDialer(w.s.dial),
		zk.WithEventCallback(w.event),
		zk.WithLogger(zkLogger{p.log}),
		zk.WithLogInfo(false),
	)
	if err != nil {
		return fmt.Errorf("zookeeper: notify: connect: %w", err)
	}
	w.s.conn = conn
	if err := w.start(); err != nil {
		conn.Close()
		return fmt.Errorf("zookeeper: notify: %w", err)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		conn.Close()
		return errors.New("zookeeper: notify: provider is closed")
	}
	p.watchers[w] = struct{}{}
	p.mu.Unlock()
	go w.run()
	return nil
}

// watcher is one Notify subscription.
type watcher struct {
	p       *Provider
	s       *session
	changed func(string)
	ctx     context.Context

	mu      sync.Mutex
	pending []zk.Event // events from the client's receive loop, in order
	wake    chan struct{}

	known     map[string]bool // keys watched; only run touches it after start
	sessionID int64           // of the session the watches were set in
	stopOnce  sync.Once
}

// event is the client's callback: it runs on the client's receive loop, so
// it queues the event for run and returns.
func (w *watcher) event(ev zk.Event) {
	w.s.event(ev)
	w.mu.Lock()
	w.pending = append(w.pending, ev)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// start waits for the session and sets the watches on root and every key.
func (w *watcher) start() error {
	ctx, cancel := context.WithTimeout(w.ctx, w.p.connectTimeout)
	defer cancel()
	if err := w.p.waitSession(ctx, w.s); err != nil {
		return err
	}
	if err := w.p.ensureRoot(ctx, w.s, false); err != nil {
		return err
	}
	w.sessionID = w.s.conn.SessionID()
	_, err := w.armAll(ctx)
	return err
}

// armAll sets the watch on root and on every key under it, and returns the
// keys it had not watched before.
func (w *watcher) armAll(ctx context.Context) ([]string, error) {
	var keys []string
	err := do(ctx, func() error {
		var err error
		keys, _, _, err = w.s.conn.ChildrenW(w.p.root)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", w.p.root, explain(err))
	}
	var fresh []string
	for _, k := range keys {
		if !w.known[k] {
			fresh = append(fresh, k)
		}
	}
	if err := w.arm(ctx, keys); err != nil {
		return nil, err
	}
	return fresh, nil
}

// arm sets the child watch of each key, a few at a time.
func (w *watcher) arm(ctx context.Context, keys []string) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, armWorkers)
	)
	for _, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := do(ctx, func() error {
				_, _, _, err := w.s.conn.ChildrenW(w.p.keyPath(k))
				return err
			})
			if errors.Is(err, zk.ErrNoNode) {
				err = nil // deleted by hand since root was listed
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = fmt.Errorf("watch %s: %w", w.p.keyPath(k), explain(err))
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	for _, k := range keys {
		w.known[k] = true
	}
	return nil
}

// run turns the queued events into calls of changed until ctx ends.
func (w *watcher) run() {
	defer w.stop()
	missed := false // the session was disconnected: "" is due once it is back
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.wake:
		}
		w.mu.Lock()
		evs := w.pending
		w.pending = nil
		w.mu.Unlock()
		for _, ev := range evs {
			if w.ctx.Err() != nil {
				return
			}
			switch {
			case ev.Type == zk.EventSession && ev.State == zk.StateDisconnected:
				missed = true
			case ev.Type == zk.EventSession && ev.State == zk.StateHasSession:
				if missed || w.s.conn.SessionID() != w.sessionID {
					missed = !w.resume()
				}
			case ev.Type == zk.EventNodeChildrenChanged && ev.Path == w.p.root:
				w.newKeys()
			case ev.Type == zk.EventNodeChildrenChanged || ev.Type == zk.EventNodeDeleted:
				if key := w.p.keyOf(ev.Path); key != "" {
					w.rearm(key)
				}
			}
		}
	}
}

// resume follows a reconnection. In the same session the client has set
// the watches again itself (and the server fires those whose znodes changed
// meanwhile), but a watch that failed to be set while the connection was
// down is not among them; in a new session (the old one expired) every
// watch is gone. So every watch is set again (ZooKeeper keeps one per znode
// and connection), then changed("") says that a change may have gone
// unseen. It reports whether the watches are in place.
func (w *watcher) resume() bool {
	ctx, cancel := context.WithTimeout(w.ctx, w.p.connectTimeout)
	defer cancel()
	id := w.s.conn.SessionID()
	if id != w.sessionID {
		w.known = map[string]bool{}
	}
	_, err := w.armAll(ctx)
	if err != nil {
		w.p.log.Debug("notify: setting watches again failed; retried on the next reconnection", "error", err)
	} else {
		w.sessionID = id
	}
	w.call("")
	return err == nil
}

// newKeys follows a change of root's children: the new keys are watched,
// and announced (a new key is a first Acquire).
func (w *watcher) newKeys() {
	ctx, cancel := context.WithTimeout(w.ctx, w.p.connectTimeout)
	defer cancel()
	fresh, err := w.armAll(ctx)
	if err != nil {
		w.p.log.Debug("notify: watching new keys failed", "error", err)
		w.call("")
		return
	}
	for _, k := range fresh {
		w.call(k)
	}
}

// rearm sets the fired watch of key again, then announces key: a change
// after the watch is set fires it, and one before is seen by the caller.
func (w *watcher) rearm(key string) {
	ctx, cancel := context.WithTimeout(w.ctx, w.p.connectTimeout)
	defer cancel()
	if err := w.arm(ctx, []string{key}); err != nil {
		w.p.log.Debug("notify: setting a watch again failed", "key", key, "error", err)
	}
	w.call(key)
}

func (w *watcher) call(key string) {
	if w.ctx.Err() == nil {
		w.changed(key)
	}
}

// stop closes the subscription's session, which removes its watches.
func (w *watcher) stop() {
	w.stopOnce.Do(func() {
		w.s.conn.Close()
		w.p.mu.Lock()
		delete(w.p.watchers, w)
		w.p.mu.Unlock()
	})
}
