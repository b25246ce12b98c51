// Package mongodb is the lease store on a MongoDB collection (driver
// go.mongodb.org/mongo-driver v1).
//
// Each job key has a log of documents written once and never changed: an
// entry per acquire, renewal and release, whose _id is {k: key, s: slot}.
// The newest entry is the lease's state. Every write is an insert of the
// slot after the newest entry read, so the unique _id index, which every
// MongoDB-compatible server enforces, is the only arbiter: of writers that
// read the same entry (candidates, or a candidate and the holder renewing)
// exactly one inserts the next slot, and the others collide
// (duplicate key) and read again. Nothing rests on the atomicity of an
// update, which FerretDB v1, for one, does not give. Acquire and Renew read
// the newest entry again after writing and take the term only when it is
// theirs: an insert can land in a slot that the clean-up (slots.go) freed,
// behind the log's end. Tokens grow by one per acquire and the value is
// carried from entry to entry; the newest two entries are never deleted. A
// document of the design before the log (_id the key) is slot 0 of its key.
// Writes use write concern "majority" unless the settings say otherwise.
//
// Time: on MongoDB 4.2 and later every expiry is computed and compared on
// the server with $$NOW (an upsert with an update pipeline that can only
// insert, and an aggregation), so the agents' clocks do not matter. Servers without pipeline updates (FerretDB v1,
// MongoDB before 4.2) get the same operations with the expiry computed
// from the calling agent's clock; which of the two is used is decided once
// per Provider by trying the pipeline upsert on a scratch document whose
// _id is no entry's, and a fallback is logged as a warning.
//
// HeldError.Remaining is expires minus now by the clock that judges expiry:
// on the $$NOW path computed on the server in the aggregation that finds
// the lease held; on the fallback path by this agent's clock, as that path
// judges expiry.
//
// AcquireMany, RenewMany and ReleaseMany (batch.go) take a constant number
// of requests: reads of the newest entries with $in around one unordered
// bulk insert of the single operations' own entries.
// Bulk requests carry at most 1,000 writes, 64 on the fallback path, since
// FerretDB v1.24 never answers an update command of 100 statements.
//
// MongoDB has no cheap notification for one document without a replica
// set's change streams, so the provider does not implement
// providers.Notifier: waiting candidates poll every retry_every.
package mongodb
