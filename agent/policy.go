package agent

import (
	"time"

	"github.com/electd/electd/providers"
)

// A policy is what kind of election a job runs, chosen when the job is
// built: when a candidate attempts, what follows an attempt that did not
// win, and what follows a term. The term itself (term.go) is the same for
// every kind.
//
//   - supervised (mode = "leader"): compete at once, hold the lease while
//     alive, compete again after a term;
//   - perSlot (mode = "lock"): compete for each slot of the task's schedule,
//     release once its run is done;
//   - oneShot (RunOnce, `electd lock`, once.go): a job's own policy, but one
//     term at most, and a bounded wait for it.
type policy interface {
	// compete makes a candidate's next attempt: at once, or at its slot.
	compete(j *job)
	// skip is an attempt the job may not make now (mayCompete).
	skip(j *job)
	// notified is a hint that the lease may be free, to a candidate.
	notified(j *job)
	// refused follows an attempt that did not win: held names the holder,
	// nil when the store failed with err.
	refused(j *job, held *providers.HeldError, err error)
	// termOver follows a term, once on_demoted has fired: compete again, or
	// retire.
	termOver(j *job, t *term, reason error)

	// leads says whether a term is leadership: it counts in the fleet's
	// load and changes the leader others see.
	leads() bool
	// slot is the slot an attempt is for; zero outside lock mode.
	slot() time.Time
	// capWait bounds a candidate's pause.
	capWait(now time.Time, d time.Duration) time.Duration
	// capAttempt bounds the timeout d of an attempt sent at now.
	capAttempt(now time.Time, d time.Duration) time.Duration
	// giveUp, asked before each attempt, is the error to retire the job
	// with instead; nil to attempt.
	giveUp(now time.Time) error
}

var (
	_ policy = supervised{}
	_ policy = (*perSlot)(nil)
	_ policy = (*oneShot)(nil)
)

// competes is what supervised and perSlot share: no deadline, and another
// term after one is over.
type competes struct{}

func (competes) slot() time.Time                                    { return time.Time{} }
func (competes) capWait(_ time.Time, d time.Duration) time.Duration { return d }
func (competes) capAttempt(_ time.Time, d time.Duration) time.Duration {
	return d
}
func (competes) giveUp(time.Time) error { return nil }
func (competes) termOver(j *job, t *term, reason error) {
	now := j.l.clock.Now()
	if now.Sub(t.began) >= j.spec.TTL {
		j.backoffs = 0 // a healthy term
	}
	j.holdOff = now.Add(j.pause(reason)) // reasons.go
	j.compete()
}

// supervised is a leader-mode job: it leads while it can and supervises its
// command or its task's schedule.
type supervised struct{ competes }

func (supervised) leads() bool    { return true }
func (supervised) compete(j *job) { j.attempt() }
func (supervised) skip(j *job)    { j.observe() } // learn the leader meanwhile (fleet.go)
func (supervised) notified(j *job) {
	now := j.l.clock.Now()
	if now.Before(j.holdOff) {
		return
	}
	if d := j.deferral(); d > 0 {
		j.wait(d) // another node should have it first
		return
	}
	if now.Before(j.rushed.Add(j.spec.RetryEvery)) {
		return // one early attempt per retry_every: the timer stands
	}
	j.rushed = now
	j.l.cancel(j.timer)
	j.attempt()
}

func (supervised) refused(j *job, held *providers.HeldError, _ error) {
	switch {
	case held == nil:
		// An attempt that hung for its share of the window (a lost store
		// member) is tried again after retry_every too, not at once: a
		// store that is only slow (a loaded PostgreSQL with a fleet's
		// first connections) would otherwise get every job's attempt again
		// as each times out, and never catch up.
		j.wait(jitter(j.spec.RetryEvery))
	case j.notified && !j.l.clock.Now().Before(j.rushed.Add(j.spec.RetryEvery)):
		// The lease may have been released after the store judged this
		// attempt: try again at once (after the deferral, as notified
		// does, when another node should have it first), but once per
		// retry_every at most, so that candidates whose attempts notify
		// each other (or themselves) back off like any refused attempt.
		if d := j.deferral(); d > 0 {
			j.wait(d)
			return
		}
		j.rushed = j.l.clock.Now()
		j.attempt()
	case held.Remaining > 0:
		// The store said when the term ends, by its own clock: try then
		// (later when another node should have it first).
		next := min(jitter(j.spec.RetryEvery), held.Remaining+time.Millisecond)
		d := j.deferral()
		if d > 0 && j.l.notifying.Load() {
			// Another node should have it first, and a release will be
			// notified (then tried after the deferral): polling before
			// the term's end could only take the lease in the moment
			// between a release and the notification, from under the
			// node it was released for.
			next = held.Remaining + time.Millisecond
		}
		j.wait(next + d)
	default:
		// A term at its end (no time left by the store's clock): the
		// lease is free at the next try, which another node should have
		// first when the fleet wants it there.
		j.wait(jitter(j.spec.RetryEvery) + j.deferral())
	}
}

// perSlot is a lock-mode job: it takes the lease for each slot of its
// task's schedule and releases it once the slot's run is done. Between
// slots it does not touch the store.
type perSlot struct {
	competes
	next time.Time // the slot of the coming attempt

	// A trigger request made on this node (task.go) is competed for at
	// once, and again every retry_every while another node holds the
	// lease, before the next slot if it comes first.
	forRequest bool      // the coming attempt is for the request, not a slot
	requestAt  time.Time // when the last attempt for a request was due
}

func (*perSlot) leads() bool { return false }

// slot is the slot an attempt is for; zero for a trigger request.
func (p *perSlot) slot() time.Time {
	if p.forRequest {
		return time.Time{}
	}
	return p.next
}

func (p *perSlot) compete(j *job) {
	now := j.l.clock.Now()
	p.next = nextSlot(j.spec.Task.Schedule, now)
	at := p.next.Add(slotDelay(j.spec.Name, j.spec.Task, p.next))
	p.forRequest = false
	if j.task.requested() {
		r := p.requestAt.Add(jitter(j.spec.RetryEvery))
		if r.Before(now) {
			r = now
		}
		if r.Before(at) {
			p.forRequest, p.requestAt, at = true, r, r
		}
	}
	j.wait(at.Sub(now))
}
func (*perSlot) skip(j *job)     { j.compete() } // not this slot: the next
func (*perSlot) notified(j *job) {}              // a slot is taken at its time, not on a release
func (p *perSlot) refused(j *job, held *providers.HeldError, _ error) {
	if held != nil {
		j.log().Debug("slot taken by another node", "slot", p.next.UTC().Format(time.RFC3339))
	}
	j.compete()
}
