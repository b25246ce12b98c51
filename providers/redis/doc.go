// Package redis is the lease store on Redis: one server, or three or more
// independent servers under Redlock.
//
// Each lease is two keys. <prefix>lease:<key> is a hash that never expires:
// the holder of the latest term, the token counter and the carried Value, so
// tokens and Value survive expiry and release. <prefix>live:<key> exists, with
// a PX expiry, while that term is live: expiry is judged by Redis's own clock.
// Every operation is one Lua script, atomic on its server: Acquire succeeds
// when the live key is absent or the holder is the caller, and increments the
// token; Renew and Release compare holder and token; Release clears the holder
// and deletes the live key, keeping the hash. Acquire and Release PUBLISH on
// <prefix>notify:<key>, and the provider implements providers.Notifier with
// one PSUBSCRIBE <prefix>notify:* per server for every key, so a waiting
// candidate takes over in about a millisecond; changed("") is called after a
// lost subscription is back. Expiries
// are not notified (keyspace notifications would need a server-wide CONFIG
// SET); a refused Acquire's HeldError.Remaining is the live key's PTTL, read
// in the script that finds it held (under Redlock, the (N-quorum+1)-th
// longest of the agreeing servers': no candidate can win before it).
//
// AcquireMany, RenewMany and ReleaseMany pipeline the same scripts, one per
// lease, one round trip per server for each 512 leases, each lease judged
// as the single operation judges it (batch.go).
//
// With three or more addresses the same scripts run on every server and an
// operation succeeds only on a quorum (N/2+1) within the lease's validity,
// ttl - elapsed - (ttl*0.01 + 2ms), as in the Redlock algorithm. A failed
// Acquire releases what it took. A term's token is one the quorum agrees
// on, larger than every counter of the quorum, so tokens grow from term to
// term while the servers keep their data. Redlock's mutual exclusion rests
// on timing (clocks, pauses, delays): the token fences a stale leader only
// where the resource it writes checks the token. docs/providers/redis.md says
// what is and is not guaranteed.
//
// New does no I/O: an agent started while Redis is down keeps running and
// reports an error per operation.
//
// # Verified here, and how
//
// All tests start their own `redis-server` processes (`internal/teststore.StartRedis`: foreground, own
// process group, a free loopback port, no persistence unless asked) and stop them; the shared server on
// 6379 is not used. A missing `redis-server` fails the tests with a message to run
// `scripts/services.sh`.
//
//	go test -count=1 ./providers/redis/...        # about 10 s
//
//	| test | what it shows |
//	| --- | --- |
//	| `TestSingle`, `TestRedlock` | the conformance suite (`providertest.Run`) on one server and on three: exclusivity, 50 races of 20 clients with one winner, tokens, renew/release verdicts, expiry by the server's clock, Value, ctx, store down, Notify |
//	| `TestRedlockOneDown` | one of three killed: acquire, renew, refuse another, observe, `Notify`, release (heard), hand over with the next token and the value |
//	| `TestRedlockTwoDown` | two of three killed: Renew, Release, Acquire, Observe, `Notify` all return store errors |
//	| `TestRedlockHung`, `TestSingleHung` | SIGSTOPped servers: one of three hung costs a Renew or an Observe of a held term nothing (about 1 ms); a call a quorum cannot answer, or to the one server, ends after ttl/5 (1 s for the 5 s ttl of TestRedlockHung, 400 ms for the 2 s of TestSingleHung); a cancelled ctx returns at once |
//	| `TestRedlockMissedServerJoins`, `TestRedlockJoinNeedsTheTerm`, `TestJoinCountsAServerThatHasTheTerm` | a server that missed a term joins it at a renewal, or at once when the term is on one server only; never a term that does not exist or was released; one that has the term by the time it is asked (the Acquire's write landed after the renewal it refused) counts as joined |
//	| `TestRedlockServerLostData` | a server restarted empty, then another down: tokens keep growing (4, then 6, 7 after 3) |
//	| `TestRedlockTwoServersRestartedEmpty`, `TestRedlockNoTokenTwiceAfterRestarts` | two of three restarted empty: their quorum's low token is not kept, and the next token is above the third server's counter; with a term live on the third, a candidate whose floor is just below its token is told the term is held, rather than given its token a second time |
//	| `TestRedlockServerBehindCatchesUp` | a server whose counter is behind the others' joins the next term, its counter raised to the term's token |
//	| `TestServerRestart` | SIGKILL and restart of one server: without persistence tokens restart at 1; with `appendfsync always` the term, token and value survive |
//	| `TestACL` | every operation, the batches and `Notify` included, as the least-privileged ACL user above, on `db = 2`; a wrong password fails |
//	| `TestRemaining` | one server and three: a refused Acquire's `Remaining` is the `PTTL` (close to the ttl, falling with time, pushed out by a Renew); waiting it out, the candidate takes the lease |
//	| `TestSingle/Batch`, `TestRedlock/Batch` (the suite's `Batch` case) | one server and three: 1,202 acquisitions in one `AcquireMany` (held by another with a `Remaining`, the caller's own, released with a value, new keys, a repeat, an invalid key), then `RenewMany` and `ReleaseMany` with a lost lease, then another holder's batch with the next tokens |
//	| `TestSingle/BatchStoreDown`, `TestRedlock/BatchStoreDown`, `TestNotifyStoreDown` | servers down: every batch item and `Notify` fail with store errors |
//	| `TestRedlockBatchSplit`, `TestRedlockBatchServerLostData` | servers whose counters disagree: `AcquireMany` retries as Acquire does and leaves no stray term; a server restarted empty is brought back in step |
//	| `TestNotify`, `TestNotifyPrefix`, `TestNotifyDoesNotBlock` | one subscription hears acquisitions and releases (batched too) of every key, `changed("")` after a server restart, nothing after ctx ended; a prefix with glob characters matches only itself; a blocked `changed` holds up no operation |
//	| `TestHandover` | the figures above |
//
// Not verified here: `tls = true` (no TLS server in the test set-up), Redis versions other than 7.0,
// managed Redis services, replica failover.
//
// The figures of docs/providers/redis.md come from the suite's Batch case, TestServerRestart
// (with and without persistence, SIGKILL included), and the agent's
// TestFailoverRedlock and TestFailoverRedis (tokens across a lost write).
package redis
