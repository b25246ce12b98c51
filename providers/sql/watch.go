package sql

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
)

// NotifyingProvider is the postgres Provider: it also implements
// providers.Watcher with one LISTEN connection shared by all watchers.
type NotifyingProvider struct {
	*Provider
	l *listener
}

// Watch returns a channel that receives a hint whenever key may have changed
// hands (every Acquire and Release sends NOTIFY electd_<table>, '<key>'), and
// after the listening connection was re-established (notifications may have
// been missed meanwhile). It returns once the shared listener is listening;
// it returns an error when the listener's latest connection attempt failed
// (the store is down: the caller polls instead) or ctx ends first.
func (n *NotifyingProvider) Watch(ctx context.Context, key string) (<-chan struct{}, error) {
	ch, err := n.l.watch(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("sql: watch %q: %w", key, err)
	}
	return ch, nil
}

// Close stops the listener and closes the connection pool.
func (n *NotifyingProvider) Close() error {
	n.l.close()
	return n.Provider.Close()
}

// listener owns the LISTEN connection; it starts with the first Watch and
// reconnects with backoff until Close.
type listener struct {
	cfg     *pgx.ConnConfig
	channel string
	log     hclog.Logger

	startOnce sync.Once
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}

	mu        sync.Mutex
	subs      map[string]map[chan struct{}]struct{}
	connected bool
	lastErr   error
	changed   chan struct{} // closed and replaced on every connect or failed connect
}

func newListener(cfg *pgx.ConnConfig, channel string, log hclog.Logger) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	return &listener{
		cfg: cfg, channel: channel, log: log.Named("listen"),
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
		subs: map[string]map[chan struct{}]struct{}{}, changed: make(chan struct{}),
	}
}

func (l *listener) watch(ctx context.Context, key string) (<-chan struct{}, error) {
	if l.ctx.Err() != nil {
		return nil, errors.New("provider closed")
	}
	l.startOnce.Do(func() { go l.run() })
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	if l.subs[key] == nil {
		l.subs[key] = map[chan struct{}]struct{}{}
	}
	l.subs[key][ch] = struct{}{}
	l.mu.Unlock()

	// Wait for a verdict on the connection: listening, or the latest
	// attempt failed.
	for {
		l.mu.Lock()
		connected, lastErr, changed := l.connected, l.lastErr, l.changed
		l.mu.Unlock()
		if connected {
			break
		}
		if lastErr != nil {
			l.unsubscribe(key, ch)
			return nil, fmt.Errorf("listener not connected: %w", lastErr)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			l.unsubscribe(key, ch)
			return nil, ctx.Err()
		case <-l.ctx.Done():
			l.unsubscribe(key, ch)
			return nil, errors.New("provider closed")
		}
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-l.ctx.Done():
		}
		l.unsubscribe(key, ch)
	}()
	return ch, nil
}

// unsubscribe removes and closes ch; sends happen under the same lock, so
// nothing is sent on a closed channel.
func (l *listener) unsubscribe(key string, ch chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.subs[key][ch]; !ok {
		return
	}
	delete(l.subs[key], ch)
	if len(l.subs[key]) == 0 {
		delete(l.subs, key)
	}
	close(ch)
}

// notify sends a hint, without blocking, to the watchers of key, or of every
// key when all is true.
func (l *listener) notify(key string, all bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, set := range l.subs {
		if !all && k != key {
			continue
		}
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

func (l *listener) setState(connected bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.connected, l.lastErr = connected, err
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *listener) run() {
	defer close(l.done)
	const minBackoff, maxBackoff = 100 * time.Millisecond, 5 * time.Second
	backoff := minBackoff
	everConnected := false
	for l.ctx.Err() == nil {
		conn, err := l.connect()
		if err == nil {
			if everConnected {
				l.notify("", true) // notifications may have been lost while down
			}
			everConnected = true
			backoff = minBackoff
			l.setState(true, nil)
			l.log.Debug("listening", "channel", l.channel)
			err = l.receive(conn)
			closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(closeCtx)
			cancel()
		}
		if l.ctx.Err() != nil {
			return
		}
		l.setState(false, err)
		l.log.Warn("listen connection failed; reconnecting", "error", err, "backoff", backoff)
		select {
		case <-time.After(backoff/2 + rand.N(backoff/2+1)):
		case <-l.ctx.Done():
			return
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

func (l *listener) connect() (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(l.ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, l.cfg.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

func (l *listener) receive(conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(l.ctx)
		if err != nil {
			return err
		}
		l.notify(n.Payload, false)
	}
}

func (l *listener) close() {
	l.cancel()
	started := true
	l.startOnce.Do(func() { started = false })
	if started {
		<-l.done
	}
}
