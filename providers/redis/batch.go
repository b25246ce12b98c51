package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/electd/electd/providers"
)

var _ providers.Batcher = (*Provider)(nil)

// batchSize bounds the scripts of one pipeline. Redis runs a pipeline's
// commands one after another, each script atomic on its own, and serves
// other clients between reads of the pipeline: 512 short scripts keep it
// busy for a few milliseconds, and 10,000 leases take 20 round trips.
const batchSize = 512

// scriptCall is one run of a script: its keys and arguments.
type scriptCall struct {
	keys []string
	args []any
}

// runMany runs s once per call on n, all in one pipeline: one round trip,
// every script atomic on its own as when run alone. A call that met a server
// without the script cached (NOSCRIPT: restarted or flushed) ran nothing, and
// is sent again with the script's text in a second pipeline; nothing else is
// ever sent twice (go-redis retries are off, see New). Each command holds its
// own reply or error; a failed connection is every command's error.
func runMany(ctx context.Context, n *node, s *goredis.Script, calls []scriptCall) []*goredis.Cmd {
	cmds := make([]*goredis.Cmd, len(calls))
	pipe := n.c.Pipeline()
	for i, c := range calls {
		cmds[i] = s.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command keeps its own error
	var again []int
	for i, c := range cmds {
		if err := c.Err(); err != nil && (errors.Is(err, goredis.ErrNoScript) || goredis.HasErrorPrefix(err, "NOSCRIPT")) {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe := n.c.Pipeline()
		for _, i := range again {
			cmds[i] = s.Eval(ctx, pipe, calls[i].keys, calls[i].args...)
		}
		_, _ = pipe.Exec(ctx)
	}
	return cmds
}

func (n *node) wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", n.addr, err)
}

// column is item j's answers, one per server, from the answers of every
// server to a batch: a server that failed as a whole gives its error.
func column[T any](rs []result[[]result[T]], j int) []result[T] {
	out := make([]result[T], len(rs))
	for i, r := range rs {
		if r.err != nil {
			out[i].err = r.err
		} else {
			out[i] = r.v[j]
		}
	}
	return out
}

// AcquireMany tries every Acquire of reqs with one pipeline of the acquire
// script per server for each 512 requests, judged as Acquire judges one:
// on one server each script's answer is final; under Redlock a request wins
// when a quorum accepted it with the same token within its validity, and
// the servers that accepted another token are released again (one pipeline
// each). Requests whose candidates split the servers go on with Acquire's
// later attempts, one by one; so do repeats of a key, after the batch.
func (p *Provider) AcquireMany(ctx context.Context, reqs []providers.AcquireRequest) ([]providers.Lease, []error) {
	out := make([]providers.Lease, len(reqs))
	// Repeats of a key go after the batch: two runs on one key in one
	// pipeline would be judged in order too, but a Redlock undo of one would
	// have to know of the other.
	errs, fail, batch, repeats := providers.SplitBatch("redis", "acquire", len(reqs), func(i int) string { return reqs[i].Key }, func(i int) error {
		return limits.Check(reqs[i].Key, reqs[i].Holder, reqs[i].TTL)
	})
	type retry struct {
		i        int
		minToken uint64
	}
	var retries []retry
	providers.Chunks(batch, batchSize, func(chunk []int) {
		if err := ctx.Err(); err != nil {
			providers.FailAll(chunk, err, fail)
			return
		}
		ttl := reqs[chunk[0]].TTL
		for _, i := range chunk {
			ttl = min(ttl, reqs[i].TTL)
		}
		start := time.Now()
		rs := each(ctx, p, nodeTimeout(ttl), func(ctx context.Context, n *node) ([]result[record], error) {
			return p.nodeAcquireMany(ctx, n, reqs, chunk, start.UnixMicro()), nil
		}, func(s int, rs []result[record]) {
			// A server that answered after the caller gave up.
			undo := make([][]undoItem, len(p.nodes))
			for j, r := range rs {
				if r.err == nil && r.v.ok {
					undo[s] = append(undo[s], undoItem{reqs[chunk[j]].Key, reqs[chunk[j]].Holder, r.v.token, r.v.prior, 0})
				}
			}
			p.undoMany(ctx, undo)
		}, nil)
		elapsed := time.Since(start)
		undo := make([][]undoItem, len(p.nodes))
		for j, i := range chunk {
			r := reqs[i]
			col := column(rs, j)
			v := p.judgeAcquire(ctx, r.Key, r.Holder, r.TTL, col, r.TTL-elapsed-drift(r.TTL))
			for s, c := range col {
				if c.err == nil && c.v.ok && c.v.token != v.keep {
					undo[s] = append(undo[s], undoItem{r.Key, r.Holder, c.v.token, c.v.prior, v.keep})
				}
			}
			switch {
			case v.keep != 0:
				out[i] = v.lease
				p.announce(r.Key)
			case v.err != nil:
				fail(i, v.err)
			default:
				retries = append(retries, retry{i, v.maxToken + 1})
			}
		}
		p.undoMany(ctx, undo)
	})
	providers.ForEachN(len(retries), providers.SingleWorkers, func(k int) {
		i, r := retries[k].i, reqs[retries[k].i]
		l, err := p.acquireFrom(ctx, r.Key, r.Holder, r.TTL, 2, max(retries[k].minToken, r.Floor+1))
		if err != nil {
			fail(i, err)
			return
		}
		out[i] = l
	})
	for _, i := range repeats {
		out[i], errs[i] = p.Acquire(ctx, reqs[i])
	}
	return out, errs
}

// nodeAcquireMany runs the acquire script on n for reqs at idx, an attempt
// made at stamp (microseconds, the caller's clock).
func (p *Provider) nodeAcquireMany(ctx context.Context, n *node, reqs []providers.AcquireRequest, idx []int, stamp int64) []result[record] {
	calls := make([]scriptCall, len(idx))
	for j, i := range idx {
		r := reqs[i]
		calls[j] = scriptCall{
			keys: []string{p.stateKey(r.Key), p.liveKey(r.Key)},
			args: []any{r.Holder, r.TTL.Milliseconds(), floorArg(r.Floor), p.channel(r.Key), p.publishWins(), stamp},
		}
	}
	out := make([]result[record], len(idx))
	for j, c := range runMany(ctx, n, acquireScript, calls) {
		res, err := c.Slice()
		if err == nil {
			out[j].v, err = parseRecord(res)
		}
		out[j].err = n.wrap(err)
	}
	return out
}

// undoItem is a term won on one server by a Redlock Acquire that failed, or
// with another token than the quorum's.
type undoItem struct {
	key, holder  string
	token, prior uint64 // prior: the server's counter before the attempt
	keep         uint64 // the token of the term the Acquire won, or 0
}

// undoMany runs undoScript for undo[i] on p.nodes[i], one pipeline per
// server. It runs even when ctx is done.
func (p *Provider) undoMany(ctx context.Context, undo [][]undoItem) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ioTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for s, items := range undo {
		if len(items) == 0 {
			continue
		}
		n := p.nodes[s]
		wg.Go(func() {
			calls := make([]scriptCall, len(items))
			for j, u := range items {
				calls[j] = scriptCall{
					keys: []string{p.stateKey(u.key), p.liveKey(u.key)},
					args: []any{u.holder, strconv.FormatUint(u.token, 10), strconv.FormatUint(u.prior, 10), strconv.FormatUint(u.keep, 10)},
				}
			}
			for j, c := range runMany(ctx, n, undoScript, calls) {
				if err := c.Err(); err != nil {
					p.log.Warn("could not undo a partial acquire; it expires with its ttl",
						"key", items[j].key, "server", n.addr, "token", items[j].token, "error", err)
				}
			}
		})
	}
	wg.Wait()
}

