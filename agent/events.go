package agent

import (
	"fmt"
	"time"

	"github.com/electd/electd/config"
)

// follow records the lease's holder as this node's leader.
func (j *job) follow(holder string, token uint64) {
	j.checkClash(holder)
	j.seeToken(token, false)
	node := NodeOf(holder)
	j.setFollower(node, token)
	if node != "" {
		j.noteLeader(node, token)
	}
}

// checkClash watches for another process holding the lease under this
// node's node_id (see clash in identity.go).
func (j *job) checkClash(holder string) {
	if holder == "" || holder == j.holder() || NodeOf(holder) != j.node() {
		if j.clash != nil && j.clash.logged {
			j.clearLastError(j.clash.msg)
		}
		j.clash = nil
		return
	}
	now := j.l.clock.Now()
	if j.clash == nil || j.clash.holder != holder {
		j.clash = &clash{holder: holder, since: now}
		j.log().Warn("the lease is held by another process with this node_id: an earlier run of this agent (its lease expires within the ttl) or a second agent with the same node_id",
			"holder", holder, "this_process", j.holder())
		return
	}
	if !j.clash.logged && now.Sub(j.clash.since) > j.spec.TTL+j.spec.RetryEvery {
		j.clash.logged = true
		j.clash.msg = fmt.Sprintf("node_id clash: another agent process (%s) with node_id %q keeps renewing this job's lease; give every agent its own node_id", holder, j.node())
		j.log().Error(j.clash.msg, "this_process", j.holder())
		j.setLastError(j.clash.msg)
	}
}

// noteLeader fires on_leader_change when the leader differs from the one
// this node knew.
func (j *job) noteLeader(node string, token uint64) {
	if !j.policy.leads() {
		return // every slot has a new winner: not a change of leader
	}
	if !j.known {
		j.known, j.lastLeader = true, node
		return
	}
	if node == "" || node == j.lastLeader {
		return
	}
	prev := j.lastLeader
	j.lastLeader = node
	j.log().Info("leader changed", "leader", node, "previous_leader", prev, "token", token)
	j.count(config.EventLeaderChange)
	j.hooks.fire(j.event(config.EventLeaderChange, node, prev, token, ReasonLeaderChange), j.spec.OnLeaderChange, nil)
}

// event is a leadership event, for the hooks; it goes into the job's
// history too.
func (j *job) event(typ, leader, prev string, token uint64, reason string) config.Event {
	ev := config.Event{Type: typ, Job: j.spec.Name, Node: j.node(), Leader: leader,
		PreviousLeader: prev, Token: token, Time: time.Now(), Reason: reason}
	j.record(Transition{Time: ev.Time, Type: typ, Leader: leader, PreviousLeader: prev, Token: token, Reason: reason})
	if typ == config.EventDemoted && j.spec.Mode != config.ModeLock {
		j.countTermEnded(reason) // a lock job's term ends with every slot: not a move
	}
	return ev
}
