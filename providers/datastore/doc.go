// Package datastore is the lease store on Google Cloud Datastore (Firestore
// in Datastore mode), through cloud.google.com/go/datastore.
//
// Each job is one entity of the configured kind (default ElectdLease) in the
// configured namespace, key name = job key, with properties holder, token,
// expires and value. The entity is never deleted, so fencing tokens survive
// releases and restarts. Every Acquire, Renew and Release is one transaction
// (read, decide, write); Datastore serialises transactions on an entity: of
// those that race, one commits and the others wait for it or are aborted and
// run again by the client library, so they read the winner and answer
// *providers.HeldError or providers.ErrLost. Candidates polling a held lease answer from a plain
// strongly consistent read and start no transaction.
//
// Time: a transaction has no server clock to read (the Go client does not
// surface Datastore's read and commit times, and the emulator sets none), so
// expiry is judged on wall clocks. A writer stores expires = its clock at the
// start of the transaction + ttl; a candidate takes the lease only when its
// own clock, read before the entity, is ClockSkew (1s) past that. Since the
// agent's deadline runs from the send time of its renew for 99% of ttl, no
// two nodes lead at once as long as a candidate's wall clock is ahead of the
// holder's by less than ClockSkew + 1% of ttl (1.15s at the default 15s ttl).
// A clock behind only delays takeover. docs/providers/datastore.md has the
// derivation.
//
// HeldError.Remaining is what that judgement gives: expires + ClockSkew
// minus this node's clock, read before the entity, as expiry is judged here.
//
// AcquireMany, RenewMany and ReleaseMany (batch.go) use multi-entity
// transactions of up to 500 entities (Firestore in Datastore mode), or of 25
// once the store refuses more than 25 entity groups in one transaction (the
// emulator, legacy Datastore), each entity judged as the single operation
// judges it; AcquireMany first refuses held leases from one plain lookup.
//
// Datastore cannot notify: the provider does not implement
// providers.Notifier, and candidates poll every retry_every.
//
// DATASTORE_EMULATOR_HOST, when set, points the provider at an emulator
// without credentials, as it does the client library.
package datastore
