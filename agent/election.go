package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
)

// The life of a term, for one job:
//
//	candidate ──Acquire──▶ leader ──Renew every renew_every──▶ leader ...
//	   ▲  held: try again when the store says the term ends,   │
//	   │  or when it notifies a release                        │ a reason to stop (below)
//	   │                                                       ▼
//	   └───── on_demoted ◀──── Release ◀──── stop the work (stop signal, grace, SIGKILL)
//
// Every method here runs on the job's loop (loop.go), which owns the job's
// fields, its timer and its store requests; a method never blocks. What runs
// while leading (work.go) asks the loop for steps instead of touching the
// lease or the term.

// start makes the job a candidate on its loop.
func (j *job) start() {
	j.l.jobs[j.spec.Name] = j
	j.l.placed.stale = true
	j.started = j.l.clock.Now()
	j.startHealth()
	j.startTask()
	j.compete()
}

// compete makes the job a candidate: it tries at once, or at its next slot
// in lock mode.
func (j *job) compete() {
	j.phase = candidate
	if j.ending != nil {
		j.finish()
		return
	}
	if j.spec.Mode == config.ModeLock {
		now := j.l.clock.Now()
		j.slot = nextSlot(j.spec.Task.Schedule, now)
		j.wait(j.slot.Add(slotDelay(j.spec.Name, j.spec.Task, j.slot)).Sub(now))
		return
	}
	j.attempt()
}

// mayCompete says whether the job competes now (fleet.go: eligible, not
// draining, healthy, not holding off), and shows why not.
func (j *job) mayCompete() bool {
	why := j.unfit()
	j.setCompeting(why == "", why)
	return why == ""
}

// wait makes the next attempt after d (sooner on a notification).
func (j *job) wait(d time.Duration) {
	j.l.cancel(j.timer)
	j.timer = j.l.after(j.once.capWait(j.l.clock.Now(), d), j.attempt)
}

// notify is a hint from the store that the lease may have changed hands.
func (j *job) notify() {
	switch {
	case j.phase == asking:
		j.notified = true
	case j.phase == candidate && j.spec.Mode != config.ModeLock && !j.l.clock.Now().Before(j.holdOff):
		if d := j.deferral(); d > 0 {
			j.wait(d) // another node should have it first
			return
		}
		now := j.l.clock.Now()
		if now.Before(j.rushed.Add(j.spec.RetryEvery)) {
			return // one early attempt per retry_every: the timer stands
		}
		j.rushed = now
		j.l.cancel(j.timer)
		j.attempt()
	}
}

func (j *job) attempt() {
	j.timer, j.notified = nil, false
	if err := j.once.beforeAttempt(j.l.clock.Now()); err != nil {
		j.end(err) // RunOnce's wait is over (once.go)
		return
	}
	if !j.mayCompete() {
		if j.spec.Mode == config.ModeLock {
			j.compete() // not this slot: the next
		} else {
			j.observe()
		}
		return
	}
	j.phase = asking
	sent := j.l.clock.Now()
	// An answer that comes too late for the term to be of use is abandoned.
	// An acquire gets the whole window, not a renewal's share of it: a
	// fleet's first acquires on a loaded store (a PostgreSQL forking a
	// backend per new connection) take longer than a share, and cutting
	// them short only adds connections to open (TestBalanceAcrossAgents).
	timeout := newTerm(sent, j.spec.TTL, j.spec.StopTimeout()).stopBy.Sub(sent)
	timeout = j.once.capAttempt(sent, timeout) // RunOnce: no longer than the wait it may take (once.go)
	j.l.acquire(acquireOp{req: providers.AcquireRequest{Key: j.spec.Name, Holder: j.holder(), TTL: j.spec.TTL, Floor: j.mark},
		timeout: timeout, done: func(lease providers.Lease, err error) { j.acquired(lease, sent, err) }})
}

