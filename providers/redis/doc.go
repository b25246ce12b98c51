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
package redis
