// Package nats is the lease store on a NATS JetStream key-value bucket
// (tested against nats-server 2.15.2, and before against 2.9.10, with the
// nats.go jetstream client). Reads go to the stream's leader
// (STREAM.MSG.GET), not to any replica (direct gets).
//
// One bucket holds every lease: one revision per key (history 1), no bucket
// ttl, file storage, created on first use when missing. Each job key is the
// bucket key lease.<key> (bytes other than letters, digits, "-" and "_"
// written =XX), whose value is a JSON record {holder, token, ttl_ns, value}
// that is never deleted, so the token and the value outlive releases,
// expiries and restarts. Every write is a compare-and-set on the key's
// revision (Create when absent, Update(key, value, revision) otherwise); of
// racing clients one wins and the others read again and judge again.
//
// Why not the bucket's own ttl: a bucket-wide max_age cannot serve jobs with
// different ttls, and a record that vanishes when it expires takes its
// fencing token with it (the next term would start at 1 again). Per-key ttls
// need NATS 2.11. So expiry is judged from the server's timestamps instead:
// a term ends ttl_ns after the server time of the record's last write (an
// acquire or renewal). To know the server's "now" without reading any
// client's clock, the provider writes the bucket's clock key and reads its
// timestamp back (one probe, shared by concurrent callers and reused for
// 50 ms). That timestamp was stamped before the compare-and-set that
// follows is applied, so a term judged over by it is over when the write
// lands, and the compare-and-set fails if the holder renewed meanwhile. A
// refused Acquire's HeldError.Remaining is ttl - (probe - record time).
// Only the takeover of a term held by another, and Observe of a held term,
// need a probe; acquiring a free or own lease, Renew and Release do not.
//
// Renew and Release of a term this client wrote last are one
// compare-and-set on the revision it wrote: if nobody wrote the key since,
// holder and token still match. Otherwise they read the record and check
// holder and token first.
//
// The provider implements providers.Notifier with one key-value watch (an
// ordered consumer, new writes only) over lease.* for every job, calling
// changed(key) when a key's holder or token changes (renewals are filtered
// out), and making the watch again and calling changed("") after every
// reconnection. Expiries write nothing and are not notified: Remaining
// tells a candidate when to look again.
//
// It implements no batch capability: JetStream 2.9 has no multi-key
// transaction, so a batch would send one compare-and-set per key all the
// same; the agent already keeps 64 requests in flight, and pipelining them
// measured 1.4x faster at best (docs/providers/nats.md).
//
// New connects once and returns even when no server answers; the client
// keeps reconnecting in the background, with no reconnect buffer (a write
// the caller gave up on is never sent later), and every operation fails at
// once while it is disconnected.
//
// # What was verified here, and what was not
//
// Run on this machine (2 cores), against real nats-servers 2.9.10 (the package's tests, conformance
// included, again on 2.15.2; the cluster suite on both: docs/providers/nats.md):
//
//   - the conformance suite (`go test ./providers/nats/`), on the machine's server with a bucket per
//     case; user and password, token, TLS with a private CA and client certificates, the least
//     permissions, a server without JetStream, a SIGKILL and restart, a SIGSTOP, each on a server of the
//     test's own;
//   - three `electd run` agents (`go test -run 'TestThreeAgents/nats' ./systest/`, two runs): kill -9
//     of the leader → next child running after 3.97–3.99 s with a ttl of 4 s (bound 5.6 s); SIGTERM →
//     24–52 ms;
//   - the short fault run (`go test -run TestFaults ./faults/ -faults.stores nats`, three runs): 18
//     faults each, among them a SIGSTOP and a SIGKILL/restart of nats-server and cut and frozen
//     connections: no fencing violation, no duplicated task slot, gaps p50 1.15–1.18 s, max 2.87–2.94 s.
//     One run reported a `closed-output` failure: the leader had handed the job over to spread the jobs
//     (the agents' balancing) before the fault stopped it, so nobody "took over" after the stop; the
//     same happens on etcd with the same faults, and it is not a fault of the store.
//
// On 2.15.2, with the reads from the stream's leader: the three agents once (kill -9 → 3.96 s, SIGTERM
// → 16 ms) and the short fault run twice (18 faults each, passed).
//
// Not verified here beyond the cluster suite's runs: a NATS cluster over many faults; credentials files
// (JWT and NKey: the operator mode needs an account server set up with `nsc`).
//
// TestBucket races six agents creating the bucket, 150 rounds;
// TestServerRestart SIGKILLs and restarts nats-server on its store directory;
// TestAuth and TestTLS check the errors of a wrong user or certificate.
package nats
