package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/electd/electd/providers"
)

// acquireAttempts bounds the retries of a Redlock Acquire whose candidates
// split the servers between them (nobody reached a quorum). One server
// never splits: its first answer is final.
const acquireAttempts = 8

type result[T any] struct {
	v   T
	err error
}

// each calls fn on every server at once, each call bounded by timeout. It
// returns when every server answered, when decided (if not nil) says the
// answers so far settle the outcome (a quorum renewed, say), or when ctx is
// done, whichever is first: one server that hangs (lost silently, its
// packets dropped) then costs nothing while a quorum answers. The calls
// still running are left to finish on their own, within timeout and
// whatever becomes of ctx, and late, when not nil, is given each of their
// successful results. An answer not waited for is an error.
func each[T any](ctx context.Context, p *Provider, timeout time.Duration, fn func(context.Context, *node) (T, error), late func(i int, v T), decided func(rs []result[T], answered []bool) bool) []result[T] {
	type done struct {
		i int
		r result[T]
	}
	ch := make(chan done, len(p.nodes))
	for i, n := range p.nodes {
		go func() {
			nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
			defer cancel()
			v, err := fn(nctx, n)
			if err != nil {
				err = fmt.Errorf("%s: %w", n.addr, err)
			}
			ch <- done{i, result[T]{v, err}}
		}()
	}
	out := make([]result[T], len(p.nodes))
	answered := make([]bool, len(p.nodes))
	leave := func(why error) []result[T] {
		pending := 0
		for i := range out {
			if !answered[i] {
				out[i].err = fmt.Errorf("%s: %w", p.nodes[i].addr, why)
				pending++
			}
		}
		if late != nil && pending > 0 {
			go func() {
				for range pending {
					if d := <-ch; d.r.err == nil {
						late(d.i, d.r.v)
					}
				}
			}()
		}
		return out
	}
	for n := 1; n <= len(p.nodes); n++ {
		select {
		case d := <-ch:
			out[d.i], answered[d.i] = d.r, true
			if n < len(p.nodes) && decided != nil && decided(out, answered) {
				return leave(errNotAwaited)
			}
		case <-ctx.Done():
			return leave(ctx.Err())
		}
	}
	return out
}

// errNotAwaited is the answer of a server that was still to answer when a
// quorum had settled the outcome.
var errNotAwaited = errors.New("not waited for: a quorum had answered")

// quorumOf is a decided function for each: a quorum answered with ok.
func quorumOf[T any](p *Provider, ok func(T) bool) func([]result[T], []bool) bool {
	return func(rs []result[T], answered []bool) bool {
		n := 0
		for i, r := range rs {
			if answered[i] && r.err == nil && ok(r.v) {
				n++
			}
		}
		return n >= p.quorum
	}
}

// storeError says how many servers did what, with every server's failure;
// the caller's ctx error comes first so that errors.Is(err,
// context.Canceled) holds for a cancelled call.
func (p *Provider) storeError(ctx context.Context, what string, answered int, errs []error) error {
	var failed error = errors.New("no server answered")
	if len(errs) > 0 {
		failed = serverErrors(errs)
		if len(errs) == 1 {
			failed = errs[0]
		}
	}
	if err := ctx.Err(); err != nil {
		if len(errs) == 0 {
			return err
		}
		return fmt.Errorf("%w (%v)", err, failed)
	}
	if len(p.nodes) == 1 {
		return failed
	}
	return fmt.Errorf("%d of %d servers %s, a quorum is %d: %w", answered, len(p.nodes), what, p.quorum, failed)
}

// serverErrors is the failures of the servers that did not answer, each
// naming its server, on one line.
type serverErrors []error

