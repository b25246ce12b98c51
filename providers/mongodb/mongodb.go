package mongodb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
	"go.mongodb.org/mongo-driver/mongo/readpref"

	"github.com/electd/electd/providers"
)

const (
	// acquireAttempts bounds the retries of Acquire when the lease was freed
	// between the refused write and the read of the holder.
	acquireAttempts = 5
	// openDetectTimeout bounds the capability probe done by Open; a store
	// that does not answer in time is probed again by the first operation.
	openDetectTimeout = 5 * time.Second
)

var _ providers.Provider = (*Provider)(nil)

// Provider is a lease store on one MongoDB collection.
type Provider struct {
	client *mongo.Client
	coll   *mongo.Collection
	log    hclog.Logger
	// forceClient skips the probe and uses the agent's clock (tests).
	forceClient bool

	// sem guards tb: a one-slot semaphore rather than a mutex, so that a
	// caller waiting for another's probe still honours its own ctx.
	sem chan struct{}
	tb  timeBase

	mu    sync.Mutex
	terms map[string]term // by key: the newest slot written of a term held

	closeOnce sync.Once
	closeErr  error
}

// New connects to the store described by s and probes, within ctx and at
// most 5 s, whether the server judges time itself ($$NOW in update
// pipelines). A store that does not answer is not an error here: the probe
// is repeated by the first operation, so an agent started while its
// database is down keeps running and reports errors per operation.
func New(ctx context.Context, s Settings, log hclog.Logger) (*Provider, error) {
	p, err := newProvider(s, log)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, openDetectTimeout)
	defer cancel()
	if _, err := p.timeBase(dctx); err != nil {
		p.log.Warn("capability probe failed at start; the first operation will probe again", "error", err)
	}
	return p, nil
}

func newProvider(s Settings, log hclog.Logger) (*Provider, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if s.Database == "" {
		s.Database = "electd"
	}
	if s.Collection == "" {
		s.Collection = "leases"
	}
	if s.WriteConcern == "" {
		s.WriteConcern = "majority"
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("mongodb: %w", err)
	}
	wc, err := writeConcern(s.WriteConcern)
	if err != nil {
		return nil, err
	}
	opts := options.Client().ApplyURI(s.URI)
	if opts.AppName == nil {
		opts.SetAppName("electd")
	}
	// Every read and write goes to the primary: a secondary may not have
	// the latest term yet.
	opts.SetReadPreference(readpref.Primary()).SetWriteConcern(wc)
	client, err := mongo.Connect(context.Background(), opts) // no I/O: the driver connects in the background
	if err != nil {
		return nil, fmt.Errorf("mongodb: connect: %s", redact(err, s.URI))
	}
	return &Provider{
		client: client,
		coll:   client.Database(s.Database).Collection(s.Collection),
		log:    log.Named("mongodb").With("database", s.Database, "collection", s.Collection),
		sem:    make(chan struct{}, 1),
		terms:  map[string]term{},
	}, nil
}

func leaseOf(key string, rec record) providers.Lease {
	return providers.Lease{Key: key, Holder: rec.Holder, Token: uint64(rec.Token), Expires: rec.Expires, Value: rec.Value}
}

// ours reports whether rec is the state of lease's term: its holder and
// token, not released.
func ours(rec record, l providers.Lease) bool {
	return rec.Holder != "" && rec.Holder == l.Holder && uint64(rec.Token) == l.Token
}

// Acquire starts a new term on key for holder when the lease is free,
// expired or already held by holder.
// The new term's token is above req.Floor too.
func (p *Provider) Acquire(ctx context.Context, req providers.AcquireRequest) (providers.Lease, error) {
	l, err := p.acquire(ctx, req.Key, req.Holder, req.TTL, req.Floor)
	return l, providers.WrapFailure("mongodb", "acquire", req.Key, err)
}

