package nats

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/electd/electd/providers"
)

var _ providers.Notifier = (*Provider)(nil)

// watch is one Notify subscription.
type watch struct {
	ctx     context.Context
	kv      jetstream.KeyValue
	changed func(key string)
	// reset asks for a new key-value watch: the connection was made
	// again, and the old watch's consumer may be gone with the server.
	reset chan struct{}
	// last is the holder and token each key was last seen with.
	last map[string]term
}

type term struct {
	holder string
	token  uint64
}

// Notify watches every lease key of the bucket with one ordered consumer
// (a key-value watch, new writes only) and calls changed(key) when a key's
// holder or token changes: an acquire, a release, a takeover. Renewals,
// which change neither, are not passed on, so waiting candidates do not ask
// the store on each of them. After every reconnection the watch is made
// again and changed("") called. An expiry writes nothing, so it is not
// notified: a candidate tries again when the HeldError's Remaining has
// passed.
func (p *Provider) Notify(ctx context.Context, changed func(key string)) error {
	kv, err := p.store(ctx)
	if err != nil {
		return fmt.Errorf("nats: notify: %w", err)
	}
	// The watch lives until ctx is done or the provider is closed.
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.closed, cancel)
	w := &watch{ctx: wctx, kv: kv, changed: changed, reset: make(chan struct{}, 1), last: map[string]term{}}
	kw, stopWatch, err := w.open()
	if err != nil {
		stop()
		cancel()
		return fmt.Errorf("nats: notify: watch bucket %q: %w", p.bucket, p.explain(err))
	}
	p.mu.Lock()
	p.watches[w] = struct{}{}
	p.mu.Unlock()
	go func() {
		defer func() {
			p.mu.Lock()
			delete(p.watches, w)
			p.mu.Unlock()
			stop()
			cancel()
		}()
		w.run(kw, stopWatch, p)
	}()
	return nil
}

// open makes a key-value watch that lives until w.ctx ends or stop is
// called. The client ties the subscription's life to the context it was made
// with, so its setup is bounded by a timer rather than a deadline.
func (w *watch) open() (kw jetstream.KeyWatcher, stop func(), err error) {
	ctx, cancel := context.WithCancel(w.ctx)
	timer := time.AfterFunc(opTimeout, cancel)
	kw, err = w.kv.Watch(ctx, leasePrefix+"*", jetstream.UpdatesOnly())
	if !timer.Stop() && err == nil {
		err = context.DeadlineExceeded
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return kw, func() { _ = kw.Stop(); cancel() }, nil
}

// run passes the watch's updates on until its context ends, making the
// watch again after each reconnection.
func (w *watch) run(kw jetstream.KeyWatcher, stop func(), p *Provider) {
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	updates := kw.Updates()
	var retry <-chan time.Time
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.reset:
			if stop != nil {
				stop()
				stop, updates = nil, nil
			}
			retry = time.After(0)
		case <-retry:
			retry = nil
			var err error
			if kw, stop, err = w.open(); err != nil {
				p.log.Debug("watch again after reconnecting", "error", err)
				retry = time.After(reconnectWait)
				continue
			}
			updates = kw.Updates()
			w.notify("") // whatever happened while the watch was down
		case e, ok := <-updates:
			if !ok {
				// The subscription ended with the connection; the
				// reconnection asks for a new one.
				updates = nil
				continue
			}
			if e != nil {
				w.update(e)
			}
		}
	}
}

func (w *watch) update(e jetstream.KeyValueEntry) {
	key, ok := leaseKey(e.Key())
	if !ok {
		return
	}
	var rec record
	if e.Operation() == jetstream.KeyValuePut && json.Unmarshal(e.Value(), &rec) == nil {
		t := term{rec.Holder, rec.Token}
		if prev, seen := w.last[key]; seen && prev == t {
			return // a renewal
		}
		w.last[key] = t
	} else {
		delete(w.last, key) // deleted or purged by hand
	}
	w.notify(key)
}

func (w *watch) notify(key string) {
	if w.ctx.Err() == nil {
		w.changed(key)
	}
}
