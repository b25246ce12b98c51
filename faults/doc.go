// Package faults is electd's fault-injection suite. It runs several real
// `electd run` processes on one lease store (SQLite, PostgreSQL, MySQL,
// Redis, etcd), injects faults (kill -9 of the leader, a paused leader, cut
// and frozen store connections, a stalled or restarted store, SIGHUP bursts,
// graceful handovers) and an operator's or a command's mistakes (a second
// agent with the same node_id, a closed stderr, broken configurations, a
// run command that cannot start, a child that escapes with setsid, a stop
// as a child starts), and checks what the agents' children did against a
// fencing-checked recorder: overlaps, fencing violations, leadership gaps,
// lost or duplicated task slots, and clean exits. The suite lives in the
// package's tests; docs/reliability.md says how to run it and what it
// measured.
package faults
