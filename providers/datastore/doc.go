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
//
// # Verified
//
// All against the official Datastore emulator of the machine image (Cloud SDK 528.0.0, Java 17), started by
// the tests themselves (`internal/teststore.StartDatastore`: `java -cp CloudDatastore.jar
// com.google.cloud.datastore.emulator.CloudDatastore start --testing` on a free loopback port, ready when
// `GET /` answers `Ok`, about 2 s). One emulator serves the whole test binary; every test uses a fresh
// namespace.
//
//	  go test -count=1 -v ./providers/datastore/...
//
//	- `TestConformance`: the provider conformance suite (`providertest.Run`), every case: 50 races of 20
//	  clients (each with exactly one winner and 19 `HeldError`s naming it, about 4 s), exclusivity, new
//	  terms on re-acquire, renew, renew after loss, renew after an expiry nobody took, release, expiry
//	  (with a 3 s ttl, as the suite waits 1.5·ttl + 200 ms and expiry is judged 1 s late), tokens across
//	  release, expiry and a restarted client, independent keys, observe, values, cancelled contexts, store
//	  down (a closed port: every operation fails in about 0.6 s).
//	- `TestOpenRejects`: settings of another type, no project, a reserved kind, a bad namespace, a missing
//	  credentials file and one of an unexpected type each stop Open with an error.
//	- `TestEntity`: the entity layout above, read back with the plain client.
//	- `TestClockSkewBound`: the safety bound above.
//	- `TestStoreFailures`: an emulator of its own frozen with SIGSTOP (Renew fails at its 1 s deadline),
//	  thawed (Renew succeeds), killed (Renew fails with connection refused).
//	- `TestHandover`: the figures above.
//	- `TestRemaining`: a refused Acquire's `Remaining`, waited out, then the lease taken.
//	- the conformance suite's `Batch` case: `AcquireMany` of 122 (held by another, the caller's own, released with a value, new
//	  keys, a repeat, a reserved name), then `RenewMany` and `ReleaseMany` with a lost lease and one
//	  already released; transactions fall back to 25 entities on the emulator.
//	- the conformance suite's `BatchStoreDown` case: every batch item fails, without a verdict, against a closed port.
//	- `Example`: two nodes, a refusal naming the holder, a release and a takeover with the next token and
//	  the carried value.
//
// The whole package runs in about 25 s.
//
// Not verified here: production Datastore (no project or credentials on these machines), so its
// pessimistic locking, IAM and the credentials paths other than the emulator's are exercised only as the
// client library exercises them.
//
// TestClockSkewBound plays a candidate whose clock is ahead, at the bound less
// 50 ms and more 800 ms; TestRemaining waits out a refusal's Remaining;
// The suite's Batch case measures a batch of 122.
package datastore