// RenewMany renews leases with one pipeline of the renew script per server
// for each 512 leases, each judged as Renew judges one (under Redlock: a
// quorum within the validity). Repeats of a key are renewed by Renew after
// the batch.
func (p *Provider) RenewMany(ctx context.Context, leases []providers.Lease) ([]providers.Lease, []error) {
	out := make([]providers.Lease, len(leases))
	errs, fail, batch, repeats := providers.SplitBatch("redis", "renew", len(leases), func(i int) string { return leases[i].Key }, func(i int) error { return limits.CheckRenew(leases[i]) })
	providers.Chunks(batch, batchSize, func(chunk []int) {
		if err := ctx.Err(); err != nil {
			providers.FailAll(chunk, err, fail)
			return
		}
		ttl := leases[chunk[0]].TTL
		for _, i := range chunk {
			ttl = min(ttl, leases[i].TTL)
		}
		stamp := time.Now().UnixNano()
		start := time.Now()
		rs := each(ctx, p, nodeTimeout(ttl), func(ctx context.Context, n *node) ([]result[renewed], error) {
			calls := make([]scriptCall, len(chunk))
			for j, i := range chunk {
				l := leases[i]
				calls[j] = scriptCall{
					keys: []string{p.stateKey(l.Key), p.liveKey(l.Key)},
					args: []any{l.Holder, strconv.FormatUint(l.Token, 10), l.TTL.Milliseconds(), l.Value, stamp},
				}
			}
			out := make([]result[renewed], len(chunk))
			for j, c := range runMany(ctx, n, renewScript, calls) {
				res, err := c.Int64Slice()
				if err == nil && len(res) != 2 {
					err = fmt.Errorf("renew script replied %v", res)
				}
				if err == nil {
					out[j].v = renewed{ok: res[0] == 1, exp: time.UnixMilli(res[1])}
				}
				out[j].err = n.wrap(err)
			}
			return out, nil
		}, nil, func(rs []result[[]result[renewed]], answered []bool) bool {
			return everyQuorum(p, rs, answered, func(r renewed) bool { return r.ok })
		})
		elapsed := time.Since(start)
		for j, i := range chunk {
			l := leases[i]
			out[i], errs[i] = p.judgeRenew(ctx, l, column(rs, j), l.TTL-elapsed-drift(l.TTL))
		}
	})
	for _, i := range repeats {
		out[i], errs[i] = p.Renew(ctx, leases[i])
	}
	return out, errs
}