// acquire reads the newest entry of key, judges it, and inserts the next
// slot with the next token. Of candidates that read the same entry, the
// server lets exactly one insert that slot (the unique _id); the others
// collide and read again.
func (p *Provider) acquire(ctx context.Context, key, holder string, ttl time.Duration, floor uint64) (providers.Lease, error) {
	if err := limits.Check(key, holder, ttl); err != nil {
		return providers.Lease{}, err
	}
	tb, err := p.timeBase(ctx)
	if err != nil {
		return providers.Lease{}, err
	}
	var lastErr error
	for range acquireAttempts {
		cur, found, err := tb.latest(ctx, p.coll, key)
		if err != nil {
			return providers.Lease{}, err
		}
		if found && cur.Holder != "" && cur.Holder != holder && !cur.Expired {
			return providers.Lease{}, heldError(key, cur)
		}
		e := entry{key: key, slot: cur.Slot + 1, token: nextToken(cur.Token, floor), holder: holder, value: cur.Value, ttl: ttl}
		rec, err := p.append(ctx, tb, e)
		if err == nil {
			l := leaseOf(key, rec)
			l.TTL = ttl
			return l, nil
		}
		if !errors.Is(err, errSlotTaken) {
			return providers.Lease{}, err
		}
		lastErr = errors.New("lease changed hands during acquire")
	}
	return providers.Lease{}, fmt.Errorf("gave up after %d attempts: %w", acquireAttempts, lastErr)
}

// nextToken is providers.NextToken on the log's signed tokens.
func nextToken(token int64, floor uint64) int64 {
	return int64(providers.NextToken(uint64(token), floor))
}

// errSlotTaken: the slot written was another writer's, or the write was
// overtaken (see confirm).
var errSlotTaken = errors.New("slot taken")

// append writes e and confirms it; rec is the entry as stored.
func (p *Provider) append(ctx context.Context, tb timeBase, e entry) (record, error) {
	_, failed := p.bulk(ctx, tb, []mongo.WriteModel{tb.insert(e)})
	if err := failed[0]; err != nil {
		if mongo.IsDuplicateKeyError(err) {
			return record{}, errSlotTaken
		}
		return record{}, err
	}
	rec, found, err := tb.latest(ctx, p.coll, e.key)
	if err != nil {
		return record{}, err
	}
	if !found || !confirmed(rec, e) {
		return record{}, errSlotTaken
	}
	p.wrote(ctx, e)
	return rec, nil
}

// confirmed reports whether rec, the newest entry read after e was
// written, shows e in force: e itself, or a later entry of the same term.
// An insert can succeed into a slot that the clean-up deleted (its writer
// read the log before newer entries were written, or its request was
// delayed that long); the log has moved on then, and the read after the
// write sees it. A term is only won or kept once the read confirms it.
func confirmed(rec record, e entry) bool {
	if rec.Slot == e.slot && rec.Token == e.token && rec.Holder == e.holder {
		return true
	}
	return rec.Slot > e.slot && rec.Holder == e.holder && rec.Token == e.token && e.holder != ""
}

// heldError reports rec, read and judged as held by latest or latestMany.
// Remaining is expires - now by the clock that judged it: on the $$NOW path
// the server's, in the same aggregation that found the lease held.
func heldError(key string, rec record) *providers.HeldError {
	return &providers.HeldError{Key: key, Holder: rec.Holder, Token: uint64(rec.Token), Expires: rec.Expires, Remaining: rec.left()}
}

// Renew pushes the expiry out by lease.TTL and stores lease.Value when
// holder and token still match. An expired lease that nobody took may be
// renewed, as the contract says.
func (p *Provider) Renew(ctx context.Context, lease providers.Lease) (providers.Lease, error) {
	l, err := p.renew(ctx, lease)
	return l, providers.WrapFailure("mongodb", "renew", lease.Key, err)
}