func (e serverErrors) Error() string {
	s := make([]string, len(e))
	for i, err := range e {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

func (e serverErrors) Unwrap() []error { return e }

// quorumExpiry is when fewer than a quorum of the given server expiries
// are still ahead: the q-th latest.
func (p *Provider) quorumExpiry(exps []time.Time) time.Time {
	slices.SortFunc(exps, func(a, b time.Time) int { return b.Compare(a) })
	return exps[p.quorum-1]
}

// Acquire starts a new term on key for holder when the lease is free,
// expired (by the servers' clocks) or already held by holder.
// The new term's token is above req.Floor too.
func (p *Provider) Acquire(ctx context.Context, req providers.AcquireRequest) (providers.Lease, error) {
	l, err := p.acquire(ctx, req.Key, req.Holder, req.TTL, req.Floor)
	return l, providers.WrapFailure("redis", "acquire", req.Key, err)
}

func (p *Provider) acquire(ctx context.Context, key, holder string, ttl time.Duration, floor uint64) (providers.Lease, error) {
	if err := limits.Check(key, holder, ttl); err != nil {
		return providers.Lease{}, err
	}
	// The first attempt lets every server increment its own counter (up to
	// the floor): when the servers agree, as they do unless a term missed
	// one, that is one round trip. A retry asks for one more than the
	// highest counter seen.
	var minToken uint64
	if floor > 0 {
		minToken = floor + 1
	}
	return p.acquireFrom(ctx, key, holder, ttl, 1, minToken)
}

// floorArg is the acquire script's minimum token for a caller's floor.
func floorArg(floor uint64) string {
	if floor == 0 {
		return "0"
	}
	return strconv.FormatUint(floor+1, 10)
}

// acquireFrom runs the attempts of an Acquire from the given one on, the
// first asking every server for at least minToken (AcquireMany made the
// first attempt of a batch itself).
func (p *Provider) acquireFrom(ctx context.Context, key, holder string, ttl time.Duration, attempt int, minToken uint64) (providers.Lease, error) {
	var (
		unsure *providers.HeldError // the last attempt's, to confirm
		took   time.Duration        // by the last attempt
	)
	for ; ; attempt++ {
		if attempt > 1 {
			// Redlock: retry after a random delay so that racing
			// candidates stop splitting the servers. Attempts that waited
			// for a server that does not answer all took as long, and
			// would go out together again: the delay is then spread
			// over half that long.
			backoff := max(min(5*time.Millisecond<<(attempt-1), 100*time.Millisecond), took/2)
			select {
			case <-time.After(rand.N(backoff)):
			case <-ctx.Done():
				return providers.Lease{}, ctx.Err()
			}
		}
		if err := ctx.Err(); err != nil {
			return providers.Lease{}, err
		}
		start := time.Now()
		var keep atomic.Uint64
		judged := make(chan struct{})
		rs := each(ctx, p, nodeTimeout(ttl), func(ctx context.Context, n *node) (record, error) {
			return p.nodeAcquire(ctx, n, key, holder, ttl, minToken, start.UnixMicro())
		}, func(i int, r record) {
			// A server that answered after the attempt was judged: undone
			// unless it joined the term won.
			<-judged
			p.undo(ctx, key, holder, []result[record]{{v: r}}, []*node{p.nodes[i]}, keep.Load())
		}, p.settled)
		took = time.Since(start)
		v := p.judgeAcquire(ctx, key, holder, ttl, rs, ttl-took-drift(ttl))
		keep.Store(v.keep)
		close(judged)
		p.undo(ctx, key, holder, rs, p.nodes, v.keep)
		switch {
		case v.keep != 0:
			p.announce(key)
			return v.lease, nil
		case v.err != nil:
			return providers.Lease{}, v.err
		case v.unsure != nil && (attempt >= acquireAttempts || sameTerm(v.unsure, unsure)):
			return providers.Lease{}, v.unsure
		case attempt >= acquireAttempts:
			return providers.Lease{}, fmt.Errorf("no candidate reached a quorum of %d servers in %d attempts (candidates split the servers, or a server is down and the others disagree); the last attempt: %s", p.quorum, attempt, p.answers(rs))
		}
		minToken, unsure = v.maxToken+1, v.unsure
	}
}

// settled is each's decided function for an Acquire attempt: the answers
// so far decide it, whatever the servers still to answer say. That holds
// when a quorum won a token that weigh keeps and the quorum's servers were
// in step: each had a term, one below the token. A server still to answer
// could then have seen no later term (a quorum shares a server with every
// term's). Servers out of step (a server restarted empty, or the caller's
// floor raised them) wait for every server: the one still to answer may be
// the one that kept the latest term. A refusal waits for every server too:
// the Remaining it reports is read from all of them.
func (p *Provider) settled(rs []result[record], answered []bool) bool {
	w := p.weigh(rs, answered)
	return w.token != 0 && w.inStep
}

// weighed is what the answers to an Acquire attempt say of the term a
// quorum won (weigh).
type weighed struct {
	// token is the highest token a quorum won, when the attempt may keep
	// it; 0 when no quorum won one, or it is not kept (behind, ahead).
	token uint64
	// behind is a token a quorum won that is below the counter a server
	// it won had before the attempt: servers restarted empty agreed on a
	// token that another server has passed.
	behind, counter uint64
	// ahead is a live term of another holder on the servers that refused,
	// which the quorum's servers never saw (see weigh).
	ahead []record
	// inStep: every server of the quorum had a term before, one below the
	// token.
	inStep bool
}

// weigh judges the answers of an Acquire attempt so far (answered[i]: rs[i]
// is in). The term is the highest token a quorum agrees on. Every token of
// an attempt is above the counter its server had, and a quorum shares a
// server with every earlier term's quorum, so the term's token is above
// every earlier term's while the servers keep their data. Servers restarted
// empty break that, and the token is not kept in two cases:
//
//   - It is below the counter another server won by the attempt had
//     before it (behind): a quorum of empty servers agrees on a token far
//     below that of a server that kept its data. The next attempt asks every
//     server for more than that counter, which brings the servers that are
//     behind up to it (the repair). A server won counts with its counter
//     before the attempt, at most its new token less one: a server won late
//     in a race, after another candidate let it go, hands out one more than
//     the quorum's token, and undoing the quorum for that made the race's
//     rightful winner give way to nobody.
//   - A server refused with a live term that has renewed there (it wrote
//     its value: a rival's attempt never does), whose token is more than one
//     above the counter every server of the quorum had (ahead): those
//     servers never saw that term. They restarted empty, or missed it, and
//     it may be live on a quorum that includes servers that did not answer;
//     overruling it would give its token, or one below it, to a second
//     holder, or end a term that its holder's next renewal would repair (the
//     servers behind join it). The attempt reports that term as held
//     instead. A rival's attempt in the same race, whatever its token (a
//     retry asks for more than the counters it saw), is not a term: the
//     rival undoes it.
func (p *Provider) weigh(rs []result[record], answered []bool) weighed {
	var w weighed
	won := map[uint64]int{}
	for i, r := range rs {
		if !answered[i] || r.err != nil || !r.v.ok {
			continue
		}
		won[r.v.token]++
		w.counter = max(w.counter, r.v.token-1) // what it was before this attempt, at most
	}
	for t, n := range won {
		if n >= p.quorum && t > w.token {
			w.token = t
		}
	}
	if w.token == 0 {
		return w
	}
	if w.token < w.counter {
		w.behind, w.token = w.token, 0
		return w
	}
	var prior uint64 // the highest counter a server of the quorum had
	w.inStep = w.token > 1
	for i, r := range rs {
		if answered[i] && r.err == nil && r.v.ok && r.v.token == w.token {
			prior = max(prior, r.v.prior)
			w.inStep = w.inStep && r.v.prior == w.token-1
		}
	}
	for i, r := range rs {
		if !answered[i] || r.err != nil || r.v.ok || r.v.token <= prior+1 || r.v.value.token != r.v.token {
			continue
		}
		switch {
		case len(w.ahead) == 0 || r.v.token > w.ahead[0].token:
			w.ahead = []record{r.v}
		case r.v.token == w.ahead[0].token && r.v.holder == w.ahead[0].holder:
			w.ahead = append(w.ahead, r.v)
		}
	}
	if len(w.ahead) > 0 {
		w.token = 0
	}
	return w
}

// answers says what each server answered an Acquire attempt, for an error.
func (p *Provider) answers(rs []result[record]) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		switch {
		case r.err != nil:
			s[i] = r.err.Error()
		case r.v.ok:
			s[i] = fmt.Sprintf("%s: won token %d", p.nodes[i].addr, r.v.token)
		default:
			s[i] = fmt.Sprintf("%s: held by %q token %d", p.nodes[i].addr, r.v.holder, r.v.token)
		}
	}
	return strings.Join(s, "; ")
}

