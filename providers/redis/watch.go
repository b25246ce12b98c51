package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/electd/electd/providers"
)

const (
	// healthEvery is how long a subscription connection may stay silent before it
	// is pinged; a second silence closes and reopens it, since a server
	// that hangs keeps its TCP connection open.
	healthEvery = 10 * time.Second

	minBackoff, maxBackoff = 100 * time.Millisecond, 5 * time.Second
)

var _ providers.Notifier = (*Provider)(nil)

// Notify calls changed(key) whenever the lease on key may have changed hands,
// for every key under the provider's prefix, through one pattern
// subscription (PSUBSCRIBE <prefix>notify:*) per server: every Acquire and
// Release publishes on its key's channel. It returns once a quorum of the
// servers confirmed the subscription (a successful Release reaches a quorum,
// so a quorum of subscribers hears it), or with an error when that cannot
// happen (servers down) or ctx ends first. A subscription lost is re-established with backoff, and changed("") is
// called once it is back, since messages may have been missed meanwhile.
//
// Expiries are not published: a candidate refused by a live term learns its
// rest from HeldError.Remaining and tries again then. (Redis keyspace
// notifications could report expiries, but they are off by default, turning
// them on is a server-wide CONFIG SET that needs administrative rights and
// costs every client of the server, and Redis sends an expired event when it
// gets round to deleting the key, which may be late.)
//
// changed is called from one goroutine at a time, never after ctx ended or
// the provider was closed, and never from an operation of the provider: a
// slow changed delays only the notifications after it. Under Redlock a
// release is heard from each server that ran it, so changed(key) may come
// more than once.
func (p *Provider) Notify(ctx context.Context, changed func(key string)) error {
	var mu sync.Mutex
	call := func(key string) {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() == nil && p.closed.Err() == nil {
			changed(key)
		}
	}
	prefix := p.channel("")
	err := p.listen(ctx, subscription{
		pattern: globEscape(prefix) + "*",
		message: func(channel string) {
			if key, ok := strings.CutPrefix(channel, prefix); ok && key != "" {
				call(key)
			}
		},
		back: func() { call("") },
	})
	if err != nil {
		return fmt.Errorf("redis: notify: %w", err)
	}
	return nil
}

// globEscape quotes the characters that are special in a Redis glob
// pattern, so that a prefix holding them matches only itself.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// subscription is the pattern one pub/sub connection per server listens
// to, and whom it tells.
type subscription struct {
	pattern string
	// message is called with the channel of every message.
	message func(channel string)
	// back is called when a subscription is confirmed again after a loss
	// (messages may have been missed meanwhile).
	back func()
}

// listen holds sub on every server until ctx ends or the provider is
// closed. It returns once a quorum of the servers confirmed the
// subscription, or an error when that cannot happen (too many servers down)
// or ctx ends first.
func (p *Provider) listen(ctx context.Context, sub subscription) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.closed.Err() != nil {
		return errors.New("provider closed")
	}
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.closed, cancel)
	ready := make(chan error, len(p.nodes))
	var wg sync.WaitGroup
	for _, n := range p.nodes {
		wg.Go(func() { p.watchNode(wctx, n, sub, ready) })
	}
	fail := func(err error) error {
		cancel()
		wg.Wait()
		stop()
		return err
	}
	var errs []error
	for subscribed := 0; subscribed < p.quorum; {
		select {
		case err := <-ready:
			if err == nil {
				subscribed++
				continue
			}
			errs = append(errs, err)
			if len(errs) > len(p.nodes)-p.quorum {
				return fail(p.storeError(ctx, "confirmed the subscription", subscribed, errs))
			}
		case <-wctx.Done():
			if err := ctx.Err(); err != nil {
				return fail(err)
			}
			return fail(errors.New("provider closed"))
		}
	}
	go func() {
		wg.Wait()
		stop()
		cancel()
	}()
	return nil
}

// watchNode keeps one subscription to n until ctx ends. It reports the
// outcome of its first attempt on ready, then resubscribes with backoff
// whenever the connection is lost.
func (p *Provider) watchNode(ctx context.Context, n *node, sub subscription, ready chan<- error) {
	reported := false
	backoff := minBackoff
	confirmed := func() {
		backoff = minBackoff
		if !reported {
			reported = true
			ready <- nil
			return
		}
		sub.back() // messages may have been published while we were away
	}
	for ctx.Err() == nil {
		err := subscribeOnce(ctx, n, sub, confirmed)
		if ctx.Err() != nil {
			return
		}
		if !reported {
			reported = true
			ready <- fmt.Errorf("%s: %w", n.addr, err)
		}
		p.log.Debug("notify subscription lost; resubscribing", "server", n.addr, "pattern", sub.pattern, "error", err, "backoff", backoff)
		select {
		case <-time.After(backoff/2 + rand.N(backoff/2+1)):
		case <-ctx.Done():
			return
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// subscribeOnce holds one PSUBSCRIBE connection until it fails or ctx
// ends.
func subscribeOnce(ctx context.Context, n *node, sub subscription, confirmed func()) error {
	ps := n.c.Subscribe(ctx)
	defer ps.Close()
	// A read blocked on a quiet connection does not watch ctx; closing the
	// connection ends it.
	defer context.AfterFunc(ctx, func() { _ = ps.Close() })()
	sctx, cancel := context.WithTimeout(ctx, dialTimeout+ioTimeout)
	err := ps.PSubscribe(sctx, sub.pattern)
	cancel()
	if err != nil {
		return err
	}
	subscribed, pinged := false, false
	for {
		wait := healthEvery
		if !subscribed {
			wait = ioTimeout
		}
		msg, err := ps.ReceiveTimeout(ctx, wait)
		if err != nil {
			var ne net.Error
			if subscribed && !pinged && errors.As(err, &ne) && ne.Timeout() {
				pinged = true
				if err := ps.Ping(ctx); err != nil {
					return err
				}
				continue
			}
			return err
		}
		pinged = false
		switch m := msg.(type) {
		case *goredis.Subscription:
			if subscribed {
				break
			}
			if m.Kind == "psubscribe" && m.Channel == sub.pattern {
				subscribed = true
				confirmed()
			}
		case *goredis.Message:
			sub.message(m.Channel)
		}
	}
}