// ReleaseMany releases leases with one pipeline of the release script per
// server for each 512 leases, each judged as Release judges one (under
// Redlock: a quorum). Every release publishes on its key's channel as
// Release does. Repeats of a key are released by Release after the batch.
func (p *Provider) ReleaseMany(ctx context.Context, leases []providers.Lease) []error {
	errs, fail, batch, repeats := providers.SplitBatch("redis", "release", len(leases), func(i int) string { return leases[i].Key }, func(i int) error { return limits.CheckHeld(leases[i]) })
	providers.Chunks(batch, batchSize, func(chunk []int) {
		if err := ctx.Err(); err != nil {
			providers.FailAll(chunk, err, fail)
			return
		}
		ttl := ioTimeout
		for _, i := range chunk {
			if t := leases[i].TTL; t > 0 {
				ttl = min(ttl, t)
			}
		}
		stamp := time.Now().UnixNano()
		rs := each(ctx, p, nodeTimeout(ttl), func(ctx context.Context, n *node) ([]result[bool], error) {
			calls := make([]scriptCall, len(chunk))
			for j, i := range chunk {
				l := leases[i]
				calls[j] = scriptCall{
					keys: []string{p.stateKey(l.Key), p.liveKey(l.Key)},
					args: []any{l.Holder, strconv.FormatUint(l.Token, 10), l.Value, stamp, p.channel(l.Key)},
				}
			}
			out := make([]result[bool], len(chunk))
			for j, c := range runMany(ctx, n, releaseScript, calls) {
				res, err := c.Int64()
				out[j] = result[bool]{res == 1, n.wrap(err)}
			}
			return out, nil
		}, nil, func(rs []result[[]result[bool]], answered []bool) bool {
			return everyQuorum(p, rs, answered, func(ok bool) bool { return ok })
		})
		for j, i := range chunk {
			errs[i] = p.judgeRelease(ctx, leases[i], column(rs, j))
		}
	})
	for _, i := range repeats {
		errs[i] = p.Release(ctx, leases[i])
	}
	return errs
}

// everyQuorum is each's decided function for a batch: every request of it
// has a quorum of servers that answered it with ok.
func everyQuorum[T any](p *Provider, rs []result[[]result[T]], answered []bool, ok func(T) bool) bool {
	n := -1 // requests in the batch
	for s := range rs {
		if answered[s] && rs[s].err == nil {
			n = len(rs[s].v)
			break
		}
	}
	for j := 0; j < n; j++ {
		c := 0
		for s := range rs {
			if answered[s] && rs[s].err == nil && j < len(rs[s].v) && rs[s].v[j].err == nil && ok(rs[s].v[j].v) {
				c++
			}
		}
		if c < p.quorum {
			return false
		}
	}
	return n >= 0
}
