package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/electd/electd/providers"
)

// A job run by RunOnce leads at most one term (`electd lock`): the election
// loop, the timing rule, the stop protocol and the release are those of
// every job; only its policy differs (oneShot, below). The job gives up
// competing after Once.Wait, and when its one term is over, for whatever
// reason, the job retires instead of competing again.

// ErrWaitTimeout is why a job of RunOnce ended without leading: it did not
// get the lease within Once.Wait. The error wraps the store's last answer
// too: a *providers.HeldError naming the holder, or the store's error.
var ErrWaitTimeout = errors.New("gave up waiting for the lease")

// ErrStoreUnreachable is why a job of RunOnce ended without leading: the
// store answered none of its requests for Once.StoreWait. It wraps the
// store's last error.
var ErrStoreUnreachable = errors.New("the store does not answer")

// ExitError is why a term ended when its run command exited by itself under
// restart = never: the command's exit code (128+N for a death by signal N).
// It is ErrWorkEnded.
type ExitError struct{ Code int }

func (e *ExitError) Error() string {
	return fmt.Sprintf("the run command exited with code %d (restart = never)", e.Code)
}

// Is makes errors.Is(err, ErrWorkEnded) true.
func (e *ExitError) Is(target error) bool { return target == ErrWorkEnded }

// Once is how RunOnce runs its job.
type Once struct {
	// Wait bounds the wait for the lease. The first attempt is always
	// made, so 0 tries once; a negative Wait waits until ctx ends. Each
	// attempt's timeout is capped by what remains of Wait (but is given
	// minOnceAttempt at least).
	Wait time.Duration
	// StoreWait bounds how long the store may answer nothing (errors and
	// timeouts only, from the first failure on) before the job gives up
	// with ErrStoreUnreachable; 0: no bound but Wait. It caps each
	// attempt's timeout too.
	StoreWait time.Duration
	// Stdout and Stderr, when both are set, receive the run command's
	// output as it is, instead of the agent's log.
	Stdout, Stderr io.Writer
}

// RunOnce runs the configuration's one job for one term. It competes for the
// lease until it leads or Wait has passed; while it leads it supervises the
// job's run command as Run does (the run block should say restart =
// "never"); then it stops the command if it still runs, releases the lease
// and returns why the term ended:
//
//   - *ExitError: the command exited by itself, with its code;
//   - ErrLeaseLost or ErrRenewDeadline: the lease was lost and the command
//     stopped before the lease could expire;
//   - ErrCannotStart: the command could not start (wrapping the cause);
//   - ErrWaitTimeout: the job never led;
//   - ErrStopping: ctx ended first (the command, if running, was stopped);
//   - or the error of opening the store, or of a stop that outlasted the
//     agent's shutdown_timeout.
func (a *Agent) RunOnce(ctx context.Context, o Once) error {
	if len(a.cfg.Jobs) != 1 {
		return fmt.Errorf("agent: RunOnce runs one job, not %d", len(a.cfg.Jobs))
	}
	defer a.opts.spares.Close()
	a.once = &oneShot{Once: o}
	if o.Wait >= 0 {
		a.once.deadline = a.opts.Clock.Now().Add(o.Wait)
	}
	if _, err := a.apply(ctx, a.cfg); err != nil {
		a.closeProviders()
		return err
	}
	a.ready.Store(true)
	r := a.jobs[0]
	select {
	case <-r.done():
	case <-ctx.Done():
	}
	if err := a.shutdown(); err != nil {
		return err
	}
	// The loop set retiring before it closed done, which shutdown saw.
	return r.retiring
}

// oneShot is RunOnce's policy (policy.go): the job's own, but the job gives
// up competing after Once.Wait, or once the store has answered nothing for
// Once.StoreWait, and retires when its one term is over.
type oneShot struct {
	policy // the job's own: how it competes
	Once
	deadline  time.Time // zero: no deadline
	attempted bool      // the first attempt was made
	last      error     // the store's last answer to an Acquire
	sent      time.Time // when the last attempt was sent
	failing   time.Time // when the first attempt of a run of failures was sent; zero: the store answers
}

// minOnceAttempt is the least time an attempt of RunOnce gets, however
// little remains of Wait: -timeout 0 still makes one real attempt.
const minOnceAttempt = time.Second

// giveUp is the error to retire the job with once the deadline has passed,
// or the store's allowance.
func (o *oneShot) giveUp(now time.Time) error {
	if o.attempted && !o.deadline.IsZero() && !now.Before(o.deadline) {
		if o.last == nil {
			return fmt.Errorf("%w after %s", ErrWaitTimeout, o.Wait)
		}
		return fmt.Errorf("%w after %s: %w", ErrWaitTimeout, o.Wait, o.last)
	}
	if o.StoreWait > 0 && !o.failing.IsZero() && now.Sub(o.failing) >= o.StoreWait {
		return fmt.Errorf("%w: no answer for %s: %w", ErrStoreUnreachable, now.Sub(o.failing).Round(time.Millisecond), o.last)
	}
	o.attempted, o.sent = true, now
	return nil
}

// capWait shortens a candidate's pause so that the deadline, or the end of
// the store's allowance, is noticed when it comes, not a retry later.
func (o *oneShot) capWait(now time.Time, d time.Duration) time.Duration {
	if !o.deadline.IsZero() {
		d = min(d, o.deadline.Sub(now))
	}
	if o.StoreWait > 0 && !o.failing.IsZero() {
		d = min(d, o.failing.Add(o.StoreWait).Sub(now))
	}
	return max(d, 0)
}

// capAttempt caps the timeout d of an attempt sent at now by what remains
// of Wait and of the store's allowance, so that an attempt against a store
// that is down cannot outlast them by a whole term window; an attempt gets
// minOnceAttempt at least (never more than d).
func (o *oneShot) capAttempt(now time.Time, d time.Duration) time.Duration {
	limit := d
	if !o.deadline.IsZero() {
		limit = min(limit, o.deadline.Sub(now))
	}
	if o.StoreWait > 0 {
		since := o.failing
		if since.IsZero() {
			since = now // this attempt may be the first failure
		}
		limit = min(limit, since.Add(o.StoreWait).Sub(now))
	}
	return min(d, max(limit, minOnceAttempt))
}

// refused records the store's answer, for ErrWaitTimeout: "held" ends a run
// of failures; an error (a timeout included) begins one or goes on.
func (o *oneShot) refused(j *job, held *providers.HeldError, err error) {
	o.answered(held, err)
	o.policy.refused(j, held, err)
}

func (o *oneShot) answered(held *providers.HeldError, err error) {
	o.last = err
	switch {
	case held != nil:
		o.failing = time.Time{}
	case o.failing.IsZero():
		o.failing = o.sent
	}
}

// termOver retires the job: no pause, no new attempt. The first reason
// given stays (ErrStopping, when the agent stopping ended the term).
func (o *oneShot) termOver(j *job, _ *term, reason error) {
	if j.retiring == nil {
		j.retiring = reason
	}
	j.leave()
}
