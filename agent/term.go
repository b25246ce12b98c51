package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/timing"
	"github.com/electd/electd/providers"
)

// The life of a term, for one job:
//
//	candidate ──Acquire──▶ leader ──Renew every renew_every──▶ leader ...
//	   ▲  held: try again when the store says the term ends,   │
//	   │  or when it notifies a release                        │ a reason to step down
//	   │                                                       ▼
//	   └───── on_demoted ◀──── Release ◀──── stop the work (stop signal, grace, SIGKILL)
//
// A term is created when an Acquire wins (lead) and dropped once its lease
// is released or known lost (demoted). Every answer from the store, and
// every step of the work, names the term it belongs to: one for a term that
// is not the job's current one, or that is stepping down, is stale. All of
// it runs on the job's loop (loop.go); nothing blocks. When a candidate
// attempts, and what follows a refusal or a term, is the job's policy
// (policy.go).

// term is one term of leadership of one job on this node. Its deadlines are
// on the node's monotonic clock: the store may expire the lease ttl after it
// received the operation, which is no earlier than when the leader sent it.
type term struct {
	j      *job
	lease  providers.Lease
	began  time.Time // when it was won
	sent   time.Time // when the last successful Acquire or Renew was sent
	stopBy time.Time // timing.StopBy: stepping down must begin

	failed   bool        // the last renewal failed: retry at retry_every
	renewing bool        // a renewal is in flight; they go one at a time
	queued   *renewal    // the next renewal, sent once the one in flight is answered
	timer    *timer      // the next renewal, or the step-down point while one is out
	work     *leaderWork // nil when the job only leads
}

type renewal struct {
	value string
	then  func(error)
}

// newTerm is a term whose Acquire was sent at sent.
func newTerm(sent time.Time, ttl, stopTimeout time.Duration) *term {
	return &term{sent: sent, stopBy: timing.StopBy(sent, ttl, stopTimeout)}
}

// current says whether t is its job's term and leads: an answer or a step
// for any other term is stale.
func (t *term) current() bool { return t.j.term == t && t.j.phase == leading }

// Acquire.

func (j *job) attempt() {
	j.timer, j.notified = nil, false
	if err := j.policy.giveUp(j.l.clock.Now()); err != nil {
		j.retire(err) // RunOnce's wait is over (once.go)
		return
	}
	if !j.mayCompete() {
		j.policy.skip(j)
		return
	}
	j.phase = asking
	sent := j.l.clock.Now()
	// An answer too late for the term to be of use is abandoned. An acquire
	// gets the whole window, not a renewal's share: a fleet's first acquires
	// on a loaded store (a PostgreSQL forking a backend per connection) take
	// longer, and cutting them short only adds connections to open.
	timeout := timing.StopBy(sent, j.spec.TTL, j.spec.StopTimeout()).Sub(sent)
	timeout = j.policy.capAttempt(sent, timeout) // RunOnce: no longer than its wait (once.go)
	j.l.acquire(acquireOp{req: providers.AcquireRequest{Key: j.spec.Name, Holder: j.holder(), TTL: j.spec.TTL, Floor: j.mark},
		timeout: timeout, done: func(lease providers.Lease, err error) { j.acquired(lease, sent, err) }})
}

// acquired is the answer to an attempt: a candidate asks one at a time, so
// the answer is always the current attempt's.
func (j *job) acquired(lease providers.Lease, sent time.Time, err error) {
	var held *providers.HeldError
	switch {
	case err == nil && j.retiring != nil:
		// A term nobody will use: give it back at once.
		j.phase = stopping
		j.l.release(releaseOp{lease: lease, timeout: j.releaseTimeout(), done: func(error) { j.leave() }})
	case err == nil:
		j.opDone(nil)
		j.seeToken(lease.Token, true)
		j.checkClash("")
		if why := j.unfitToLead(); why != nil {
			j.letGo(lease, why)
			return
		}
		j.lead(lease, sent)
	case errors.As(err, &held):
		j.opDone(nil)
		j.follow(held.Holder, held.Token)
		j.refused(held, err)
	default:
		j.opDone(err) // logs the store's failure (storefail.go)
		j.refused(nil, err)
	}
}

