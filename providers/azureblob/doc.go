// Package azureblob is the lease store on Azure Blob Storage (provider type
// azure_blob): one block blob per job in one container, leadership being an
// Azure blob lease.
//
// The blob lease is the arbiter. Azure grants a lease to one lease id at a
// time and expires it by the storage service's clock, so expiry never depends
// on the agents' clocks; lease durations are whole seconds from 15 to 60,
// which bounds a job's ttl. The lease id is derived from holder and key (a
// UUID version 5), so a holder that restarts gets its own lease back at once
// instead of waiting out the ttl.
//
// The fencing token, the holder and Lease.Value live in the blob's metadata.
// Every metadata write is made under the lease (x-ms-lease-id) and with
// If-Match on the ETag read just before, so two nodes racing after an expiry
// cannot both bump the token, and two processes that share a holder name
// (which then share the lease id) are told apart by the token. Lease
// operations do not change the ETag; metadata writes do.
//
// Azure has no change notification for a lease, so the provider does not
// implement providers.Notifier: waiting candidates poll every retry_every. A
// HeldError's Remaining is 0 (the store cannot say): Azure reports a lease's
// state and duration type, never its time left, and the expiry in the record
// is the holder's clock, which this provider never compares with its own.
// Nor does it batch (no providers.Batcher): every
// lease operation is one HTTP request on one blob (x-ms-lease-action), and
// the Blob Batch API carries only Delete Blob and Set Blob Tier.
//
// Open does no I/O: the container and the blobs are created by the first
// Acquire that needs them, so an agent started while storage is unreachable
// keeps running and reports errors per operation.
//
// # Verified
//
// On Azurite 3.35.0 (`--skipApiVersionCheck`: the SDK sends an API version newer than 3.35 knows),
// started per test run by `internal/teststore.StartAzurite`, which `scripts/services.sh` installs
// into `.cache/azurite`:
//
// go test -count=1 -v ./providers/azureblob/ takes about 27 s. What the tests check:
//
//   - `TestConformance`: the whole provider conformance suite (`providers/providertest`), with
//     `ShortTTL = 15s` (Azure's shortest lease), 20 clients racing 50 times, and a store that is down.
//   - `TestTTLRange`: 14 s, 0, 61 s and 15.5 s refused before any I/O; 15 s and 60 s accepted.
//   - `TestReturningHolder`: a restarted holder gets its lease back at once with the next token; the
//     previous process's Renew and Release return `ErrLost`.
//   - `TestLeaseIsTheTruth`: a lease taken without a record refuses candidates; a broken lease ends
//     the term.
//   - `TestRenewChangesTTL`: a Renew with a longer TTL really extends the Azure lease.
//   - `TestKeysAreDistinctBlobs`, `TestNewSettings`, `TestSASToken`, `TestStoreRestart`,
//     `TestHandover`, and `Example`.
//
// Not verified here: real Azure Storage, Azure RBAC, `DefaultAzureCredential`, accounts with a
// hierarchical namespace (Data Lake Gen2).
//
// TestSASToken runs every operation with a container SAS of exactly rwc;
// TestStoreRestart and TestLeaseIsTheTruth back the failure behaviour of
// docs/providers/azure_blob.md.
package azureblob