func sameTerm(a, b *providers.HeldError) bool {
	return a != nil && b != nil && a.Holder == b.Holder && a.Token == b.Token
}

// acquireVerdict is what one attempt of an Acquire comes to: a term won
// (keep is its token, and the servers that accepted another token are to
// be released), an error (a *HeldError or a store error), or neither: the
// candidates split the servers, and the next attempt asks for a token above
// maxToken. Every server that accepted a token other than keep is undone.
//
// unsure is a term that a quorum held but that may be another candidate's
// attempt about to be undone: this attempt won a server itself (it is in a
// race) or saw a counter above the term's token (which that candidate may
// have seen too). Reporting it would name a holder that never led, so the
// next attempt looks again: an undone attempt is gone by then, a real term
// is seen again and reported. It is also a live term on fewer servers
// than a quorum that the quorum's servers never saw (weigh's ahead): an
// attempt's own, undone by the next attempt, or a term whose other servers
// restarted empty, seen again.
type acquireVerdict struct {
	lease    providers.Lease
	keep     uint64
	err      error
	unsure   *providers.HeldError
	maxToken uint64
}

// judgeAcquire decides one attempt from the servers' answers rs (in the
// order of p.nodes) and the validity left after it.
func (p *Provider) judgeAcquire(ctx context.Context, key, holder string, ttl time.Duration, rs []result[record], validity time.Duration) acquireVerdict {
	var (
		v        acquireVerdict
		errs     []error
		answered = make([]bool, len(rs))
		value    stamped
		won      = map[uint64][]time.Time{}
		held     = map[[2]string][]record{}
	)
	for i, r := range rs {
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		answered[i] = true
		v.maxToken = max(v.maxToken, r.v.token)
		if r.v.value.newer(value) {
			value = r.v.value
		}
		if r.v.ok {
			won[r.v.token] = append(won[r.v.token], r.v.expires)
		} else {
			id := [2]string{r.v.holder, fmt.Sprint(r.v.token)}
			held[id] = append(held[id], r.v)
		}
	}
	w := p.weigh(rs, answered)
	switch {
	case w.behind != 0:
		p.log.Warn("servers disagree on the token counter (a server restarted empty, or lost writes): raising them to the highest",
			"key", key, "quorum_token", w.behind, "highest_counter", w.counter)
	case len(w.ahead) > 0:
		p.log.Warn("a server has a live term that the servers of the quorum never saw (they restarted empty, or lost writes): taken as held",
			"key", key, "holder", w.ahead[0].holder, "token", w.ahead[0].token)
		v.unsure = termOn(key, w.ahead)
		return v
	}
	if w.token != 0 && validity > 0 {
		v.keep = w.token
		v.lease = providers.Lease{
			Key: key, Holder: holder, Token: w.token, TTL: ttl,
			Expires: p.quorumExpiry(won[w.token]), Value: value.value,
		}
		return v
	}
	if len(rs)-len(errs) < p.quorum || ctx.Err() != nil {
		v.err = p.storeError(ctx, "answered", len(rs)-len(errs), errs)
		return v
	}
	for _, rs := range held {
		if len(rs) >= p.quorum {
			he := p.heldError(key, rs)
			if len(won) > 0 || he.Token < v.maxToken {
				v.unsure = he
			} else {
				v.err = he
			}
			return v
		}
	}
	if w.token != 0 {
		v.err = fmt.Errorf("a quorum took %s of a %s ttl: no validity left, released", ttl-validity-drift(ttl), ttl)
	}
	return v
}

