// Package faults is electd's fault-injection suite. It runs several real
// `electd run` processes on one lease store, injects faults (kill -9 of the
// leader, a paused leader, cut and frozen store connections, a stalled or
// restarted store, SIGHUP bursts, graceful handovers) and checks what the
// agents' children did against a fencing-checked recorder: overlaps,
// fencing violations, leadership gaps, lost or duplicated task slots, and
// clean exits. The suite lives in the package's tests; docs/reliability.md
// says how to run it and what it measured.
package faults
