package mongodb

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/electd/electd/providers"
)

var _ providers.Batcher = (*Provider)(nil)

// unordered lets the server apply every write of a bulk whatever the others
// do, as separate calls would.
var unordered = options.BulkWrite().SetOrdered(false)

// AcquireMany tries many Acquires in three requests, however many there
// are: one read of the newest entry of every key (an aggregation judging
// expiry by $$NOW on the server-clock path), one unordered bulk insert of
// the next entry of the keys found free, expired or the caller's, and one
// read confirming them, as Acquire does for one. A held key is refused from
// the read with a *HeldError whose Remaining is measured as Acquire
// measures it. A key whose next slot was taken between the read and the
// write (a duplicate _id) is left to Acquire itself, as are repeats of a
// key in one batch.
//
// The bulk write is one request per 1,000 inserts on the $$NOW path (MongoDB
// 4.2+), per 64 on the fallback path (FerretDB v1.24 never answers an update
// command of 100 statements or more, and nothing after it). A failure of a
// request as a whole is each of its items' error, even though some of its
// inserts may have been applied, as for a single Acquire whose answer was
// lost.
func (p *Provider) AcquireMany(ctx context.Context, reqs []providers.AcquireRequest) ([]providers.Lease, []error) {
	out := make([]providers.Lease, len(reqs))
	errs, fail, batch, repeats := providers.SplitBatch("mongodb", "acquire", len(reqs), func(i int) string { return reqs[i].Key }, func(i int) error {
		return limits.Check(reqs[i].Key, reqs[i].Holder, reqs[i].TTL)
	})
	retry := p.acquireBatch(ctx, reqs, batch, out, errs, fail)
	providers.Singly(retry, repeats, func(i int) { out[i], errs[i] = p.Acquire(ctx, reqs[i]) })
	return out, errs
}

// acquireBatch runs the three requests of AcquireMany for the requests
// batch (distinct keys) and returns those left to Acquire.
func (p *Provider) acquireBatch(ctx context.Context, reqs []providers.AcquireRequest, batch []int, out []providers.Lease, errs []error, fail func(int, error)) (retry []int) {
	if len(batch) == 0 {
		return nil
	}
	tb, err := p.timeBase(ctx)
	if err != nil {
		providers.FailAll(batch, err, fail)
		return nil
	}
	recs, err := tb.latestMany(ctx, p.coll, keysOf(batch, func(i int) string { return reqs[i].Key }))
	if err != nil {
		providers.FailAll(batch, err, fail)
		return nil
	}
	var (
		es      []entry
		pending []int // entry n is the next term of request pending[n]
	)
	for _, i := range batch {
		r := reqs[i]
		rec, found := recs[r.Key]
		if found && rec.Holder != "" && rec.Holder != r.Holder && !rec.Expired {
			errs[i] = heldError(r.Key, rec)
			continue
		}
		es = append(es, entry{key: r.Key, slot: rec.Slot + 1, token: nextToken(rec.Token, r.Floor), holder: r.Holder, value: rec.Value, ttl: r.TTL})
		pending = append(pending, i)
	}
	got, results := p.appendMany(ctx, tb, es, true)
	for n, i := range pending {
		switch err := results[n]; {
		case err == nil:
			l := leaseOf(reqs[i].Key, got[n])
			l.TTL = reqs[i].TTL
			out[i] = l
		case errors.Is(err, errSlotTaken):
			retry = append(retry, i)
		default:
			fail(i, err)
		}
	}
	return retry
}

// appendMany writes es in unordered bulk inserts and, when confirm is set,
// reads the newest entries back as append does for one. results[n] is nil
// for an entry written (and confirmed), errSlotTaken for one whose slot was
// taken (or was not confirmed), or the error of its request; got[n] is the
// newest record read of a confirmed entry.
func (p *Provider) appendMany(ctx context.Context, tb timeBase, es []entry, confirm bool) (got []record, results []error) {
	got = make([]record, len(es))
	models := make([]mongo.WriteModel, len(es))
	for n, e := range es {
		models[n] = tb.insert(e)
	}
	_, results = p.bulk(ctx, tb, models)
	var written []int
	for n, err := range results {
		switch {
		case err == nil:
			written = append(written, n)
		case mongo.IsDuplicateKeyError(err):
			results[n] = errSlotTaken
		}
	}
	if confirm && len(written) > 0 {
		recs, err := tb.latestMany(ctx, p.coll, keysOf(written, func(n int) string { return es[n].key }))
		for _, n := range written {
			rec, found := recs[es[n].key]
			switch {
			case err != nil:
				results[n] = err
			case !found || !confirmed(rec, es[n]):
				results[n] = errSlotTaken
			default:
				got[n] = rec
			}
		}
	}
	var done []entry
	for n, e := range es {
		if results[n] == nil {
			p.remember(e)
			done = append(done, e)
		}
	}
	if ms := cleanups(done); len(ms) > 0 {
		if _, failed := p.bulk(ctx, tb, ms); failed[0] != nil {
			p.log.Debug("could not delete old entries", "error", failed[0])
		}
	}
	return got, results
}

// nextSlots finds the newest slot of each lease's term: from this
// provider's own writes, else in one read. A lease whose term is over gets
// ErrLost through fail and is left out of the answer.
func (p *Provider) nextSlots(ctx context.Context, tb timeBase, leases []providers.Lease, batch []int, fail func(int, error)) (slots map[int]int64, err error) {
	slots = make(map[int]int64, len(batch))
	var unknown []int
	for _, i := range batch {
		if s, ok := p.lastSlot(leases[i]); ok {
			slots[i] = s
		} else {
			unknown = append(unknown, i)
		}
	}
	if len(unknown) == 0 {
		return slots, nil
	}
	recs, err := tb.latestMany(ctx, p.coll, keysOf(unknown, func(i int) string { return leases[i].Key }))
	if err != nil {
		return nil, err
	}
	for _, i := range unknown {
		if rec, found := recs[leases[i].Key]; found && ours(rec, leases[i]) {
			slots[i] = rec.Slot
		} else {
			fail(i, providers.ErrLost)
		}
	}
	return slots, nil
}