// termOn is a live term seen on fewer servers than a quorum (rs, their
// answers naming it), as a HeldError: it is held at least until the last of
// them lets it go.
func termOn(key string, rs []record) *providers.HeldError {
	he := &providers.HeldError{Key: key, Holder: rs[0].holder, Token: rs[0].token}
	for _, r := range rs {
		if r.expires.After(he.Expires) {
			he.Expires = r.expires
		}
		he.Remaining = max(he.Remaining, r.remaining)
	}
	return he
}

// heldError reports the term that a quorum of servers (rs, at least a
// quorum of answers naming the same holder and token) says is live.
//
// Remaining is measured by the servers' own clocks (each one's PTTL of the
// live key), never by comparing clocks. A candidate can win only once a
// quorum of servers has let the term go, that is once no more than N-quorum
// of them still hold it: not before the (N-quorum+1)-th longest PTTL has
// run out. That is the value reported: it is never later than the earliest
// moment a candidate could succeed (servers that did not answer, or hold
// another term, can only make that moment later), so waiting for it never
// delays a takeover, and it spares the retries that the shortest PTTL would
// cost while a quorum still holds the term. With one server it is the
// PTTL; with an odd number of servers it is also when the holder's quorum
// ends, the Expires reported.
func (p *Provider) heldError(key string, rs []record) *providers.HeldError {
	exps := make([]time.Time, len(rs))
	rem := make([]time.Duration, len(rs))
	for i, r := range rs {
		exps[i], rem[i] = r.expires, r.remaining
	}
	slices.SortFunc(rem, func(a, b time.Duration) int { return cmp.Compare(b, a) })
	return &providers.HeldError{
		Key: key, Holder: rs[0].holder, Token: rs[0].token,
		Expires: p.quorumExpiry(exps), Remaining: rem[len(p.nodes)-p.quorum],
	}
}