func (j *job) acquired(lease providers.Lease, sent time.Time, err error) {
	j.once.answer(err)
	var held *providers.HeldError
	switch {
	case err == nil && j.ending != nil:
		// A term nobody will use: give it back at once.
		j.phase = stopping
		j.l.release(releaseOp{lease: lease, timeout: j.releaseTimeout(), done: func(error) { j.finish() }})
		return
	case err == nil:
		j.opDone(nil)
		j.seeToken(lease.Token, true)
		j.checkClash("")
		j.lead(lease, sent)
		return
	case errors.As(err, &held):
		j.opDone(nil)
		j.follow(held.Holder, held.Token)
		j.phase = candidate
		switch {
		case j.ending != nil:
			j.finish()
		case j.spec.Mode == config.ModeLock:
			j.log().Debug("slot taken by another node", "slot", j.slot.UTC().Format(time.RFC3339))
			j.compete()
		case j.notified && !j.l.clock.Now().Before(j.rushed.Add(j.spec.RetryEvery)):
			// The lease may have been released after the store judged
			// this attempt: try again at once, but once per retry_every
			// at most, so that candidates whose attempts notify each
			// other (or themselves) back off like any refused attempt.
			j.rushed = j.l.clock.Now()
			j.attempt()
		case held.Remaining > 0:
			// The store said when the term ends, by its own clock: try then
			// (later when another node should have it first).
			j.wait(min(jitter(j.spec.RetryEvery), held.Remaining+time.Millisecond) + j.deferral())
		default:
			j.wait(jitter(j.spec.RetryEvery))
		}
		return
	}
	j.opDone(err) // logs the store's failure (storefail.go)
	j.phase = candidate
	switch {
	case j.ending != nil:
		j.finish()
	case j.spec.Mode == config.ModeLock:
		j.compete()
	default:
		// An attempt that hung for its share of the window (a lost store
		// member) is tried again after retry_every too, not at once: a
		// store that is only slow (a loaded PostgreSQL with a fleet's
		// first connections) would otherwise get every job's attempt again
		// as each times out, and never catch up.
		j.wait(jitter(j.spec.RetryEvery))
	}
}

// lead starts a term: on_elected, then the work once its execs are done;
// renewals meanwhile.
func (j *job) lead(lease providers.Lease, sent time.Time) {
	j.phase, j.lease, j.failed, j.began = leading, lease, false, j.l.clock.Now()
	j.renewing, j.queued = false, nil // an answer for an earlier term may still be on its way
	j.term = newTerm(sent, j.spec.TTL, j.spec.StopTimeout())
	if j.spec.Mode == config.ModeLeader {
		j.l.leading++ // lock-mode terms last a slot: not a share of the fleet's load
	}
	prev := j.lastLeader
	j.known, j.lastLeader = true, j.node()
	j.setLeader(j.node(), lease)
	j.count(config.EventElected)
	j.log().Info("elected", "token", lease.Token)
	elected := j.event(config.EventElected, j.node(), prev, lease.Token, ReasonElected)
	if j.spec.Run == nil && j.spec.Task == nil {
		j.hooks.fire(elected, j.spec.OnElected, nil) // leadership only: no work
	} else {
		w := &leaderWork{j: j, elected: elected, slot: j.slot}
		if j.spec.Task != nil {
			w.inherit(parseRecord(lease.Value))
		}
		j.work = w
		j.hooks.fire(elected, j.spec.OnElected, func() { j.l.post(func() { j.onWork(w, w.begin) }) })
	}
	if prev != j.node() && j.spec.Mode == config.ModeLeader {
		j.count(config.EventLeaderChange)
		j.hooks.fire(j.event(config.EventLeaderChange, j.node(), prev, lease.Token, ReasonElected), j.spec.OnLeaderChange, nil)
	}
	j.scheduleRenewal()
}

