package azureblob

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"

	"github.com/electd/electd/providers"
)

// attempts bounds the loops that start over when the blob changed between a
// read and a conditional write, or the lease changed hands mid-acquire.
const attempts = 5

// clients returns the blob of key and a lease client holding holder's lease
// id on it.
func (p *Provider) clients(key, holder string) (*blockblob.Client, *lease.BlobClient, string, error) {
	b := p.c.NewBlockBlobClient(blobName(key))
	id := leaseID(holder, key)
	lc, err := lease.NewBlobClient(b, &lease.BlobClientOptions{LeaseID: &id})
	return b, lc, id, err
}

// Acquire takes the blob lease of key for holder and starts a new term: the
// token in the record goes up by one, written under the new lease. The lease
// is free when Azure says so (never taken, released, expired by the storage
// service's clock, broken); a holder that already has it proposes the same
// lease id, gets it back with a fresh duration, and a new term too.
// The new term's token is above req.Floor too.
func (p *Provider) Acquire(ctx context.Context, req providers.AcquireRequest) (providers.Lease, error) {
	l, err := p.acquire(ctx, req.Key, req.Holder, req.TTL, req.Floor)
	if err != nil {
		return providers.Lease{}, providers.Wrap("azureblob", "acquire", req.Key, err)
	}
	return l, nil
}

func (p *Provider) acquire(ctx context.Context, key, holder string, ttl time.Duration, floor uint64) (providers.Lease, error) {
	if err := limits.CheckKey(key); err != nil {
		return providers.Lease{}, err
	}
	if err := limits.CheckHolder(holder); err != nil {
		return providers.Lease{}, err
	}
	if err := CheckTTL(ttl); err != nil {
		return providers.Lease{}, err
	}
	b, lc, id, err := p.clients(key, holder)
	if err != nil {
		return providers.Lease{}, err
	}
	for range attempts {
		start := time.Now()
		_, err := lc.AcquireLease(ctx, int32(ttl/time.Second), nil)
		switch {
		case bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound):
			if err := p.create(ctx, b); err != nil {
				return providers.Lease{}, err
			}
			continue
		case isHeld(err):
			s, err := p.settle(ctx, b)
			if err != nil {
				return providers.Lease{}, fmt.Errorf("read holder: %w", err)
			}
			if !s.leased {
				continue // released or expired since
			}
			// Remaining stays 0: Azure tells a lease's state, not its time
			// left, and s.rec.expires is the holder's clock, which only
			// another clock could measure against.
			return providers.Lease{}, &providers.HeldError{Key: key, Holder: s.rec.holder, Token: s.rec.token, Expires: s.rec.expires}
		case err != nil:
			return providers.Lease{}, fmt.Errorf("take lease: %w", err)
		}
		l, err := p.startTerm(ctx, b, id, key, holder, ttl, floor, start)
		if notOurs(err) {
			// The lease ran out and was taken between AcquireLease and the
			// write (a pause longer than the ttl): start over.
			continue
		}
		return l, err
	}
	return providers.Lease{}, fmt.Errorf("the lease changed hands %d times while acquiring it", attempts)
}

// startTerm writes the new term's record under the lease just taken. The
// If-Match on the ETag read just before stops a second writer holding the
// same lease id (the same holder name in another process) from bumping the
// token from the same value: it re-reads and bumps again.
func (p *Provider) startTerm(ctx context.Context, b *blockblob.Client, id, key, holder string, ttl time.Duration, floor uint64, start time.Time) (providers.Lease, error) {
	for range attempts {
		s, err := p.read(ctx, b)
		if err != nil {
			return providers.Lease{}, fmt.Errorf("read record: %w", err)
		}
		rec := record{holder: holder, token: providers.NextToken(s.rec.token, floor), value: s.rec.value, ttl: ttl, expires: start.Add(ttl)}
		err = write(ctx, b, rec, s.etag, id)
		if bloberror.HasCode(err, bloberror.ConditionNotMet) {
			continue
		}
		if err != nil {
			return providers.Lease{}, fmt.Errorf("write record: %w", err)
		}
		return providers.Lease{Key: key, Holder: holder, Token: rec.token, TTL: ttl, Expires: rec.expires, Value: s.rec.value}, nil
	}
	return providers.Lease{}, fmt.Errorf("write record: the record changed %d times under our lease", attempts)
}

// Renew renews the blob lease and stores l.Value, when the record still
// names l's holder and token. Azure renews a lease that expired as long as
// nobody took it since, which is what the provider contract (providers.Provider) asks.
func (p *Provider) Renew(ctx context.Context, l providers.Lease) (providers.Lease, error) {
	r, err := p.renew(ctx, l)
	if err != nil {
		return providers.Lease{}, providers.Wrap("azureblob", "renew", l.Key, err)
	}
	return r, nil
}