// undo tidies the servers (nodes[i] answered rs[i]) that this Acquire
// won with a token other than keep (undoScript: a server behind joins the
// term, any other is released). It runs even when ctx is done: a server
// left holding a failed term would refuse everyone else until the term
// expired.
func (p *Provider) undo(ctx context.Context, key, holder string, rs []result[record], nodes []*node, keep uint64) {
	items := make([][]undoItem, len(p.nodes))
	for i, r := range rs {
		if r.err == nil && r.v.ok && r.v.token != keep {
			s := slices.Index(p.nodes, nodes[i])
			items[s] = append(items[s], undoItem{key, holder, r.v.token, r.v.prior, keep})
		}
	}
	p.undoMany(ctx, items)
}

func lost(l providers.Lease) error {
	return fmt.Errorf("redis: lease %q token %d of %q: %w", l.Key, l.Token, l.Holder, providers.ErrLost)
}

// Renew pushes the expiry out by lease.TTL and stores lease.Value when
// holder and token still match on a quorum. An expired term that nobody
// took may be renewed (holder and token still match, as the contract says).
func (p *Provider) Renew(ctx context.Context, lease providers.Lease) (providers.Lease, error) {
	if err := limits.CheckRenew(lease); err != nil {
		return providers.Lease{}, providers.Wrap("redis", "renew", lease.Key, err)
	}
	if err := ctx.Err(); err != nil {
		return providers.Lease{}, providers.Wrap("redis", "renew", lease.Key, err)
	}
	stamp := time.Now().UnixNano()
	start := time.Now()
	var renewedOK atomic.Bool
	judged := make(chan struct{})
	rs := each(ctx, p, nodeTimeout(lease.TTL), func(ctx context.Context, n *node) (renewed, error) {
		ok, exp, err := p.nodeRenew(ctx, n, lease.Key, lease.Holder, lease.Token, lease.TTL, lease.Value, stamp)
		return renewed{ok, exp}, err
	}, func(i int, r renewed) {
		// A server that answered after a quorum did: one that refused
		// joins the term if the renewal succeeded.
		if <-judged; !r.ok && renewedOK.Load() {
			p.joinLater(lease, []int{i})
		}
	}, quorumOf(p, func(r renewed) bool { return r.ok }))
	l, err := p.judgeRenew(ctx, lease, rs, lease.TTL-time.Since(start)-drift(lease.TTL))
	renewedOK.Store(err == nil)
	close(judged)
	return l, err
}

// renewed is one server's answer to a Renew.
type renewed struct {
	ok  bool
	exp time.Time
}

// judgeRenew decides a Renew from the servers' answers (in the order of
// p.nodes) and the validity left after it.
func (p *Provider) judgeRenew(ctx context.Context, lease providers.Lease, rs []result[renewed], validity time.Duration) (providers.Lease, error) {
	var errs []error
	var exps []time.Time
	refused := 0
	for _, r := range rs {
		switch {
		case r.err != nil:
			errs = append(errs, r.err)
		case r.v.ok:
			exps = append(exps, r.v.exp)
		default:
			refused++
		}
	}
	var missed []int // servers that refused: they may have missed the term
	for i, r := range rs {
		if r.err == nil && !r.v.ok {
			missed = append(missed, i)
		}
	}
	if len(exps) > 0 && len(exps) < p.quorum && len(exps)+refused >= p.quorum && len(p.nodes) > 1 {
		// The term is on fewer servers than a quorum: one of those it
		// was won on was lost before the others that missed it could
		// join. They join now, or the renewal fails.
		if n := p.join(ctx, lease, missed); n > 0 {
			// Their expiries are later than the renewed ones: counted
			// as the earliest of those, which is never late.
			for range n {
				exps = append(exps, slices.MinFunc(exps, time.Time.Compare))
			}
			refused -= n
			missed = nil
		}
	}
	switch {
	case len(exps) >= p.quorum && validity > 0:
		lease.Expires = p.quorumExpiry(exps)
		if len(p.nodes) > 1 {
			p.joinLater(lease, missed)
		}
		return lease, nil
	case refused > len(p.nodes)-p.quorum:
		return providers.Lease{}, lost(lease)
	case len(exps) >= p.quorum:
		return providers.Lease{}, fmt.Errorf("redis: renew %q: took %s of a %s ttl: no validity left", lease.Key, lease.TTL-validity-drift(lease.TTL), lease.TTL)
	}
	what := "renewed the lease"
	if refused > 0 {
		what = fmt.Sprintf("renewed the lease (%d refused it)", refused)
	}
	return providers.Lease{}, providers.Wrap("redis", "renew", lease.Key, p.storeError(ctx, what, len(exps), errs))
}

