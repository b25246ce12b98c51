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
//
// # What was verified where
//
// No MongoDB server can be installed on the machines this was built on (not in Debian; npm wrappers
// download it at run time). FerretDB v1.24.0 with its SQLite handler speaks the wire protocol and was
// used for everything it can show. `make test` builds it (`scripts/services.sh ferretdb`, below) and
// the tests start it themselves (`internal/teststore.StartFerretDB`).
//
//	| what | FerretDB v1.24.0 (every `make test`) | needs a real MongoDB (`ELECTD_TEST_MONGODB_URI`) |
//	| --- | --- | --- |
//	| path used | agent's clock (probe → NotImplemented, warning logged: `TestFerretDBProbe`) | `$$NOW` path chosen by the probe (`TestMongoDB/ServerClockDetected`) |
//	| the contract | the whole conformance suite `providertest.Run`, racing cases included (`TestFerretDB/*`) | the whole suite on both paths (`TestMongoDB/Conformance`, `TestMongoDB/ClientClockConformance`) |
//	| racing Acquires | `ConcurrentAcquire` (20 clients × 50 rounds, every other round on a released lease): **passed 100 runs in a row** (below); `TestFerretDBRacingAcquire` (8 clients × 20 rounds of each kind) | the same cases |
//	| log bounded, delayed write refused, pre-log documents | `TestLogBounded`, `TestLegacyDocument` | — |
//	| store restarted | `TestFerretDBRestart` | — |
//	| write concern `majority`, failover, retryable writes, MongoDB < 4.2 | — (FerretDB accepts `w: majority` and has no replica set) | not covered by any test here |
//
// The 100 runs of the race, each on a fresh FerretDB v1.24.0 (SQLite handler):
//
//	go test -timeout 90m -count=100 -run 'TestFerretDB$/^ConcurrentAcquire$' -v ./providers/mongodb/
//
// passed 100 of 100 (`ok ... 2515.783s`), each run 50 rounds of 20 racing clients in 13–53 s, on the
// shared 2-core machine at a load average of 21–26 (other engineers' tests running). Each round had
// exactly one winner, and on a released lease its token was the previous + 1.
//
// `TestMongoDB` is the one test of the project allowed to skip: without `ELECTD_TEST_MONGODB_URI` it
// skips with a message saying that the `$$NOW` path needs a real MongoDB. To run it, point the variable
// at a MongoDB 4.2+ replica set the tests may write to (they use database `electd_test` and drop their
// collections):
//
//	ELECTD_TEST_MONGODB_URI='mongodb://127.0.0.1:27017/?replicaSet=rs0' go test -count=1 -v ./providers/mongodb/
//
// **Not verified here: real MongoDB, Amazon DocumentDB, Azure Cosmos DB's MongoDB API, Percona Server
// for MongoDB.** None can run on this machine, so the `$$NOW` path (the pipeline upsert that inserts
// an entry, the `$$NOW` aggregation that reads one) has not been run against any server. The design
// asks of them only what they document: a unique `_id` index, and, for the `$$NOW` path, update
// pipelines (MongoDB 4.2+); a server without pipelines falls back to the agents' clocks, with the same
// arbitration.
//
// Run the package's tests (about 1 min; the FerretDB binary must have been built):
//
//	scripts/services.sh ferretdb
//	go test -count=1 -v ./providers/mongodb/
//
// # FerretDB for the tests
//
// `scripts/services.sh ferretdb` builds FerretDB v1.24.0 into `.cache/bin/ferretdb` with only the Go
// module proxy. `go install github.com/FerretDB/FerretDB/cmd/ferretdb@v1.24.0` does not work: it asks the
// proxy for the module's version list (a deprecation check), which proxy.golang.org refuses with 403
// "This module version is not available" (the version's own `.info`, `.mod` and `.zip` are served),
// and a binary built that way would panic at start for want of `build/version/version.txt`. The script
// runs `go mod download -json github.com/FerretDB/FerretDB@v1.24.0` outside any module, copies the
// module to a temporary directory, writes `v1.24.0` into `build/version/version.txt`, and builds
// `./cmd/ferretdb` there with FerretDB's own `go.mod` and `go.sum` (`GOTOOLCHAIN=local`), so none of
// FerretDB's dependencies enter electd's `go.mod`. Measured on a 2-core machine: 53 s with an empty
// module cache and an empty build cache; 1 min 52 s in the shared checkout while other builds ran.
// The binary is 45 MB. Tests start it with `--handler=sqlite --sqlite-url=file:DIR/data/
// --listen-addr=127.0.0.1:PORT --debug-addr=- --telemetry=disable` in a fresh temporary directory.
//
// TestLogBounded also writes an entry behind the log's end and checks that it
// is refused; TestBulkLimitFerretDB records FerretDB's limit on update
// commands, and the conformance suite's Batch case checks each verdict of 302 jobs.
package mongodb