// renew writes the term's next entry, with a new expiry and the value: a
// candidate that judged the term over writes the same slot, and only one
// of the two inserts succeeds.
func (p *Provider) renew(ctx context.Context, lease providers.Lease) (providers.Lease, error) {
	if err := limits.CheckRenew(lease); err != nil {
		return providers.Lease{}, err
	}
	tb, err := p.timeBase(ctx)
	if err != nil {
		return providers.Lease{}, err
	}
	lost := providers.Wrap("mongodb", "renew", lease.Key, providers.ErrLost)
	slot, ok := p.lastSlot(lease)
	for range acquireAttempts {
		if !ok {
			if slot, err = p.termSlot(ctx, tb, lease, lost); err != nil {
				return providers.Lease{}, err
			}
		}
		e := entry{key: lease.Key, slot: slot + 1, token: int64(lease.Token), holder: lease.Holder, value: lease.Value, ttl: lease.TTL}
		rec, err := p.append(ctx, tb, e)
		switch {
		case err == nil:
			lease.Expires, lease.Value = rec.Expires, rec.Value
			return lease, nil
		case !errors.Is(err, errSlotTaken):
			return providers.Lease{}, err
		}
		ok = false // read where the log is now: a lost answer of our own, or the end of the term
	}
	return providers.Lease{}, lost
}

// termSlot reads the slot of the latest entry of lease.Key, which must be
// of lease's term; else it forgets the key and returns lost.
func (p *Provider) termSlot(ctx context.Context, tb timeBase, lease providers.Lease, lost error) (int64, error) {
	cur, found, err := tb.latest(ctx, p.coll, lease.Key)
	if err != nil {
		return 0, err
	}
	if !found || !ours(cur, lease) {
		p.forget(lease.Key)
		return 0, lost
	}
	return cur.Slot, nil
}

// Release writes an entry with the holder cleared and the expiry now when
// holder and token still match; the token and the value given carry on.
func (p *Provider) Release(ctx context.Context, lease providers.Lease) error {
	return providers.WrapFailure("mongodb", "release", lease.Key, p.release(ctx, lease))
}

func (p *Provider) release(ctx context.Context, lease providers.Lease) error {
	if err := limits.CheckHeld(lease); err != nil {
		return err
	}
	tb, err := p.timeBase(ctx)
	if err != nil {
		return err
	}
	lost := providers.Wrap("mongodb", "release", lease.Key, providers.ErrLost)
	slot, ok := p.lastSlot(lease)
	for range acquireAttempts {
		if !ok {
			if slot, err = p.termSlot(ctx, tb, lease, lost); err != nil {
				return err
			}
		}
		e := entry{key: lease.Key, slot: slot + 1, token: int64(lease.Token), value: lease.Value}
		_, failed := p.bulk(ctx, tb, []mongo.WriteModel{tb.insert(e)})
		switch err := failed[0]; {
		case err == nil:
			// Not confirmed: a release that landed in a cleaned-up slot
			// changes no one's term.
			p.forget(lease.Key)
			p.wrote(ctx, e)
			return nil
		case !mongo.IsDuplicateKeyError(err):
			return err
		}
		ok = false
	}
	return lost
}

// Observe returns the record of key; Holder is "" when the lease is free or
// expired.
func (p *Provider) Observe(ctx context.Context, key string) (providers.Lease, error) {
	tb, err := p.timeBase(ctx)
	if err != nil {
		return providers.Lease{}, providers.Wrap("mongodb", "observe", key, err)
	}
	rec, found, err := tb.latest(ctx, p.coll, key)
	if err != nil {
		return providers.Lease{}, providers.Wrap("mongodb", "observe", key, err)
	}
	if !found {
		return providers.Lease{Key: key}, nil
	}
	l := leaseOf(key, rec)
	if rec.Expired {
		l.Holder = ""
	}
	return l, nil
}

// Close disconnects the client. It is safe to call more than once.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.closeErr = p.client.Disconnect(ctx)
	})
	return p.closeErr
}
