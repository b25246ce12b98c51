package agent

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"time"
)

// A lease's holder names one agent process, not only its node: the node_id
// and the incarnation of the process ("web-1#5f0c9a1e"). Acquire succeeds
// for "the holder is the caller", so with the node_id alone two processes
// configured with the same node_id would take the lease from each other and
// both lead. With the incarnation, a process renews and re-acquires only
// its own terms; a second process with the same node_id waits like any other
// node, and is reported as a clash.

const (
	holderSep        = "#"
	incarnationBytes = 4 // 8 hex digits: with the "#", config.HolderReserve
)

// newIncarnation is 8 random hex digits, new for every agent process.
func newIncarnation() string {
	var b [incarnationBytes]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func holderOf(node, incarnation string) string { return node + holderSep + incarnation }

// NodeOf is the node_id part of a lease holder: what the API, the events and
// the CLI show as the leader. A holder written by an agent without an
// incarnation is a node_id already.
func NodeOf(holder string) string {
	node, _ := SplitHolder(holder)
	return node
}

// SplitHolder splits a holder into its node_id and incarnation ("" when it
// has none).
func SplitHolder(holder string) (node, incarnation string) {
	i := strings.LastIndex(holder, holderSep)
	if i < 0 || len(holder)-i-1 != 2*incarnationBytes {
		return holder, ""
	}
	if _, err := hex.DecodeString(holder[i+1:]); err != nil {
		return holder, ""
	}
	return holder[:i], holder[i+1:]
}

// clash follows a lease held under this node's node_id by another process.
// It cannot tell at first sight whether that is an earlier run of this agent
// (crashed, restarted, its lease not yet expired) or a second agent with the
// same node_id: safety first, it waits like any follower. A lease that the
// other process keeps for longer than a ttl is renewed, so that process is
// alive: then it is a clash, an operator's mistake, reported as an error.
type clash struct {
	holder string    // the other process's holder, "" when none
	since  time.Time // when it was first seen
	logged bool      // the error was logged
	msg    string    // and shown as the job's last error
}
