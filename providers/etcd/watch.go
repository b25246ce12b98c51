package etcd

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// rewatchPause spaces out new watches after one failed (compaction, no
// leader), so a broken cluster is not hammered.
const rewatchPause = 250 * time.Millisecond

// Watch notifies on every change of key's lease key: acquire, release, and
// the delete etcd makes when the term's lease expires. The watch starts at
// the revision of a read made before Watch returns, so a release right after
// Watch returns is never missed, and Watch fails (within dial_timeout) when
// etcd is unreachable instead of returning a channel that never fires.
// While etcd is unreachable later on the client keeps retrying, and resumes
// from the last revision seen; a watch that etcd ends (compacted revision,
// member without a leader) is restarted and sends a hint, since changes may
// have been missed.
func (p *Provider) Watch(ctx context.Context, key string) (<-chan struct{}, error) {
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("etcd: watch %q: %w", key, err)
	}
	cli, err := p.client(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd: watch %q: %w", key, err)
	}
	rev, err := p.revision(ctx, cli, key)
	if err != nil {
		return nil, fmt.Errorf("etcd: watch %q: %w", key, p.explain(err))
	}
	out := make(chan struct{}, 1)
	go p.watch(ctx, cli, key, rev+1, out)
	return out, nil
}

// revision reads the store revision, bounded by dial_timeout: a watch's ctx
// lives as long as the candidate waits, far longer than a read should.
func (p *Provider) revision(ctx context.Context, cli *clientv3.Client, key string) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	resp, err := cli.Get(rctx, p.leaseKey(key), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

func (p *Provider) watch(ctx context.Context, cli *clientv3.Client, key string, from int64, out chan<- struct{}) {
	defer close(out)
	notify := func() {
		select {
		case out <- struct{}{}:
		default: // a hint is already pending
		}
	}
	// Without a leader etcd would keep the watch open and silent; with
	// WithRequireLeader it ends it, and the loop below starts a new one.
	wctx := clientv3.WithRequireLeader(ctx)
	for {
		wch := cli.Watch(wctx, p.leaseKey(key), clientv3.WithRev(from))
		for resp := range wch {
			if err := resp.Err(); err != nil {
				p.log.Debug("watch ended", "key", key, "error", err)
				break
			}
			if resp.Header.Revision >= from {
				from = resp.Header.Revision + 1
			}
			if len(resp.Events) > 0 {
				notify()
			}
		}
		if ctx.Err() != nil || p.isClosed() {
			return
		}
		notify()
		select {
		case <-ctx.Done():
			return
		case <-time.After(rewatchPause):
		}
		rev, err := p.revision(ctx, cli, key)
		if err != nil {
			continue // etcd unreachable: try again after the pause
		}
		from = rev + 1
	}
}