func (p *Provider) renew(ctx context.Context, l providers.Lease) (providers.Lease, error) {
	if err := limits.CheckHeld(l); err != nil {
		return providers.Lease{}, err
	}
	if err := CheckTTL(l.TTL); err != nil {
		return providers.Lease{}, err
	}
	b, lc, id, err := p.clients(l.Key, l.Holder)
	if err != nil {
		return providers.Lease{}, err
	}
	for range attempts {
		s, err := p.read(ctx, b)
		if errors.Is(err, errNoBlob) {
			return providers.Lease{}, providers.ErrLost
		}
		if err != nil {
			return providers.Lease{}, fmt.Errorf("read record: %w", err)
		}
		if s.rec.holder != l.Holder || s.rec.token != l.Token {
			return providers.Lease{}, providers.ErrLost
		}
		start := time.Now()
		if _, err := lc.RenewLease(ctx, nil); notOurs(err) {
			return providers.Lease{}, providers.ErrLost
		} else if err != nil {
			return providers.Lease{}, fmt.Errorf("renew lease: %w", err)
		}
		if s.rec.ttl != l.TTL {
			// RenewLease keeps the duration the lease was taken with; Azure
			// sets a new one on an Acquire with the active lease's id.
			if _, err := lc.AcquireLease(ctx, int32(l.TTL/time.Second), nil); notOurs(err) || isHeld(err) {
				return providers.Lease{}, providers.ErrLost
			} else if err != nil {
				return providers.Lease{}, fmt.Errorf("change lease duration: %w", err)
			}
		}
		rec := s.rec
		rec.value, rec.ttl, rec.expires = l.Value, l.TTL, start.Add(l.TTL)
		err = write(ctx, b, rec, s.etag, id)
		switch {
		case bloberror.HasCode(err, bloberror.ConditionNotMet):
			continue // written since the read: check holder and token again
		case notOurs(err):
			return providers.Lease{}, providers.ErrLost
		case err != nil:
			return providers.Lease{}, fmt.Errorf("write record: %w", err)
		}
		r := l
		r.Expires = rec.expires
		return r, nil
	}
	return providers.Lease{}, fmt.Errorf("write record: the record changed %d times during the renewal", attempts)
}

// Release clears the holder in the record (token and l.Value kept), then
// releases the blob lease so a candidate need not wait out the ttl.
func (p *Provider) Release(ctx context.Context, l providers.Lease) error {
	if err := p.release(ctx, l); err != nil {
		return providers.Wrap("azureblob", "release", l.Key, err)
	}
	return nil
}

func (p *Provider) release(ctx context.Context, l providers.Lease) error {
	if err := limits.CheckHeld(l); err != nil {
		return err
	}
	b, lc, id, err := p.clients(l.Key, l.Holder)
	if err != nil {
		return err
	}
	for range attempts {
		s, err := p.read(ctx, b)
		if errors.Is(err, errNoBlob) {
			return providers.ErrLost
		}
		if err != nil {
			return fmt.Errorf("read record: %w", err)
		}
		if s.rec.holder != l.Holder || s.rec.token != l.Token {
			return providers.ErrLost
		}
		rec := s.rec
		rec.holder, rec.value, rec.expires = "", l.Value, time.Now()
		err = write(ctx, b, rec, s.etag, id)
		if bloberror.HasCode(err, bloberror.LeaseNotPresentWithBlobOperation) {
			// Our lease ran out and nobody took it: the record is still
			// ours. Written without a lease id, the write is refused if a
			// lease was taken since, and If-Match refuses it if the record
			// changed.
			err = write(ctx, b, rec, s.etag, "")
		}
		switch {
		case bloberror.HasCode(err, bloberror.ConditionNotMet):
			continue
		case notOurs(err):
			return providers.ErrLost
		case err != nil:
			return fmt.Errorf("write record: %w", err)
		}
		if _, err := lc.ReleaseLease(ctx, nil); err != nil && !notOurs(err) {
			p.log.Warn("lease record cleared but the blob lease was not released: candidates wait until it expires",
				"key", l.Key, "error", err)
			return fmt.Errorf("release lease: %w", err)
		}
		return nil
	}
	return fmt.Errorf("write record: the record changed %d times during the release", attempts)
}

// Observe reads the record of key. Holder is "" unless a blob lease is
// active: the lease, not the record, says whether the term is still running.
func (p *Provider) Observe(ctx context.Context, key string) (providers.Lease, error) {
	if err := limits.CheckKey(key); err != nil {
		return providers.Lease{}, providers.Wrap("azureblob", "observe", key, err)
	}
	s, err := p.settle(ctx, p.c.NewBlockBlobClient(blobName(key)))
	if errors.Is(err, errNoBlob) {
		return providers.Lease{Key: key}, nil
	}
	if err != nil {
		return providers.Lease{}, providers.Wrap("azureblob", "observe", key, err)
	}
	l := providers.Lease{Key: key, Token: s.rec.token, TTL: s.rec.ttl, Expires: s.rec.expires, Value: s.rec.value}
	if s.leased {
		l.Holder = s.rec.holder
	}
	return l, nil
}
