package mongodb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/electd/electd/providers"
)

var (
	_ providers.BatchAcquirer = (*Provider)(nil)
	_ providers.BatchRenewer  = (*Provider)(nil)
	_ providers.BatchReleaser = (*Provider)(nil)
)

// singleWorkers bounds the single operations run at once for the items a
// batch leaves to them (a record that changed between the read and the
// write).
const singleWorkers = 8

// unordered lets the server apply every write of a bulk whatever the others
// do, as separate calls would.
var unordered = options.BulkWrite().SetOrdered(false)

// AcquireMany tries many Acquires in three requests, however many there
// are: one read of every record (an aggregation judging expiry by $$NOW on
// the server-clock path), one unordered bulk write of the Acquire updates
// of the keys found free, expired or the caller's, and one read of the new
// terms' expiries as the store wrote them. Each update is Acquire's own
// (the same filter, judged by the server at the write, and the same
// update), pinned to the token and Value read, so the new token is the one
// read + 1 and the Value returned is the previous term's; a key never
// acquired is inserted by the upsert as Acquire does. A held key is refused
// from the read with a *HeldError whose Remaining is measured as Acquire
// measures it. A key whose record changed between the read and the write
// (the pinned filter matched nothing, and the upsert met the existing _id)
// is left to Acquire itself, as are repeats of a key in one batch.
//
// The bulk write is one request per 1,000 updates on the $$NOW path (MongoDB
// 4.2+), per 64 on the fallback path (FerretDB v1.24 never answers an update
// command of 100 statements or more, and nothing after it). A failure of a
// request as a whole is each of its items' error, even though some of its
// updates may have been applied, as for a single Acquire whose answer was
// lost.
func (p *Provider) AcquireMany(ctx context.Context, reqs []providers.AcquireRequest) ([]providers.Lease, []error) {
	out := make([]providers.Lease, len(reqs))
	errs := make([]error, len(reqs))
	fail := func(i int, err error) {
		errs[i] = fmt.Errorf("mongodb: acquire %q: %w", reqs[i].Key, err)
	}
	batch, repeats := distinct(len(reqs), func(i int) string { return reqs[i].Key }, func(i int) error {
		return checkLease(reqs[i].Key, reqs[i].Holder, reqs[i].TTL)
	}, fail)
	retry := p.acquireBatch(ctx, reqs, batch, out, errs, fail)
	forEach(retry, func(i int) {
		out[i], errs[i] = p.AcquireAbove(ctx, reqs[i])
	})
	for _, i := range repeats {
		out[i], errs[i] = p.AcquireAbove(ctx, reqs[i])
	}
	return out, errs
}