// refused makes a candidate again of a job whose attempt did not win: held
// names the holder, nil when the store failed.
func (j *job) refused(held *providers.HeldError, err error) {
	j.phase = candidate
	if j.retiring != nil {
		j.leave()
		return
	}
	j.policy.refused(j, held, err)
}

// lead starts a term: on_elected, then the work once its execs are done;
// renewals meanwhile.
func (j *job) lead(lease providers.Lease, sent time.Time) {
	t := newTerm(sent, j.spec.TTL, j.spec.StopTimeout())
	t.j, t.lease, t.began = j, lease, j.l.clock.Now()
	j.l.cancel(j.timer)
	j.phase, j.term, j.timer = leading, t, nil
	leads := j.policy.leads()
	if leads {
		j.l.leading++ // a lock-mode term lasts a slot: not a share of the fleet's load
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
		w := &leaderWork{j: j, t: t, elected: elected, slot: j.policy.slot()}
		if j.spec.Task != nil {
			w.inherit(parseRecord(lease.Value))
		}
		t.work = w
		j.hooks.fire(elected, j.spec.OnElected, func() { j.l.post(func() { t.onWork(w.begin) }) })
	}
	if prev != j.node() && leads {
		j.count(config.EventLeaderChange)
		j.hooks.fire(j.event(config.EventLeaderChange, j.node(), prev, lease.Token, ReasonElected), j.spec.OnLeaderChange, nil)
	}
	t.scheduleRenewal()
}

// Renew.

func (t *term) scheduleRenewal() {
	j := t.j
	now := j.l.clock.Now()
	at := timing.NextRenew(t.sent, t.stopBy, now, t.failed, j.spec.RenewEvery, j.spec.RetryEvery)
	if !t.failed {
		at = j.l.align(at, now, j.spec.RenewEvery)
	}
	j.l.cancel(t.timer)
	t.timer = j.l.at(at, func() {
		t.timer = nil
		if !t.pastDeadline() {
			t.renew(renewal{value: t.value()})
		}
	})
}

// pastDeadline steps down when the term's step-down point has passed (a
// pause, a slow store): the work must be dead, not dying, when the lease
// can expire.
func (t *term) pastDeadline() bool {
	now := t.j.l.clock.Now()
	if now.Before(t.stopBy) {
		return false
	}
	t.stepDown(fmt.Errorf("%w (last successful renewal sent %s ago)", ErrRenewDeadline,
		now.Sub(t.sent).Round(time.Millisecond)))
	return true
}

// renew renews the lease with r.value (a task's slot is recorded so), then
// calls r.then with nil or a store error. Renewals go one at a time, so an
// older value never lands after a newer one: a slot asked for while a
// renewal is in flight waits for it; a timed renewal is dropped, as the
// answer in flight schedules the next.
func (t *term) renew(r renewal) {
	j := t.j
	if t.renewing {
		if r.then != nil {
			// The newest value carries what the queued one did (a task's
			// record only grows): one renewal answers both.
			if q := t.queued; q != nil {
				first, then := q.then, r.then
				r.then = func(err error) { first(err); then(err) }
			}
			t.queued = &r
		}
		return
	}
	t.renewing = true
	sent := j.l.clock.Now()
	lease := t.lease
	lease.Value = r.value
	j.l.renew(renewOp{lease: lease, timeout: timing.AttemptTimeout(t.sent, t.stopBy, sent), done: func(renewed providers.Lease, err error) {
		if !t.current() {
			j.l.lateRenewals.Add(1)
			return // the term is over; its release is under way or done
		}
		t.renewing = false
		if errors.Is(err, context.DeadlineExceeded) && j.l.clock.Now().Before(t.stopBy) {
			// The attempt hung for its share of the window: the same
			// renewal goes out again at once, still one at a time, while
			// the term has time left (a lost member must not end it).
			j.log().Warn("renewal timed out; retrying", "error", err,
				"stepping_down_in", t.stopBy.Sub(j.l.clock.Now()).Round(time.Millisecond))
			t.renew(r)
			return
		}
		t.renewed(lease, renewed, sent, err, r.then)
	}})
	// The answer normally comes by its attempt's timeout, but a store or
	// client that overruns its deadline must not keep the work running past
	// the term: the step-down point has a timer of its own while the
	// renewal is out. The answer, whenever it comes, sets the next timer.
	j.l.cancel(t.timer)
	t.timer = j.l.at(t.stopBy, func() {
		t.timer = nil
		t.pastDeadline()
	})
}