func (j *job) scheduleRenewal() {
	now := j.l.clock.Now()
	at := j.term.nextRenew(now, j.failed, j.spec.RenewEvery, j.spec.RetryEvery)
	if !j.failed {
		at = j.l.align(at, now, j.spec.RenewEvery)
	}
	j.l.cancel(j.timer)
	j.timer = j.l.at(at, func() {
		j.timer = nil
		if !j.pastDeadline() {
			j.renew(renewal{value: j.value()})
		}
	})
}

// value is what the lease carries at its next renewal: a task's record as
// its work keeps it, else the value it has.
func (j *job) value() string {
	if w := j.work; w != nil && j.spec.Task != nil {
		return w.rec.String()
	}
	return j.lease.Value
}

// pastDeadline steps down when the term's step-down point has passed (a
// pause, a slow store): the work must be dead, not dying, when the lease
// can expire.
func (j *job) pastDeadline() bool {
	now := j.l.clock.Now()
	if now.Before(j.term.stopBy) {
		return false
	}
	j.stepDown(fmt.Errorf("%w (last successful renewal sent %s ago)", ErrRenewDeadline,
		now.Sub(j.term.sent).Round(time.Millisecond)))
	return true
}

// renew renews the lease with r.value (a task's slot is recorded so), then
// calls r.then with nil or a store error. Renewals go one at a time, so an
// older value never lands after a newer one: a slot asked for while a
// renewal is in flight waits for it; a timed renewal is dropped, as the
// answer in flight schedules the next.
func (j *job) renew(r renewal) {
	if j.renewing {
		if r.then != nil {
			// The newest value carries what the queued one did (a task's
			// record only grows): one renewal answers both.
			if q := j.queued; q != nil {
				first, then := q.then, r.then
				r.then = func(err error) { first(err); then(err) }
			}
			j.queued = &r
		}
		return
	}
	j.renewing = true
	sent := j.l.clock.Now()
	lease := j.lease
	lease.Value = r.value
	j.l.renew(renewOp{lease: lease, timeout: j.term.attemptTimeout(sent), done: func(renewed providers.Lease, err error) {
		if j.phase != leading || j.lease.Token != lease.Token {
			return // the term ended meanwhile; its release is under way
		}
		j.renewing = false
		if errors.Is(err, context.DeadlineExceeded) && j.l.clock.Now().Before(j.term.stopBy) {
			// The attempt hung for its share of the window: the same
			// renewal goes out again at once, still one at a time, while
			// the term has time left (a lost member must not end it).
			j.log().Warn("renewal timed out; retrying", "error", err,
				"stepping_down_in", j.term.stopBy.Sub(j.l.clock.Now()).Round(time.Millisecond))
			j.renew(r)
			return
		}
		j.renewed(lease, renewed, sent, err, r.then)
	}})
	// The answer normally comes by its attempt's timeout, but a
	// store or client that overruns its deadline must not keep the work
	// running past the term: the step-down point has a timer of its own
	// while the renewal is out. The answer, whenever it comes, sets the
	// next timer.
	j.l.cancel(j.timer)
	j.timer = j.l.at(j.term.stopBy, func() {
		j.timer = nil
		j.pastDeadline()
	})
}

func (j *job) renewed(sentLease, renewed providers.Lease, sent time.Time, err error, then func(error)) {
	switch {
	case err == nil:
		j.opDone(nil)
		renewed.Value = sentLease.Value
		j.lease, j.term, j.failed = renewed, newTerm(sent, j.spec.TTL, j.spec.StopTimeout()), false
		j.setLeader(j.node(), renewed)
	case errors.Is(err, providers.ErrLost):
		j.opDone(err)
		j.stepDown(ErrLeaseLost)
		return
	case j.pastDeadline():
		return
	default:
		j.opDone(err)
		j.failed = true
		j.log().Warn("renewal failed; retrying", "error", err,
			"stepping_down_in", j.term.stopBy.Sub(j.l.clock.Now()).Round(time.Millisecond))
	}
	if then != nil {
		then(err)
	}
	if j.phase != leading {
		return
	}
	if q := j.queued; q != nil {
		j.queued = nil
		j.renew(*q)
		return
	}
	j.scheduleRenewal()
}