// acquireBatch runs the three requests of AcquireMany for the requests
// batch (distinct keys) and returns those left to Acquire.
func (p *Provider) acquireBatch(ctx context.Context, reqs []providers.AcquireRequest, batch []int, out []providers.Lease, errs []error, fail func(int, error)) (retry []int) {
	if len(batch) == 0 {
		return nil
	}
	failAll := func(idx []int, err error) {
		for _, i := range idx {
			fail(i, err)
		}
	}
	tb, err := p.timeBase(ctx)
	if err != nil {
		failAll(batch, err)
		return nil
	}
	recs, err := tb.readMany(ctx, p.coll, keysOf(batch, func(i int) string { return reqs[i].Key }))
	if err != nil {
		failAll(batch, err)
		return nil
	}
	var (
		models  []mongo.WriteModel
		pending []int // model n is the update of request pending[n]
	)
	for _, i := range batch {
		r := reqs[i]
		rec, found := recs[r.Key]
		if found && rec.Holder != "" && rec.Holder != r.Holder && !rec.Expired {
			errs[i] = heldError(r.Key, rec)
			continue
		}
		filter, update := tb.acquire(r.Key, r.Holder, r.TTL)
		if found {
			filter = append(filter, bson.E{Key: "token", Value: rec.Token}, bson.E{Key: "value", Value: rec.Value})
		} else {
			filter = append(filter, bson.E{Key: "token", Value: bson.D{{Key: "$exists", Value: false}}})
		}
		models = append(models, mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(update).SetUpsert(true))
		pending = append(pending, i)
	}
	if len(models) == 0 {
		return nil
	}
	_, failed := p.bulk(ctx, tb, models)
	var written []int
	for n, i := range pending {
		switch err := failed[n]; {
		case err == nil:
			written = append(written, i)
		case mongo.IsDuplicateKeyError(err):
			// The pinned filter matched nothing and the upsert met the
			// record: it changed since the read.
			retry = append(retry, i)
		default:
			fail(i, err)
		}
	}
	// The expiries the store wrote (by its clock on the $$NOW path). A
	// record whose token moved on since is another term's: its lease is
	// reported without an expiry, which is informational.
	terms, err := p.terms(ctx, keysOf(written, func(i int) string { return reqs[i].Key }))
	if err != nil {
		p.log.Debug("could not read back the expiries of the new terms", "error", err)
	}
	for _, i := range written {
		r := reqs[i]
		prev := recs[r.Key] // zero when the key was new
		l := providers.Lease{Key: r.Key, Holder: r.Holder, Token: uint64(prev.Token) + 1, TTL: r.TTL, Value: prev.Value}
		if t, ok := terms[r.Key]; ok && t.Holder == r.Holder && uint64(t.Token) == l.Token {
			l.Expires = t.Expires
		}
		if l.Token <= r.Floor {
			if l, err = p.raise(ctx, l, r.Floor); err != nil {
				fail(i, err)
				continue
			}
		}
		out[i] = l
	}
	return retry
}

// RenewMany renews many leases in two requests (the bulk write split as
// AcquireMany splits it): one unordered bulk write of
// Renew's update for each (matching holder and token, as Renew does), and
// one read of the records. A lease whose record still names its holder and
// token after the write was renewed by it (a term, once gone, never comes
// back), with the expiry the store wrote; any other lease is lost. A write
// error of one update is that lease's error; a failure of either request
// as a whole is every lease's. Repeats of a key are renewed by Renew after
// the batch.
func (p *Provider) RenewMany(ctx context.Context, leases []providers.Lease) ([]providers.Lease, []error) {
	out := make([]providers.Lease, len(leases))
	errs := make([]error, len(leases))
	fail := func(i int, err error) {
		errs[i] = fmt.Errorf("mongodb: renew %q: %w", leases[i].Key, err)
	}
	batch, repeats := distinct(len(leases), func(i int) string { return leases[i].Key }, func(i int) error {
		l := leases[i]
		if err := checkLease(l.Key, l.Holder, l.TTL); err != nil {
			return err
		}
		return providers.CheckValue(l.Value)
	}, fail)
	func() {
		if len(batch) == 0 {
			return
		}
		failAll := func(idx []int, err error) {
			for _, i := range idx {
				fail(i, err)
			}
		}
		tb, err := p.timeBase(ctx)
		if err != nil {
			failAll(batch, err)
			return
		}
		models := make([]mongo.WriteModel, len(batch))
		for n, i := range batch {
			models[n] = mongo.NewUpdateOneModel().SetFilter(matchTerm(leases[i])).SetUpdate(tb.renew(leases[i].TTL, leases[i].Value))
		}
		_, failed := p.bulk(ctx, tb, models)
		var written []int
		for n, i := range batch {
			if failed[n] != nil {
				fail(i, failed[n])
			} else {
				written = append(written, i)
			}
		}
		terms, err := p.terms(ctx, keysOf(written, func(i int) string { return leases[i].Key }))
		if err != nil {
			failAll(written, err)
			return
		}
		for _, i := range written {
			l := leases[i]
			t, ok := terms[l.Key]
			if !ok || t.Holder != l.Holder || uint64(t.Token) != l.Token {
				errs[i] = fmt.Errorf("mongodb: renew %q: %w", l.Key, providers.ErrLost)
				continue
			}
			l.Expires, l.Value = t.Expires, t.Value
			out[i] = l
		}
	}()
	for _, i := range repeats {
		out[i], errs[i] = p.Renew(ctx, leases[i])
	}
	return out, errs
}