func (t *term) renewed(sentLease, renewed providers.Lease, sent time.Time, err error, then func(error)) {
	j := t.j
	switch {
	case err == nil:
		j.opDone(nil)
		renewed.Value = sentLease.Value
		t.lease, t.failed = renewed, false
		t.sent, t.stopBy = sent, timing.StopBy(sent, j.spec.TTL, j.spec.StopTimeout())
		j.setLeader(j.node(), renewed)
		if why := j.unfitToLead(); why != nil {
			// Unfit since the renewal went out. then is not called, as
			// for any answer that comes after its term is over: a task's
			// slot recorded with this renewal is not run, and the release
			// carries the record from before it (leaderWork.stopped).
			t.stepDown(why)
			return
		}
	case errors.Is(err, providers.ErrLost):
		j.opDone(err)
		t.stepDown(ErrLeaseLost)
		return
	case t.pastDeadline():
		return
	default:
		j.opDone(err)
		t.failed = true
		j.log().Warn("renewal failed; retrying", "error", err,
			"stepping_down_in", t.stopBy.Sub(j.l.clock.Now()).Round(time.Millisecond))
	}
	if then != nil {
		then(err)
	}
	if !t.current() {
		return
	}
	if q := t.queued; q != nil {
		t.queued = nil
		t.renew(*q)
		return
	}
	t.scheduleRenewal()
}

// onWork runs a step of the term's work (its start, a child's exit, one of
// its timers) unless the term is over; an error is the reason to step
// down. After a pause, a work event and the deadline can be due together:
// nothing is acted on for a term that is over.
func (t *term) onWork(step func() error) {
	if !t.current() || t.pastDeadline() {
		return
	}
	if err := step(); err != nil {
		t.stepDown(err)
	}
}

// Step down.

// stepDown ends the term: the work stops (stop signal, stop_timeout,
// SIGKILL) off the loop, then the lease is released.
func (t *term) stepDown(reason error) {
	j := t.j
	if !t.current() {
		return
	}
	j.phase = stopping
	if j.policy.leads() {
		j.l.leading--
	}
	j.l.cancel(t.timer)
	t.timer, t.queued = nil, nil
	j.setState(StateStopping)
	j.log().Info("stepping down", "reason", reason.Error(), "token", t.lease.Token)
	w, lease := t.work, t.lease
	if w == nil {
		t.release(lease, reason)
		return
	}
	w.cancelTimers()
	spec := j.spec // a reload may update j.spec on the loop meanwhile
	go func() {
		w.stop(spec)
		j.l.post(func() {
			if j.spec.Task != nil {
				// The release carries the record of the run it stopped.
				lease.Value = w.stopped(reason)
			}
			t.release(lease, reason)
		})
	}()
}

// Release.

func (t *term) release(lease providers.Lease, reason error) {
	j := t.j
	if errors.Is(reason, ErrLeaseLost) {
		j.demoted(t, reason)
		return
	}
	j.l.release(releaseOp{lease: lease, timeout: j.releaseTimeout(), done: func(err error) {
		j.released(lease, err)
		j.demoted(t, reason)
	}})
}

// released logs the answer to the release of lease.
func (j *job) released(lease providers.Lease, err error) {
	switch {
	case err == nil:
		j.log().Info("released the lease", "token", lease.Token)
	case errors.Is(err, providers.ErrLost):
		j.log().Info("the lease was already gone when releasing it", "token", lease.Token)
	default:
		j.log().Warn("cannot release the lease; it will expire", "error", err)
	}
}

// demoted drops the term t, fires on_demoted and leaves what comes next to
// the job's policy: compete again after a pause that depends on why the
// term ended, or retire.
func (j *job) demoted(t *term, reason error) {
	j.term = nil
	j.count(config.EventDemoted)
	j.setState(StateCandidate)
	if failure(reason) {
		j.setLastError(reason.Error())
	}
	// Who leads next is not known yet; the next answer from the store
	// fires on_leader_change with this node as previous_leader.
	j.hooks.fire(j.event(config.EventDemoted, "", j.node(), t.lease.Token, reasonOf(reason)), j.spec.OnDemoted, nil)
	j.policy.termOver(j, t, reason)
}
