package datastore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/electd/electd/providers"
)

var _ providers.Batcher = (*Provider)(nil)

const (
	// maxTxEntities is the most entities one Commit may write in Firestore
	// in Datastore mode.
	maxTxEntities = 500
	// legacyTxGroups is the most entity groups (here: entities, each job's
	// entity being a root) one transaction may touch in legacy Cloud
	// Datastore and in its emulator, which answer "operating on too many
	// entity groups in a single transaction" beyond it.
	legacyTxGroups = 25
	// lookupKeys bounds the keys of one plain lookup (Datastore takes 1000).
	lookupKeys = 500
	// txInFlight bounds the transactions of one batch run at once.
	txInFlight = 4
)

// txSize is how many entities the batches of this provider put in one
// transaction: maxTxEntities until the store refuses a transaction of more
// than legacyTxGroups entity groups, legacyTxGroups from then on.
func (p *Provider) txSize() int {
	if p.legacyGroups.Load() {
		return legacyTxGroups
	}
	return maxTxEntities
}

func tooManyGroups(err error) bool {
	return status.Code(err) == codes.InvalidArgument && strings.Contains(err.Error(), "too many entity groups")
}

// txItem is one entity of a batch transaction: its request index and key.
type txItem struct {
	i int
	k *datastore.Key
}

