package mongodb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.mongodb.org/mongo-driver/bson"
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
	}, nil
}

func checkLease(key, holder string, ttl time.Duration) error {
	return limits.Check(key, holder, ttl)
}

func leaseOf(key string, rec record) providers.Lease {
	return providers.Lease{Key: key, Holder: rec.Holder, Token: uint64(rec.Token), Expires: rec.Expires, Value: rec.Value}
}

var upsertAfter = options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)

// Acquire starts a new term on key for holder when the lease is free,
// expired or already held by holder.
func (p *Provider) Acquire(ctx context.Context, key, holder string, ttl time.Duration) (providers.Lease, error) {
	return p.AcquireAbove(ctx, providers.AcquireRequest{Key: key, Holder: holder, TTL: ttl})
}

var _ providers.FloorAcquirer = (*Provider)(nil)

// AcquireAbove is Acquire with a token above req.Floor.
func (p *Provider) AcquireAbove(ctx context.Context, req providers.AcquireRequest) (providers.Lease, error) {
	l, err := p.acquire(ctx, req.Key, req.Holder, req.TTL)
	if err == nil {
		l, err = p.raise(ctx, l, req.Floor)
	}
	if err != nil && !errors.Is(err, providers.ErrHeld) {
		return providers.Lease{}, fmt.Errorf("mongodb: acquire %q: %w", req.Key, err)
	}
	return l, err
}

// raise lifts the token of a term just won to floor + 1 when it is not
// above floor (the store lost writes that its caller saw). It is a second
// write, guarded by holder and token: the term is the caller's, unused
// until it returns, and FerretDB (the clientTime path) has no update
// pipelines to do it in the acquire's own statement.
func (p *Provider) raise(ctx context.Context, l providers.Lease, floor uint64) (providers.Lease, error) {
	if l.Token > floor {
		return l, nil
	}
	res, err := p.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: l.Key}, {Key: "holder", Value: l.Holder}, {Key: "token", Value: int64(l.Token)}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "token", Value: int64(floor + 1)}}}})
	switch {
	case err != nil:
		return providers.Lease{}, fmt.Errorf("raise the token above %d: %w", floor, err)
	case res.MatchedCount == 0:
		return providers.Lease{}, fmt.Errorf("raise the token above %d: the term was lost meanwhile", floor)
	}
	l.Token = floor + 1
	return l, nil
}

func (p *Provider) acquire(ctx context.Context, key, holder string, ttl time.Duration) (providers.Lease, error) {
	if err := checkLease(key, holder, ttl); err != nil {
		return providers.Lease{}, err
	}
	tb, err := p.timeBase(ctx)
	if err != nil {
		return providers.Lease{}, err
	}
	var lastErr error
	for range acquireAttempts {
		rec, err := acquireDoc(ctx, p.coll, tb, key, holder, ttl)
		if err == nil {
			l := leaseOf(key, rec)
			l.TTL = ttl
			return l, nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return providers.Lease{}, err
		}
		// The filter matched nothing and the upsert's insert met the
		// existing document: someone holds it, unless it was freed since.
		cur, expired, found, err := tb.read(ctx, p.coll, key)
		if err != nil {
			return providers.Lease{}, err
		}
		if found && cur.Holder != "" && !expired {
			return providers.Lease{}, heldError(key, cur)
		}
		lastErr = errors.New("lease changed hands during acquire")
	}
	return providers.Lease{}, fmt.Errorf("gave up after %d attempts: %w", acquireAttempts, lastErr)
}

func acquireDoc(ctx context.Context, coll *mongo.Collection, tb timeBase, key any, holder string, ttl time.Duration) (record, error) {
	filter, update := tb.acquire(key, holder, ttl)
	var rec record
	err := coll.FindOneAndUpdate(ctx, filter, update, upsertAfter).Decode(&rec)
	return rec, err
}

// heldError reports rec, read and judged as held by read or readMany.
// Remaining is expires - now by the clock that judged it: on the $$NOW path
// the server's, in the same aggregation that found the lease held.
func heldError(key string, rec record) *providers.HeldError {
	return &providers.HeldError{Key: key, Holder: rec.Holder, Token: uint64(rec.Token), Expires: rec.Expires, Remaining: rec.left()}
}

var returnAfter = options.FindOneAndUpdate().SetReturnDocument(options.After)

// Renew pushes the expiry out by lease.TTL and stores lease.Value when
// holder and token still match. An expired lease that nobody took may be
// renewed, as the contract says.
func (p *Provider) Renew(ctx context.Context, lease providers.Lease) (providers.Lease, error) {
	l, err := p.renew(ctx, lease)
	if err != nil && !errors.Is(err, providers.ErrLost) {
		return providers.Lease{}, fmt.Errorf("mongodb: renew %q: %w", lease.Key, err)
	}
	return l, err
}

func (p *Provider) renew(ctx context.Context, lease providers.Lease) (providers.Lease, error) {
	if err := checkLease(lease.Key, lease.Holder, lease.TTL); err != nil {
		return providers.Lease{}, err
	}
	if err := providers.CheckValue(lease.Value); err != nil {
		return providers.Lease{}, err
	}
	tb, err := p.timeBase(ctx)
	if err != nil {
		return providers.Lease{}, err
	}
	var rec record
	err = p.coll.FindOneAndUpdate(ctx, matchTerm(lease), tb.renew(lease.TTL, lease.Value), returnAfter).Decode(&rec)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return providers.Lease{}, fmt.Errorf("mongodb: renew %q: %w", lease.Key, providers.ErrLost)
	}
	if err != nil {
		return providers.Lease{}, err
	}
	lease.Expires, lease.Value = rec.Expires, rec.Value
	return lease, nil
}

// Release clears the holder and sets the expiry to now when holder and
// token still match; the token, the value given and the document stay.
func (p *Provider) Release(ctx context.Context, lease providers.Lease) error {
	err := p.release(ctx, lease)
	if err != nil && !errors.Is(err, providers.ErrLost) {
		return fmt.Errorf("mongodb: release %q: %w", lease.Key, err)
	}
	return err
}

func (p *Provider) release(ctx context.Context, lease providers.Lease) error {
	if lease.Key == "" || lease.Holder == "" {
		return errors.New("key and holder must not be empty")
	}
	if err := providers.CheckValue(lease.Value); err != nil {
		return err
	}
	tb, err := p.timeBase(ctx)
	if err != nil {
		return err
	}
	res, err := p.coll.UpdateOne(ctx, matchTerm(lease), tb.release(lease.Value))
	if err != nil {
		return err
	}
	if res.MatchedCount == 0 {
		return fmt.Errorf("mongodb: release %q: %w", lease.Key, providers.ErrLost)
	}
	return nil
}

func matchTerm(l providers.Lease) bson.D {
	return bson.D{{Key: "_id", Value: l.Key}, {Key: "holder", Value: l.Holder}, {Key: "token", Value: int64(l.Token)}}
}

// Observe returns the record of key; Holder is "" when the lease is free or
// expired.
func (p *Provider) Observe(ctx context.Context, key string) (providers.Lease, error) {
	tb, err := p.timeBase(ctx)
	if err != nil {
		return providers.Lease{}, fmt.Errorf("mongodb: observe %q: %w", key, err)
	}
	rec, expired, found, err := tb.read(ctx, p.coll, key)
	if err != nil {
		return providers.Lease{}, fmt.Errorf("mongodb: observe %q: %w", key, err)
	}
	if !found {
		return providers.Lease{Key: key}, nil
	}
	l := leaseOf(key, rec)
	if expired {
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
