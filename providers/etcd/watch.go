package etcd

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/providers"
)

// rewatchPause spaces out new watches after one failed (compaction, no
// leader), so a broken cluster is not hammered.
const rewatchPause = 250 * time.Millisecond

// revision reads the store revision, bounded by dial_timeout: a watch's ctx
// lives as long as the agent listens, far longer than a read should.
func (p *Provider) revision(ctx context.Context, cli *clientv3.Client) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	resp, err := cli.Get(rctx, p.prefix, clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

var _ providers.Notifier = (*Provider)(nil)

// Notify calls changed(key) whenever the lease key of a job key changes:
// acquire (put), release, and the delete etcd makes when a term's lease
// expires, for every key under the provider's prefix, through one etcd
// watch on the prefix. The watch starts at the revision of a read made
// before Notify returns (so a release right after is never missed), and
// Notify fails (within dial_timeout) when etcd is unreachable instead of
// returning a subscription that never fires.
// The client resumes a watch whose connection broke from the last revision
// it saw, so nothing is missed then; a watch that etcd ends (compacted
// revision, member without a leader) is started again from the current
// revision, and changed("") is called, since changes may have been missed.
// Writes of a record alone (a Renew storing a new Value) are not reported:
// they change no hands.
//
// changed is called from one goroutine, in the order of etcd's revisions,
// and never after ctx ended; it runs on the watch's own goroutine, so a
// slow changed delays later notifications, never an operation.
func (p *Provider) Notify(ctx context.Context, changed func(key string)) error {
	cli, err := p.client(ctx)
	if err != nil {
		return fmt.Errorf("etcd: notify: %w", err)
	}
	rev, err := p.revision(ctx, cli)
	if err != nil {
		return fmt.Errorf("etcd: notify: %w", p.explain(err))
	}
	go p.notify(ctx, cli, rev+1, changed)
	return nil
}

func (p *Provider) notify(ctx context.Context, cli *clientv3.Client, from int64, changed func(key string)) {
	call := func(key string) {
		if ctx.Err() == nil && !p.isClosed() {
			changed(key)
		}
	}
	wctx := clientv3.WithRequireLeader(ctx)
	for {
		wch := cli.Watch(wctx, p.prefix, clientv3.WithPrefix(), clientv3.WithRev(from))
		for resp := range wch {
			if err := resp.Err(); err != nil {
				p.log.Debug("notify watch ended", "error", err)
				break
			}
			if resp.Header.Revision >= from {
				from = resp.Header.Revision + 1
			}
			p.sawEvents(resp.Events)
			for _, ev := range resp.Events {
				if key, ok := p.jobKey(string(ev.Kv.Key)); ok {
					call(key)
				}
			}
		}
		p.forgetFreed()
		if ctx.Err() != nil || p.isClosed() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(rewatchPause):
		}
		rev, err := p.revision(ctx, cli)
		if err != nil {
			continue // etcd unreachable: try again after the pause
		}
		from = rev + 1
		call("") // changes between the end of the old watch and now are lost
	}
}

// jobKey returns the job key whose lease key is name, or false when name is
// not a lease key under the prefix (a record, another prefix's key).
func (p *Provider) jobKey(name string) (string, bool) {
	key, ok := strings.CutPrefix(name, p.prefix)
	if !ok || key == "" || strings.Contains(key, "/") {
		return "", false
	}
	return key, true
}
