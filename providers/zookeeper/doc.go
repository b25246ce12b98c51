// Package zookeeper is the lease store on a ZooKeeper ensemble (tested
// against ZooKeeper 3.8 with the go-zookeeper/zk v1.0.4 client).
//
// Each job key has two znodes under the provider's root:
//
//	<root>/<key>          persistent: {"holder","token","value"}. Never
//	                      deleted; it keeps the token and the value across
//	                      releases, expiries and server restarts. holder is
//	                      "" after a Release and stays set after an expiry.
//	<root>/<key>/holder   ephemeral: {"holder","token","ttl_ms"}, in the
//	                      session of the term. It exists exactly while the
//	                      lease is held.
//
// Arbitration: every write is one multi-op (a ZooKeeper transaction, all or
// nothing) guarded by the versions of both znodes as they were read, so of
// several racing clients exactly one commits and the others read again and
// see the winner. Acquire = setData on <key> with its version (token + 1)
// and create of the ephemeral holder (delete of the holder's own earlier
// one first); Renew = check (or setData, for a new Value) of <key> and
// setData of holder with their versions; Release = setData of <key> (holder
// cleared) and delete of holder. The fencing token is a per-key counter in
// <key>, written by the one transaction that wins a term: previous + 1, and
// never back, as <key> is never deleted and ZooKeeper fsyncs its
// transaction log before it answers. (Ephemeral sequential znodes à la
// Curator's LeaderLatch were not used: their sequence numbers are the
// parent's child version, which jumps with every candidate's node rather
// than once per term and starts again if the parent is recreated, and a
// try-acquire that gives up has to delete its node again.)
//
// Sessions: one per distinct ttl, with the ttl (whole milliseconds, rounded
// up) as session timeout; a lease's holder znode lives in the session of
// its ttl. ZooKeeper negotiates the timeout within the servers'
// minSessionTimeout and maxSessionTimeout, and the client does not expose
// the result, so the provider reads it from the connect response on the
// wire (session.go). A granted timeout shorter than the ttl would let
// ZooKeeper end a term before its leader stops working, so such a ttl is
// refused with an error naming maxSessionTimeout; a longer one is safe (a
// crashed leader's lease ends later) and is logged once.
//
// Expiry: ZooKeeper expires a session when it has heard nothing from the
// client for the session timeout, and the client pings on its own every
// third of it, so a live process would keep its terms for ever. Hence two
// judges, neither comparing clocks across machines:
//
//   - a live holder: the provider ends the term itself one ttl after its
//     last successful Acquire or Renew was sent (term.go): a timer on the
//     process's monotonic clock, the clock the agent's step-down rule runs
//     on (the agent stops at sent + ttl × 0.99), deleting the holder znode
//     in a guarded multi-op;
//   - a crashed, frozen or cut-off holder: ZooKeeper, when the session
//     expires, at least one session timeout (≥ ttl) after the server last
//     heard from the holder, which is after the term's last Renew arrived.
//
// A Renew that finds its holder znode gone (the session expired, or the
// term lapsed) while nobody took the lease renews it in a new holder znode,
// token unchanged, as the lease contract asks; a Renew that finds another
// term answers ErrLost. Renew and Release confirm a "lost" verdict after a
// sync, so a server that lags the ensemble's leader cannot make a holder
// step down for nothing; a false success is impossible because every
// success is a committed multi-op on the versions read.
//
// The provider implements providers.Notifier with child watches in a
// session of their own: one on root (new keys) and one per key (its holder
// znode created or deleted: an Acquire, a Release, a lapse, a session
// expiry), and changed("") after a reconnection. The client has no
// persistent recursive watches (ZooKeeper 3.6's AddWatch). HeldError has
// Expires (the server's time of the holder's last write + its ttl) but no
// Remaining: ZooKeeper does not say how long another client's session has
// left. There is no batching: each lease is its own multi-op.
//
// The client has no contexts: each call runs on its own goroutine and the
// operation returns when ctx ends. An Acquire whose answer is abandoned (or
// lost with the connection) is undone if it turns out to have committed:
// nobody was told of that term.
//
// New does no I/O: sessions are opened on first use, so an agent started
// while ZooKeeper is down keeps running and reports errors per operation.
//
// # Verified here
//
//	scripts/services.sh zookeeper   # installs Debian's zookeeper (server jars) and libslf4j-java when missing
//	go test -count=1 ./providers/zookeeper/
//
// Every test starts its own standalone ZooKeeper 3.8 (`internal/teststore.StartZooKeeper`: `java -cp
// /usr/share/java/zookeeper.jar:... org.apache.zookeeper.server.ZooKeeperServerMain zoo.cfg`, with
// `tickTime=100` and sessions of 200 ms to 60 s so that short ttls are honoured, bound to 127.0.0.1 on
// a free port, data in a temp dir, ready when it answers `ruok`). `TestZooKeeper` shares one server
// between the conformance suite (`providertest.Run`: 20 clients × 50 racing rounds, `ShortTTL` 1 s,
// Notifier, no Remaining, no batching), `Handover`, `SessionTimeoutBounds`, `RenewOtherTTL`,
// `CrashedHolder` (a holder process killed with SIGKILL), `Lapse`, `Digest`, `RootCreated` and
// `NotifyNewKey`; `TestRestart`, `TestPartition` and `TestLostServer` start their own (`TestLostServer`:
// three proxies to one server, the session's frozen while the leader renews as the agent does; every
// renewal lands within the window, the session kept). The settings' diagnostics (bad
// servers, root paths, credentials; each on its line) are `TestSettingsDiagnostics`. The package's
// tests take about 45 s, most of it the suite's store-down case (four 5 s deadlines against a closed
// port). The three-agent system test and the short fault-injection run cover `zookeeper` too
// (`go test -run 'TestThreeAgents/zookeeper' ./systest/`, `go test -run TestFaults ./faults/
// -faults.stores zookeeper`: 18 faults, no violation).
//
// Not verified here: quorum loss of an ensemble, a lagging follower, TLS (not supported by this
// provider), SASL/Kerberos. An ensemble of three under partitions: see below.
//
// The figures of docs/providers/zookeeper.md come from TestZooKeeper/Digest,
// TestZooKeeper/Lapse (a holder alive but not renewing), TestZooKeeper/CrashedHolder
// (a holder SIGKILLed after its Acquire) and TestPartition (a holder cut off;
// both outcomes of its next renewal).
package zookeeper
