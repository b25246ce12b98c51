// Package mongodb is the lease store on a MongoDB collection (driver
// go.mongodb.org/mongo-driver v1).
//
// Each lease is one document whose _id is the job key, so the unique _id
// index is the arbiter: Acquire is one findAndModify with upsert whose
// filter matches only a free, expired or own lease. When the lease is held
// by another the filter matches nothing, the upsert's insert collides with
// the existing _id, and the duplicate-key error becomes a *HeldError. Renew
// and Release match on holder and token; Release clears the holder and
// keeps the token and the document, so fencing tokens survive releases and
// restarts. Writes use write concern "majority" unless the settings say
// otherwise.
//
// Time: on MongoDB 4.2 and later every expiry is computed and compared on
// the server with $$NOW in update pipelines and $expr, so the agents'
// clocks do not matter. Servers without pipeline updates (FerretDB v1,
// MongoDB before 4.2) get the same operations with the expiry computed
// from the calling agent's clock; which of the two is used is decided once
// per Provider by trying a pipeline update on a scratch document whose _id
// is not a string (so it can never be a lease), and a fallback is logged
// as a warning.
//
// HeldError.Remaining is expires minus now by the clock that judges expiry:
// on the $$NOW path computed on the server in the aggregation that finds
// the lease held; on the fallback path by this agent's clock, as that path
// judges expiry.
//
// AcquireMany, RenewMany and ReleaseMany (batch.go) take a constant number
// of requests: reads of all the records with $in around one unordered bulk
// write of the single operations' own updates (Acquire's pinned to the
// token and Value read, so the new token is known without a document back).
// Bulk requests carry at most 1,000 writes, 64 on the fallback path, since
// FerretDB v1.24 never answers an update command of 100 statements.
//
// MongoDB has no cheap notification for one document without a replica
// set's change streams, so the provider does not implement
// providers.Notifier: waiting candidates poll every retry_every.
package mongodb