// onWork runs a step of the leader's work (its start, a child's exit, one of
// its timers) unless the term it belongs to is over; an error is the reason
// to step down. After a pause, a work event and the deadline can be due
// together: nothing is acted on for a term that is over.
func (j *job) onWork(w *leaderWork, step func() error) {
	if j.work != w || j.phase != leading || j.pastDeadline() {
		return
	}
	if err := step(); err != nil {
		j.stepDown(err)
	}
}

// stepDown ends the term: the work stops (stop signal, stop_timeout,
// SIGKILL) off the loop, then the lease is released.
func (j *job) stepDown(reason error) {
	if j.phase != leading {
		return
	}
	j.phase = stopping
	if j.spec.Mode == config.ModeLeader {
		j.l.leading--
	}
	j.l.cancel(j.timer)
	j.timer, j.queued = nil, nil
	j.setState(StateStopping)
	j.log().Info("stepping down", "reason", reason.Error(), "token", j.lease.Token)
	w, lease := j.work, j.lease
	j.work = nil
	if w == nil {
		j.release(lease, reason)
		return
	}
	w.quit()
	go func() {
		w.stop()
		j.l.post(func() {
			if j.spec.Task != nil {
				// The release carries the record of the run it ended.
				lease.Value = w.stopped(reason)
			}
			j.release(lease, reason)
		})
	}()
}

func (j *job) release(lease providers.Lease, reason error) {
	if errors.Is(reason, ErrLeaseLost) {
		j.demoted(lease, reason)
		return
	}
	j.l.release(releaseOp{lease: lease, timeout: j.releaseTimeout(), done: func(err error) {
		switch {
		case err == nil:
			j.log().Info("released the lease", "token", lease.Token)
		case errors.Is(err, providers.ErrLost):
			j.log().Info("the lease was already gone when releasing it", "token", lease.Token)
		default:
			j.log().Warn("cannot release the lease; it will expire", "error", err)
		}
		j.demoted(lease, reason)
	}})
}

// releaseTimeout bounds a release, so that a dead store cannot hold up a stop.
func (j *job) releaseTimeout() time.Duration { return min(j.spec.TTL, 5*time.Second) }

// demoted fires on_demoted and makes the job a candidate again, after a
// pause that depends on why the term ended.
func (j *job) demoted(lease providers.Lease, reason error) {
	j.count(config.EventDemoted)
	j.setState(StateCandidate)
	if failure(reason) {
		j.setLastError(reason.Error())
	}
	// Who leads next is not known yet; the next answer from the store
	// fires on_leader_change with this node as previous_leader.
	j.hooks.fire(j.event(config.EventDemoted, "", j.node(), lease.Token, reasonOf(reason)), j.spec.OnDemoted, nil)
	if j.once != nil {
		j.endOnce(reason) // RunOnce: one term only
		return
	}
	now := j.l.clock.Now()
	if now.Sub(j.began) >= j.spec.TTL {
		j.backoffs = 0 // a healthy term
	}
	j.holdOff = now.Add(j.pause(reason)) // reasons.go
	j.compete()
}

// end stops the job for good (a reload, the agent stopping). done is
// closed once the work has stopped and the lease is released.
func (j *job) end(reason error) {
	if j.ending != nil || j.phase == ended {
		return
	}
	j.ending = reason
	switch j.phase {
	case candidate:
		j.l.cancel(j.timer)
		j.finish()
	case leading:
		j.stepDown(reason)
	} // asking, stopping: the answer on its way sees ending
}

func (j *job) finish() {
	j.stopHealth()
	j.stopTask()
	j.phase, j.timer = ended, nil
	if j.l.jobs[j.spec.Name] == j {
		delete(j.l.jobs, j.spec.Name)
		j.l.placed.stale = true
	}
	j.mu.Lock()
	j.ended = true
	if j.doneCh != nil {
		close(j.doneCh)
	}
	j.mu.Unlock()
}