// Release clears the holder and stores lease.Value when holder and token
// still match on a quorum; the token counter is kept.
func (p *Provider) Release(ctx context.Context, lease providers.Lease) error {
	if err := limits.CheckHeld(lease); err != nil {
		return providers.Wrap("redis", "release", lease.Key, err)
	}
	if err := ctx.Err(); err != nil {
		return providers.Wrap("redis", "release", lease.Key, err)
	}
	stamp := time.Now().UnixNano()
	ttl := lease.TTL
	if ttl <= 0 {
		ttl = ioTimeout
	}
	rs := each(ctx, p, nodeTimeout(ttl), func(ctx context.Context, n *node) (bool, error) {
		return p.nodeRelease(ctx, n, lease.Key, lease.Holder, lease.Token, lease.Value, stamp)
	}, nil, quorumOf(p, func(ok bool) bool { return ok }))
	return p.judgeRelease(ctx, lease, rs)
}

// judgeRelease decides a Release from the servers' answers (in the order
// of p.nodes).
func (p *Provider) judgeRelease(ctx context.Context, lease providers.Lease, rs []result[bool]) error {
	var errs []error
	released, refused := 0, 0
	for _, r := range rs {
		switch {
		case r.err != nil:
			errs = append(errs, r.err)
		case r.v:
			released++
		default:
			refused++
		}
	}
	switch {
	case released >= p.quorum:
		return nil
	case refused > len(p.nodes)-p.quorum:
		return lost(lease)
	}
	return providers.Wrap("redis", "release", lease.Key, p.storeError(ctx, "released the lease", released, errs))
}

// sameExpiry is how far apart two servers' times left of one term (their
// PTTLs, read a moment apart) may be and still be one renewal's: the
// servers are sent it together. A server that has not had the renewal yet
// is behind by the time between two renewals.
const sameExpiry = 5 * time.Millisecond

// Observe returns the lease as a quorum sees it: Holder is "" unless one
// term is live on a quorum. The token of a free lease is the highest
// counter among the servers that answered.
func (p *Provider) Observe(ctx context.Context, key string) (providers.Lease, error) {
	if err := ctx.Err(); err != nil {
		return providers.Lease{}, providers.Wrap("redis", "observe", key, err)
	}
	rs := each(ctx, p, ioTimeout, func(ctx context.Context, n *node) (record, error) {
		return p.nodeObserve(ctx, n, key)
	}, nil, func(rs []result[record], answered []bool) bool {
		// A quorum sees one live term, with one time left: the others
		// cannot change it. Expiries that differ (a renewal still on its way to a
		// server, which the Renew did not wait for) are settled by the
		// others' answers.
		type seen struct {
			n        int
			min, max time.Duration
		}
		live := map[[2]string]*seen{}
		for i, r := range rs {
			if !answered[i] || r.err != nil || !r.v.ok {
				continue
			}
			id := [2]string{r.v.holder, fmt.Sprint(r.v.token)}
			s := live[id]
			if s == nil {
				s = &seen{min: r.v.remaining, max: r.v.remaining}
				live[id] = s
			}
			s.n++
			s.min, s.max = min(s.min, r.v.remaining), max(s.max, r.v.remaining)
			if s.n >= p.quorum && s.max-s.min <= sameExpiry {
				return true
			}
		}
		return false
	})
	var errs []error
	answered := 0
	l := providers.Lease{Key: key}
	var value stamped
	live := map[[2]string][]record{}
	for _, r := range rs {
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		answered++
		l.Token = max(l.Token, r.v.token)
		if r.v.value.newer(value) {
			value = r.v.value
		}
		if r.v.ok {
			id := [2]string{r.v.holder, fmt.Sprint(r.v.token)}
			live[id] = append(live[id], r.v)
		}
	}
	if answered < p.quorum {
		return providers.Lease{}, providers.Wrap("redis", "observe", key, p.storeError(ctx, "answered", answered, errs))
	}
	l.Value = value.value
	for _, rs := range live {
		if len(rs) >= p.quorum {
			exps := make([]time.Time, len(rs))
			for i, r := range rs {
				exps[i] = r.expires
			}
			l.Holder, l.Token, l.Expires = rs[0].holder, rs[0].token, p.quorumExpiry(exps)
		}
	}
	return l, nil
}
