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

// NotifyingProvider is the Provider of postgres and of a SQLite file: it
// also implements providers.Notifier, with one LISTEN connection (postgres)
// or one file watch (SQLite) shared by all subscribers.
type NotifyingProvider struct {
	*Provider
	l source
}

// source is where notifications come from: a listener or a fileWatch.
type source interface {
	subscribe(ctx context.Context, changed func(key string)) error
	close()
}

// Notify calls changed(key) whenever key may have changed hands, and
// changed("") when notifications may have been missed (every key may have
// changed). It returns once notifications flow, or with an error when they
// cannot (the caller polls instead) or ctx ends first.
//
// PostgreSQL: every Acquire and Release sends NOTIFY electd_<table>, '<key>';
// changed("") follows a reconnect of the listening connection; the error
// says the latest connection attempt failed.
//
// SQLite: every release is logged by a trigger in <table>_released and a
// file watch (inotify) on the database's directory reads the log when the
// database is written, so a release by any process on this host wakes the
// candidates of every other; expiries are not notified (candidates wait
// for the term's end by the database clock).
func (n *NotifyingProvider) Notify(ctx context.Context, changed func(key string)) error {
	if err := n.l.subscribe(ctx, changed); err != nil {
		return fmt.Errorf("sql: notify: %w", err)
	}
	return nil
}

// Close stops the listener and closes the connection pool.
func (n *NotifyingProvider) Close() error {
	n.l.close()
	return n.Provider.Close()
}

// listener owns the LISTEN connection; it starts with the first subscriber
// and reconnects with backoff until Close.
type listener struct {
	cfg     *pgx.ConnConfig
	channel string
	log     hclog.Logger

	startOnce sync.Once
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}

	mu        sync.Mutex
	subs      map[*func(string)]struct{}
	connected bool
	lastErr   error
	changed   chan struct{} // closed and replaced on every connect or failed connect
}

func newListener(cfg *pgx.ConnConfig, channel string, log hclog.Logger) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	return &listener{
		cfg: cfg, channel: channel, log: log.Named("listen"),
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
		subs: map[*func(string)]struct{}{}, changed: make(chan struct{}),
	}
}

func (l *listener) subscribe(ctx context.Context, fn func(string)) error {
	if l.ctx.Err() != nil {
		return errors.New("provider closed")
	}
	l.startOnce.Do(func() { go l.run() })
	sub := &fn
	l.mu.Lock()
	l.subs[sub] = struct{}{}
	l.mu.Unlock()
	unsubscribe := func() {
		l.mu.Lock()
		delete(l.subs, sub)
		l.mu.Unlock()
	}

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
			unsubscribe()
			return fmt.Errorf("listener not connected: %w", lastErr)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			unsubscribe()
			return ctx.Err()
		case <-l.ctx.Done():
			unsubscribe()
			return errors.New("provider closed")
		}
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-l.ctx.Done():
		}
		unsubscribe()
	}()
	return nil
}

// notify tells every subscriber that key may have changed hands ("": every
// key may have). Subscribers do not block.
func (l *listener) notify(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for fn := range l.subs {
		(*fn)(key)
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
				l.notify("") // notifications may have been lost while down
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
		l.notify(n.Payload)
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