// RenewMany renews many leases in two requests (the bulk write split as
// AcquireMany splits it), three for leases this provider did not write
// last: one unordered bulk insert of each term's next entry, as Renew
// writes it, and one read confirming them. A lease whose next slot was
// taken is left to Renew, which reads where its term is; repeats of a key
// are renewed by Renew after the batch.
func (p *Provider) RenewMany(ctx context.Context, leases []providers.Lease) ([]providers.Lease, []error) {
	out := make([]providers.Lease, len(leases))
	errs, fail, batch, repeats := providers.SplitBatch("mongodb", "renew", len(leases), func(i int) string { return leases[i].Key }, func(i int) error { return limits.CheckRenew(leases[i]) })
	var retry []int
	pending, got, results := p.appendNext(ctx, leases, batch, fail, true, func(l providers.Lease, slot int64) entry {
		return entry{key: l.Key, slot: slot, token: int64(l.Token), holder: l.Holder, value: l.Value, ttl: l.TTL}
	})
	for n, i := range pending {
		switch err := results[n]; {
		case err == nil:
			l := leases[i]
			l.Expires, l.Value = got[n].Expires, got[n].Value
			out[i] = l
		case errors.Is(err, errSlotTaken):
			p.forget(leases[i].Key)
			retry = append(retry, i)
		default:
			fail(i, err)
		}
	}
	providers.Singly(retry, repeats, func(i int) { out[i], errs[i] = p.Renew(ctx, leases[i]) })
	return out, errs
}

// ReleaseMany releases many leases in one request (the bulk write split as
// AcquireMany splits it), two for leases this provider did not write last:
// one unordered bulk insert of each term's released entry, as Release
// writes it. A lease whose next slot was taken is left to Release; repeats
// of a key are released by Release after the batch.
func (p *Provider) ReleaseMany(ctx context.Context, leases []providers.Lease) []error {
	errs, fail, batch, repeats := providers.SplitBatch("mongodb", "release", len(leases), func(i int) string { return leases[i].Key }, func(i int) error { return limits.CheckHeld(leases[i]) })
	var retry []int
	pending, _, results := p.appendNext(ctx, leases, batch, fail, false, func(l providers.Lease, slot int64) entry {
		return entry{key: l.Key, slot: slot, token: int64(l.Token), value: l.Value}
	})
	for n, i := range pending {
		p.forget(leases[i].Key)
		switch err := results[n]; {
		case err == nil:
		case errors.Is(err, errSlotTaken):
			retry = append(retry, i)
		default:
			fail(i, err)
		}
	}
	providers.Singly(retry, repeats, func(i int) { errs[i] = p.Release(ctx, leases[i]) })
	return errs
}

// appendNext appends the next entry of each term of batch, made by next
// from the lease and its next slot, as RenewMany and ReleaseMany write
// them: it reads the time base and where each term is (failing the leases
// whose term is gone), and appends the entries in one bulk write. It
// returns appendMany's answers, entry n being that of lease pending[n]; a
// request that fails fails every lease of batch, and pending is empty.
func (p *Provider) appendNext(ctx context.Context, leases []providers.Lease, batch []int, fail func(int, error), confirm bool, next func(l providers.Lease, slot int64) entry) (pending []int, got []record, results []error) {
	if len(batch) == 0 {
		return nil, nil, nil
	}
	tb, err := p.timeBase(ctx)
	if err != nil {
		providers.FailAll(batch, err, fail)
		return nil, nil, nil
	}
	slots, err := p.nextSlots(ctx, tb, leases, batch, fail)
	if err != nil {
		providers.FailAll(batch, err, fail)
		return nil, nil, nil
	}
	var es []entry
	for _, i := range batch {
		if s, ok := slots[i]; ok {
			es = append(es, next(leases[i], s+1))
			pending = append(pending, i)
		}
	}
	got, results = p.appendMany(ctx, tb, es, confirm)
	return pending, got, results
}

// bulk runs models as unordered bulk writes of at most bulkLimit models
// each. errs[n] is model n's error: the server's write error for it, or the
// failure of its request as a whole (a write concern not met included: as
// for a single write, the caller is told it failed); nil when it was
// applied. matched counts the documents matched by the requests that
// succeeded.
func (p *Provider) bulk(ctx context.Context, tb timeBase, models []mongo.WriteModel) (matched int64, errs []error) {
	errs = make([]error, len(models))
	limit := tb.bulkLimit()
	for start := 0; start < len(models); start += limit {
		end := min(start+limit, len(models))
		res, err := p.coll.BulkWrite(ctx, models[start:end], unordered)
		var bwe mongo.BulkWriteException
		switch {
		case err == nil:
		case errors.As(err, &bwe) && bwe.WriteConcernError == nil && len(bwe.WriteErrors) > 0:
			for _, we := range bwe.WriteErrors {
				errs[start+we.Index] = we.WriteError
			}
		default:
			for n := start; n < end; n++ {
				errs[n] = err
			}
			continue
		}
		if res != nil {
			matched += res.MatchedCount
		}
	}
	return matched, errs
}

func keysOf(idx []int, key func(i int) string) []string {
	keys := make([]string, len(idx))
	for n, i := range idx {
		keys[n] = key(i)
	}
	return keys
}
