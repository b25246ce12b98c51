package azureblob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
)

// snapshot is one read of a lease blob: its record, and the store's view of
// the blob lease.
type snapshot struct {
	rec    record
	etag   azcore.ETag
	leased bool // an active lease (leased, or breaking and not yet broken)
	// stale: a lease is active but the record does not name a live holder,
	// that is, someone took the lease and has not written its record yet.
	stale bool
}

// errNoBlob: the key was never acquired (no blob, or no container).
var errNoBlob = errors.New("the lease blob does not exist")

// read fetches the blob's properties. The container's or blob's absence is
// errNoBlob.
func (p *Provider) read(ctx context.Context, b *blockblob.Client) (snapshot, error) {
	props, err := b.GetProperties(ctx, nil)
	if bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) {
		return snapshot{}, errNoBlob
	}
	if err != nil {
		return snapshot{}, err
	}
	rec, err := parseRecord(props.Metadata)
	if err != nil {
		return snapshot{}, err
	}
	s := snapshot{rec: rec}
	if props.ETag != nil {
		s.etag = *props.ETag
	}
	if props.LeaseState != nil {
		st := *props.LeaseState
		s.leased = st == lease.StateTypeLeased || st == lease.StateTypeBreaking
	}
	if s.leased {
		// Both times are the store's clock (whole seconds). A record whose
		// last write is a ttl old cannot belong to the active lease: its
		// own lease, taken or renewed before that write, has run out.
		s.stale = rec.holder == ""
		if props.Date != nil && props.LastModified != nil && rec.ttl > 0 {
			s.stale = s.stale || !props.Date.Before(props.LastModified.Add(rec.ttl-time.Second))
		}
	}
	return s, nil
}

// settle reads the blob until its record names the holder of the active
// lease, or for at most settleWithin. A new holder writes its record a round
// trip after taking the lease; a candidate refused in that gap would
// otherwise be told the previous (or no) holder. After settleWithin the last
// read is returned as it is: the lease, not the record, decides who may
// write, so a stale name is a reporting gap, never a safety one.
func (p *Provider) settle(ctx context.Context, b *blockblob.Client) (snapshot, error) {
	deadline := time.Now().Add(settleWithin)
	pause := 10 * time.Millisecond
	for {
		s, err := p.read(ctx, b)
		if err != nil || !s.stale || time.Now().After(deadline) {
			return s, err
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return snapshot{}, ctx.Err()
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
}

const settleWithin = 2 * time.Second

// write replaces the blob's metadata with rec, only if the blob is
// unchanged since etag and, when leaseID is set, only under that lease.
func write(ctx context.Context, b *blockblob.Client, rec record, etag azcore.ETag, leaseID string) error {
	ac := &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &etag}}
	if leaseID != "" {
		ac.LeaseAccessConditions = &blob.LeaseAccessConditions{LeaseID: &leaseID}
	}
	_, err := b.SetMetadata(ctx, rec.metadata(), &blob.SetMetadataOptions{AccessConditions: ac})
	return err
}

// create makes an empty lease blob, and its container when that is missing.
// If-None-Match: * makes it a no-op on a blob that exists: an overwrite would
// wipe the token.
func (p *Provider) create(ctx context.Context, b *blockblob.Client) error {
	anyTag := azcore.ETagAny
	opts := &blockblob.UploadOptions{AccessConditions: &blob.AccessConditions{
		ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: &anyTag},
	}}
	upload := func() error {
		_, err := b.Upload(ctx, streaming.NopCloser(bytes.NewReader(nil)), opts)
		if bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet, bloberror.LeaseIDMissing) {
			return nil // another node created it first
		}
		return err
	}
	err := upload()
	if bloberror.HasCode(err, bloberror.ContainerNotFound) {
		if err := p.ensureContainer(ctx); err != nil {
			return err
		}
		err = upload()
	}
	if err != nil {
		return fmt.Errorf("create blob: %w", err)
	}
	return nil
}

// isHeld: another lease is active, so Acquire is refused.
func isHeld(err error) bool {
	return bloberror.HasCode(err, bloberror.LeaseAlreadyPresent, bloberror.LeaseIsBreakingAndCannotBeAcquired)
}

// notOurs: the caller's lease id is not the active lease (another is, or
// none is).
func notOurs(err error) bool {
	return bloberror.HasCode(err,
		bloberror.LeaseIDMismatchWithLeaseOperation, bloberror.LeaseIDMismatchWithBlobOperation,
		bloberror.LeaseNotPresentWithLeaseOperation, bloberror.LeaseNotPresentWithBlobOperation,
		bloberror.LeaseIsBrokenAndCannotBeRenewed, bloberror.LeaseIsBreakingAndCannotBeChanged,
		bloberror.LeaseLost, bloberror.LeaseIDMissing)
}