// ReleaseMany releases many leases in two requests (the bulk write split as
// AcquireMany splits it), and a third in a race:
// one read of the records, which answers ErrLost at once for those that no
// longer name the lease's holder and token, and one unordered bulk write of
// Release's update (matching holder and token) for the others. When the
// server matched all of them, all are released; otherwise a read of the
// records tells which were: a record that kept the lease's token and the
// Value given, holder cleared. Repeats of a key are released by Release
// after the batch.
func (p *Provider) ReleaseMany(ctx context.Context, leases []providers.Lease) []error {
	errs := make([]error, len(leases))
	fail := func(i int, err error) {
		errs[i] = fmt.Errorf("mongodb: release %q: %w", leases[i].Key, err)
	}
	batch, repeats := distinct(len(leases), func(i int) string { return leases[i].Key }, func(i int) error {
		l := leases[i]
		if l.Key == "" || l.Holder == "" {
			return errors.New("key and holder must not be empty")
		}
		return providers.CheckValue(l.Value)
	}, fail)
	func() {
		if len(batch) == 0 {
			return
		}
		failAll := func(idx []int, err error) {
			for _, i := range idx {
				fail(i, err)
			}
		}
		tb, err := p.timeBase(ctx)
		if err != nil {
			failAll(batch, err)
			return
		}
		key := func(i int) string { return leases[i].Key }
		before, err := p.terms(ctx, keysOf(batch, key))
		if err != nil {
			failAll(batch, err)
			return
		}
		var (
			models []mongo.WriteModel
			held   []int
		)
		for _, i := range batch {
			l := leases[i]
			if t, ok := before[l.Key]; !ok || t.Holder != l.Holder || uint64(t.Token) != l.Token {
				fail(i, providers.ErrLost)
				continue
			}
			models = append(models, mongo.NewUpdateOneModel().SetFilter(matchTerm(l)).SetUpdate(tb.release(l.Value)))
			held = append(held, i)
		}
		if len(models) == 0 {
			return
		}
		matched, failed := p.bulk(ctx, tb, models)
		if matched == int64(len(models)) && !slices.ContainsFunc(failed, func(err error) bool { return err != nil }) {
			return // every one matched: released
		}
		after, err := p.terms(ctx, keysOf(held, key))
		for n, i := range held {
			l := leases[i]
			t, ok := after[l.Key]
			switch {
			case failed[n] != nil:
				fail(i, failed[n])
			case err != nil:
				fail(i, err)
			case !ok || t.Holder != "" || uint64(t.Token) != l.Token || t.Value != l.Value:
				fail(i, providers.ErrLost)
			}
		}
	}()
	for _, i := range repeats {
		errs[i] = p.Release(ctx, leases[i])
	}
	return errs
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

// terms reads the records of keys as they are (no judgement of expiry).
func (p *Provider) terms(ctx context.Context, keys []string) (map[string]record, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	cur, err := p.coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}})
	if err != nil {
		return nil, err
	}
	return decodeKeyed(ctx, cur, nil)
}

// distinct checks every item with check (a failed check is the item's
// error, given to fail) and splits the others into the first of each key,
// for the batch, and repeats of a key, left to the single operation after
// the batch so that they are judged after the first.
func distinct(n int, key func(i int) string, check func(i int) error, fail func(int, error)) (batch, repeats []int) {
	seen := make(map[string]bool, n)
	for i := range n {
		if err := check(i); err != nil {
			fail(i, err)
			continue
		}
		if k := key(i); seen[k] {
			repeats = append(repeats, i)
		} else {
			seen[k] = true
			batch = append(batch, i)
		}
	}
	return batch, repeats
}

func keysOf(idx []int, key func(i int) string) []string {
	keys := make([]string, len(idx))
	for n, i := range idx {
		keys[n] = key(i)
	}
	return keys
}

// forEach calls fn with each of idx, singleWorkers at a time.
func forEach(idx []int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, singleWorkers)
	for _, i := range idx {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}
