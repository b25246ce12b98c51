package agent

// A job between terms: a candidate that competes as its policy says
// (policy.go), and its retirement. A term's own life (acquire, renew, step
// down, release) is in term.go.
//
// Every method here runs on the job's loop (loop.go), which owns the job's
// fields, its timers and its store requests; a method never blocks.

import "time"

// start makes the job a candidate on its loop.
func (j *job) start() {
	j.l.jobs[j.spec.Name] = j
	j.l.placed.stale = true
	j.started = j.l.clock.Now()
	j.startHealth()
	j.startTask()
	j.compete()
}

// compete makes the job a candidate: it tries as its policy says (at once,
// or at its next slot), unless it is retiring.
func (j *job) compete() {
	j.phase = candidate
	if j.retiring != nil {
		j.leave()
		return
	}
	j.policy.compete(j)
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
	j.timer = j.l.after(j.policy.capWait(j.l.clock.Now(), d), j.attempt)
}

// notify is a hint from the store that the lease may have changed hands.
func (j *job) notify() {
	switch j.phase {
	case asking:
		j.notified = true
	case candidate:
		j.policy.notified(j)
	}
}

// stepDown steps the job down if it leads (a drain, a failing health
// check, the fleet's balance, the API).
func (j *job) stepDown(reason error) {
	if j.phase == leading {
		j.term.stepDown(reason)
	}
}

// releaseTimeout bounds a release, so that a dead store cannot hold up a stop.
func (j *job) releaseTimeout() time.Duration { return min(j.spec.TTL, 5*time.Second) }

// retire stops the job for good (a reload, the agent stopping, RunOnce's
// one term over): it steps down if it leads, and leaves its loop once its
// lease is released. done is closed then.
func (j *job) retire(reason error) {
	if j.retiring != nil || j.phase == retired {
		return
	}
	j.retiring = reason
	switch j.phase {
	case candidate:
		j.l.cancel(j.timer)
		j.leave()
	case leading:
		j.term.stepDown(reason)
	} // asking, stopping: the answer on its way sees retiring
}

// leave takes a retiring job off its loop: its health checks and task
// watch stop, and done is closed.
func (j *job) leave() {
	j.stopHealth()
	j.stopTask()
	j.phase, j.timer = retired, nil
	if j.l.jobs[j.spec.Name] == j {
		delete(j.l.jobs, j.spec.Name)
		j.l.placed.stale = true
	}
	j.mu.Lock()
	j.left = true
	if j.doneCh != nil {
		close(j.doneCh)
	}
	j.mu.Unlock()
}
