// Package etcd is the lease store on an etcd cluster (v3 API; tested against
// etcd 3.4 with the v3.7 Go client).
//
// Each job key has two etcd keys under the provider's prefix:
//
//	<prefix><key>          the lease key: {"holder","token","ttl"}, attached
//	                       to the holder's session for that ttl. It exists
//	                       exactly while the lease is held; etcd deletes it
//	                       when the session expires, and Release deletes it.
//	<prefix><key>/record   the record: {"holder","token","value"}, no etcd
//	                       lease, never deleted. It keeps the last token and
//	                       the Value across releases, expiries and restarts.
//
// Job names cannot hold "/" (config), and the provider refuses keys that do,
// so one key's record can never be another key's lease key.
//
// Arbitration: every write is one etcd transaction guarded by the
// ModRevision of both keys as they were read, so of several racing clients
// exactly one commits and the others re-read and see the winner. Acquire
// succeeds when the lease key is absent (never held, released, or deleted by
// etcd at expiry) or names the caller. The fencing token is a per-key counter
// in the record, written as record.token+1 by the winning transaction: it
// grows by exactly one per term, as the contract asks, and never goes back
// because the record is never deleted and etcd keeps it on disk through
// restarts. (A global etcd revision would also only grow, but it jumps by
// every write to any key, and the contract wants previous+1.)
//
// Time: expiry is judged by etcd's lessor on the etcd leader, never by the
// agent's clock. A ttl becomes an etcd lease of ceil(ttl) whole seconds; etcd
// raises a shorter lease to its minimum, ceil(1.5 × election timeout) = 2 s
// with default settings. The granted lease is thus never shorter than ttl,
// and it starts when etcd grants or refreshes it, after the agent sent the
// request at t: the key lives at least until t + ttl, later than the agent's
// own deadline t + ttl*0.99. etcd may keep a lease longer, never shorter: the
// expired-lease sweep runs every 500 ms, and a new etcd leader (or a restarted
// single member) gives every lease its full ttl again. A candidate whose
// reads of LeaseTimeToLive prove the holder's lease expired (expired.go)
// revokes it, as the sweep would a little later; while a candidate waits
// for a lease that may be in its last second, a prober goroutine per etcd
// lease reads it every 10 ms, so the proof comes within 10 ms (and a 20 ms
// margin) of the lease's end.
//
// Sessions (session.go): the lease keys of all the terms a Provider holds
// with one ttl are attached to one etcd lease, its session for that ttl, as
// etcd's concurrency.Session does for elections. One keep-alive renews them
// all: with a lease per term, 10,000 jobs cost etcd 10,000 keep-alives per
// renewal period, most of its CPU. Only this Provider writes keys with its
// sessions' ids, so refreshing a session extends this process's own terms
// and never another holder's. A new term goes on the session after a
// refresh sent at or after the operation began, so etcd keeps it at least
// ttl from then (the timing rule); a burst of Acquires shares that refresh.
// A session that expired is replaced by a new grant. Close revokes the
// sessions, so no key of a stopped process outlives it.
//
// Renew checks holder and token in the record and refreshes the term's
// session with one keep-alive; a term that expired and was not taken moves
// to the live session in a guarded transaction. Release deletes the lease
// key and clears the holder in the record in one transaction; the session
// stays. A key that must not stay on a session but could not be released
// (a failed Release, a write whose outcome is unknown) would no longer
// expire by itself while the other terms keep the session alive, so the
// provider remembers it and releases it beside the next RenewMany.
//
// The provider implements providers.Batcher. RenewMany (batch.go)
// renews the terms it wrote, as it wrote them, without reading their keys:
// one LeaseTimeToLive with the attached keys per session shows them still
// attached, and one keep-alive per session renews them (held.go). The
// others it checks in transactions of 64 keys, as Renew checks one. Renewing
// 10,000 jobs costs 2 requests, not 20,000.
//
// AcquireMany and ReleaseMany read
// and write in transactions of 64 keys the same way (acquiremany.go); every
// new term goes on the session, one keep-alive per batch. Their HeldErrors
// carry no Expires or Remaining, which would cost a LeaseTimeToLive per held
// key.
//
// HeldError.Remaining from Acquire is etcd's LeaseTimeToLive, whole seconds
// truncated, + 1 s: never shorter than etcd's own, and free, as Acquire asks
// it for Expires anyway. A candidate subscribed with Notify hears the key's
// deletion first.
//
// The provider implements providers.Notifier with one etcd watch on the
// whole prefix, calling changed(key) for every put or delete of a lease key
// (acquire, release, and the delete at a term's expiry), so a waiting
// candidate hears of a release or expiry within milliseconds, and
// changed("") after a watch that etcd ended (compaction, no leader) was
// opened again.
//
// Open does no I/O: the client connects (and authenticates, when a username
// is set) on first use, so an agent started while etcd is down keeps running
// and reports errors per operation.
//
// # Verified here
//
//	scripts/services.sh etcd   # installs etcd-server and etcd-client when etcd is missing
//	go test -count=1 -v ./providers/etcd/...
//
// Every test starts its own etcd 3.4 (`internal/teststore.StartEtcd`: data in a temp dir, free client
// and peer ports on 127.0.0.1, ready when `/health` says true). `TestEtcd` shares one server between the
// conformance suite (`providertest.Run`, 20 clients × 50 racing rounds, `ShortTTL` 2 s, Notifier,
// RenewMany), `GrantedTTL`, `ExpiryNotEarly`, `RenewOtherTTL`, `Handover`, `Remaining` (a refused
// Acquire's `Remaining`, waited out, then the lease taken), `Notify` (acquire, release, expiry and batch
// writes heard; a Value write and another prefix not) and `NotifyCompacted` (`changed("")` and a working
// watch after its revision was compacted); `TestRestart`, `TestAuth`, the `TestRenewMany*` tests and
// `TestAcquireReleaseManyRequests` start their own, as do the session tests (`TestSessionShared`: one
// etcd lease per provider and ttl, never shared with another provider; `TestAbandonedReleaseSwept`;
// `TestCloseRevokesSessions`; `TestSessionExpiredRenewed`); the suite's `BatchStoreDown` case checks that every
// batch item fails, without a verdict, when etcd is unreachable, and `TestNotifyDown` that `Notify` does. The package's tests take
// about 55 s, much of it the suite's store-down case (four 5 s deadlines against a closed port) and the
// wait for a session to expire.
//
// The figures of docs/providers/etcd.md come from TestRestart (the token
// through a SIGKILL and restart), TestEtcd/ExpiryNotEarly, TestAcquireAfterSeenRelease
// (one transaction, no read or grant, counted on etcd's /metrics),
// TestEtcd/NotifyCompacted, TestChain (the cases of the expiry proof),
// TestCrashTakeover, TestProbeRevokes, TestLiveLeaseNotRevoked and
// TestLiveLeaseOftenRenewedNotRevoked (go test -count=1 -run
// 'TestCrashTakeover|TestProbeRevokes|TestLiveLease|TestChain' -v ./providers/etcd/),
// TestAcquireReleaseManyRequests, TestRenewManyRequests and
// TestRenewManyLowMaxTxnOps.
package etcd
