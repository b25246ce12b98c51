package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

const (
	// healthEvery is how long a watch connection may stay silent before it
	// is pinged; a second silence closes and reopens it, since a server
	// that hangs keeps its TCP connection open.
	healthEvery = 10 * time.Second

	minBackoff, maxBackoff = 100 * time.Millisecond, 5 * time.Second
)

// Watch returns a channel that receives a hint whenever key may have changed
// hands: every Acquire and Release publishes on <prefix>notify:<key>. It also
// receives one after a subscription was lost and re-established, since
// messages may have been missed meanwhile; expiries are not published, so a
// candidate still polls. Each Watch holds its own SUBSCRIBE connection to
// every server and returns once a quorum of them confirmed the subscription
// (a successful Release reaches a quorum, so a quorum of subscribers hears
// it); it returns an error when that cannot happen (servers down) or ctx
// ends first. The channel is closed when ctx ends or the provider is closed.
func (p *Provider) Watch(ctx context.Context, key string) (<-chan struct{}, error) {
	if key == "" || len(key) > maxField {
		return nil, fmt.Errorf("redis: watch %q: key must be 1 to %d bytes", key, maxField)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redis: watch %q: %w", key, err)
	}
	if p.closed.Err() != nil {
		return nil, fmt.Errorf("redis: watch %q: provider closed", key)
	}
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.closed, cancel)
	out := make(chan struct{}, 1)
	hint := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	ready := make(chan error, len(p.nodes))
	var wg sync.WaitGroup
	for _, n := range p.nodes {
		wg.Go(func() { p.watchNode(wctx, n, p.channel(key), hint, ready) })
	}
	fail := func(err error) (<-chan struct{}, error) {
		cancel()
		wg.Wait()
		stop()
		return nil, fmt.Errorf("redis: watch %q: %w", key, err)
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
		close(out)
	}()
	return out, nil
}

// watchNode keeps one subscription to n until ctx ends. It reports the
// outcome of its first attempt on ready, then resubscribes with backoff
// whenever the connection is lost.
func (p *Provider) watchNode(ctx context.Context, n *node, channel string, hint func(), ready chan<- error) {
	reported := false
	backoff := minBackoff
	confirmed := func() {
		backoff = minBackoff
		if !reported {
			reported = true
			ready <- nil
			return
		}
		hint() // messages may have been published while we were away
	}
	for ctx.Err() == nil {
		err := subscribeOnce(ctx, n, channel, hint, confirmed)
		if ctx.Err() != nil {
			return
		}
		if !reported {
			reported = true
			ready <- fmt.Errorf("%s: %w", n.addr, err)
		}
		p.log.Debug("watch subscription lost; resubscribing", "server", n.addr, "channel", channel, "error", err, "backoff", backoff)
		select {
		case <-time.After(backoff/2 + rand.N(backoff/2+1)):
		case <-ctx.Done():
			return
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// subscribeOnce holds one SUBSCRIBE connection until it fails or ctx ends.
func subscribeOnce(ctx context.Context, n *node, channel string, hint, confirmed func()) error {
	ps := n.c.Subscribe(ctx)
	defer ps.Close()
	// A read blocked on a quiet connection does not watch ctx; closing the
	// connection ends it.
	defer context.AfterFunc(ctx, func() { _ = ps.Close() })()
	sctx, cancel := context.WithTimeout(ctx, dialTimeout+ioTimeout)
	err := ps.Subscribe(sctx, channel)
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
					hint()
					return err
				}
				continue
			}
			if subscribed && ctx.Err() == nil {
				hint() // messages may be missed until we are back
			}
			return err
		}
		pinged = false
		switch m := msg.(type) {
		case *goredis.Subscription:
			if m.Kind == "subscribe" && m.Channel == channel && !subscribed {
				subscribed = true
				confirmed()
			}
		case *goredis.Message:
			hint()
		}
	}
}