// inTransactions runs fn on items in transactions of txSize entities,
// txInFlight at a time. fn is one run of one transaction over the records
// read in it (found[n] false for a missing entity); it returns the records
// to put (nil to leave one alone). A transaction whose store allows fewer
// entity groups is run again in smaller ones. Once a transaction's outcome
// is final, committed is called with each of its items when it committed;
// its items are failed with its error when it failed, and returned in
// retry when every run lost a race (datastore.ErrConcurrentTransaction),
// for the single operation to decide. fn and committed are called under
// one lock, so they may share the caller's per-item state.
func (p *Provider) inTransactions(ctx context.Context, items []txItem, fail func(i int, err error),
	fn func(now time.Time, items []txItem, cur []record, found []bool) []*record,
	committed func(it txItem)) (retry []int) {
	var mu sync.Mutex
	locked := func(now time.Time, items []txItem, cur []record, found []bool) []*record {
		mu.Lock()
		defer mu.Unlock()
		return fn(now, items, cur, found)
	}
	done := func(items []txItem, err error) {
		mu.Lock()
		defer mu.Unlock()
		for _, it := range items {
			switch {
			case errors.Is(err, datastore.ErrConcurrentTransaction):
				retry = append(retry, it.i)
			case err != nil:
				fail(it.i, err)
			default:
				committed(it)
			}
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, txInFlight)
	var run func(items []txItem)
	run = func(items []txItem) {
		size := p.txSize()
		for start := 0; start < len(items); start += size {
			chunk := items[start:min(start+size, len(items))]
			sem <- struct{}{}
			wg.Go(func() {
				err := p.batchTx(ctx, chunk, locked)
				<-sem
				if tooManyGroups(err) && len(chunk) > legacyTxGroups {
					if !p.legacyGroups.Swap(true) {
						p.log.Debug("the store allows no more than 25 entity groups per transaction (legacy Datastore, emulator): batches use transactions of 25 entities")
					}
					run(chunk)
					return
				}
				done(chunk, err)
			})
		}
	}
	run(items)
	wg.Wait()
	return retry
}

// batchTx runs one transaction over items.
func (p *Provider) batchTx(ctx context.Context, items []txItem, fn func(now time.Time, items []txItem, cur []record, found []bool) []*record) error {
	keys := make([]*datastore.Key, len(items))
	for n, it := range items {
		keys[n] = it.k
	}
	return p.run(ctx, func(tx *datastore.Transaction) error {
		now := p.now()
		cur := make([]record, len(keys))
		found, err := loadedMulti(tx.GetMulti(keys, cur), len(keys))
		if err != nil {
			return err
		}
		next := fn(now, items, cur, found)
		var pk []*datastore.Key
		var pr []*record
		for n, r := range next {
			if r != nil {
				pk, pr = append(pk, keys[n]), append(pr, r)
			}
		}
		if len(pk) == 0 {
			return nil
		}
		_, err = tx.PutMulti(pk, pr)
		return err
	})
}

// loadedMulti reads the error of a GetMulti of n keys: which entities were
// found, or the error of the call as a whole.
func loadedMulti(err error, n int) ([]bool, error) {
	found := make([]bool, n)
	var me datastore.MultiError
	if err != nil && !errors.As(err, &me) {
		return nil, err
	}
	for i := range found {
		var e error
		if me != nil {
			e = me[i]
		}
		ok, err := loaded(e)
		if err != nil {
			return nil, err
		}
		found[i] = ok
	}
	return found, nil
}

// lookup reads keys outside a transaction, lookupKeys at a time.
func (p *Provider) lookup(ctx context.Context, keys []*datastore.Key) ([]record, []bool, error) {
	recs := make([]record, len(keys))
	found := make([]bool, len(keys))
	for start := 0; start < len(keys); start += lookupKeys {
		end := min(start+lookupKeys, len(keys))
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		f, err := loadedMulti(p.client.GetMulti(ctx, keys[start:end], recs[start:end]), end-start)
		if err != nil {
			return nil, nil, withCtx(ctx, err)
		}
		copy(found[start:end], f)
	}
	return recs, found, nil
}

// AcquireMany tries many Acquires with a handful of requests: one plain,
// strongly consistent lookup of every entity (500 keys per request), which
// refuses the leases held by others at once, as Acquire's first read does;
// then transactions of up to 500 entities (25 on the emulator and legacy
// Datastore) that read the others again, judge each as Acquire's
// transaction does (on this node's clock read at the start of the run) and
// write the new terms. A lease found held in the transaction is refused
// alone; the others of the transaction still commit. The items of a
// transaction that lost every race are decided by Acquire itself, as are
// repeats of a key.
func (p *Provider) AcquireMany(ctx context.Context, reqs []providers.AcquireRequest) ([]providers.Lease, []error) {
	out := make([]providers.Lease, len(reqs))
	errs, fail, batch, repeats := providers.SplitBatch("datastore", "acquire", len(reqs), func(i int) string { return reqs[i].Key }, func(i int) error {
		return limits.Check(reqs[i].Key, reqs[i].Holder, reqs[i].TTL)
	})
	var retry []int
	func() {
		if len(batch) == 0 {
			return
		}
		keys := make([]*datastore.Key, len(batch))
		for n, i := range batch {
			keys[n] = p.key(reqs[i].Key)
		}
		now := p.now()
		cur, _, err := p.lookup(ctx, keys)
		if err != nil {
			providers.FailAll(batch, err, fail)
			return
		}
		var items []txItem
		for n, i := range batch {
			if err := p.held(reqs[i].Key, cur[n], reqs[i].Holder, now); err != nil {
				errs[i] = err
				continue
			}
			items = append(items, txItem{i, keys[n]})
		}
		// next[i] is the term a run plans for request i; a run that finds
		// it in the entity knows the previous run committed (its answer
		// was lost), as Acquire does.
		next := make([]*record, len(reqs))
		verdict := make([]error, len(reqs))
		retry = p.inTransactions(ctx, items, fail, func(now time.Time, items []txItem, cur []record, _ []bool) []*record {
			puts := make([]*record, len(items))
			for n, it := range items {
				r := reqs[it.i]
				if prev := next[it.i]; prev != nil && cur[n].same(*prev) {
					continue // ours already
				}
				next[it.i], verdict[it.i] = nil, nil
				if err := p.held(r.Key, cur[n], r.Holder, now); err != nil {
					verdict[it.i] = err
					continue
				}
				rec := record{Holder: r.Holder, Token: int64(providers.NextToken(uint64(cur[n].Token), r.Floor)), Expires: stamp(now.Add(r.TTL)), Value: cur[n].Value}
				next[it.i], puts[n] = &rec, &rec
			}
			return puts
		}, func(it txItem) {
			if verdict[it.i] != nil {
				errs[it.i] = verdict[it.i]
				return
			}
			r, n := reqs[it.i], next[it.i]
			out[it.i] = providers.Lease{Key: r.Key, Holder: r.Holder, Token: uint64(n.Token), TTL: r.TTL, Expires: n.Expires, Value: n.Value}
		})
	}()
	providers.Singly(retry, repeats, func(i int) { out[i], errs[i] = p.Acquire(ctx, reqs[i]) })
	return out, errs
}

// RenewMany renews many leases in transactions of up to 500 entities (25
// on the emulator and legacy Datastore), each lease judged as Renew judges
// it: holder and token still in the entity, expired or not. A lease lost is
// refused alone; the others of its transaction still commit. The leases of
// a transaction that lost every race get Renew's own answer, as do repeats
// of a key.
func (p *Provider) RenewMany(ctx context.Context, leases []providers.Lease) ([]providers.Lease, []error) {
	out := make([]providers.Lease, len(leases))
	errs, fail, batch, repeats := providers.SplitBatch("datastore", "renew", len(leases), func(i int) string { return leases[i].Key }, func(i int) error { return limits.CheckRenew(leases[i]) })
	items := make([]txItem, len(batch))
	for n, i := range batch {
		items[n] = txItem{i, p.key(leases[i].Key)}
	}
	next := make([]record, len(leases))
	held := make([]bool, len(leases))
	retry := p.inTransactions(ctx, items, fail, func(now time.Time, items []txItem, cur []record, found []bool) []*record {
		puts := make([]*record, len(items))
		for n, it := range items {
			l := leases[it.i]
			held[it.i] = found[n] && holds(cur[n], l)
			if !held[it.i] {
				continue
			}
			next[it.i] = cur[n]
			next[it.i].Expires, next[it.i].Value = stamp(now.Add(l.TTL)), l.Value
			puts[n] = &next[it.i]
		}
		return puts
	}, func(it txItem) {
		l := leases[it.i]
		if !held[it.i] {
			errs[it.i] = lost(l)
			return
		}
		l.Expires = next[it.i].Expires
		out[it.i] = l
	})
	providers.Singly(retry, repeats, func(i int) { out[i], errs[i] = p.Renew(ctx, leases[i]) })
	return out, errs
}

// ReleaseMany releases many leases in transactions of up to 500 entities
// (25 on the emulator and legacy Datastore), each lease judged as Release
// judges it. A lease lost is refused alone; the others of its transaction
// still commit. The leases of a transaction that lost every race get
// Release's own answer, as do repeats of a key.
func (p *Provider) ReleaseMany(ctx context.Context, leases []providers.Lease) []error {
	errs, fail, batch, repeats := providers.SplitBatch("datastore", "release", len(leases), func(i int) string { return leases[i].Key }, func(i int) error { return limits.CheckHeld(leases[i]) })
	items := make([]txItem, len(batch))
	for n, i := range batch {
		items[n] = txItem{i, p.key(leases[i].Key)}
	}
	next := make([]*record, len(leases))
	released := make([]bool, len(leases))
	retry := p.inTransactions(ctx, items, fail, func(now time.Time, items []txItem, cur []record, found []bool) []*record {
		puts := make([]*record, len(items))
		for n, it := range items {
			l := leases[it.i]
			if prev := next[it.i]; prev != nil && found[n] && cur[n].same(*prev) {
				continue // the previous run's commit went through
			}
			next[it.i] = nil
			released[it.i] = found[n] && holds(cur[n], l)
			if !released[it.i] {
				continue
			}
			rec := cur[n]
			rec.Holder, rec.Expires, rec.Value = "", stamp(now), l.Value
			next[it.i], puts[n] = &rec, &rec
		}
		return puts
	}, func(it txItem) {
		if !released[it.i] {
			errs[it.i] = lost(leases[it.i])
		}
	})
	providers.Singly(retry, repeats, func(i int) { errs[i] = p.Release(ctx, leases[i]) })
	return errs
}
