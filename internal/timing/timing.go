// Package timing is electd's one timing rule (docs/leases.md): what a leader
// may count on from a lease it renewed, and what a job's ttl, renew_every
// and stop_timeout must leave room for. `electd check` (config), the agent's
// election loop and `electd lock` all use it, so the rule a configuration is
// checked against is the rule the agent runs.
package timing

import (
	"math"
	"time"
)

// SafetyMargin is the share of the ttl a leader gives up to clock rate
// differences between itself and the store: a term is valid for
// ttl×(1-SafetyMargin) from when its request was sent.
const SafetyMargin = 0.01

// KillMargin is the time left for SIGKILL to take effect after stop_timeout,
// so that work is dead, not dying, when the term ends.
const KillMargin = 100 * time.Millisecond

// MinTTL is the shortest ttl of any job: below it the rule leaves no time
// for renewals, and a store's answer can take longer than the term.
const MinTTL = time.Second

// Budget is the part of a ttl the leader may count on: ttl×(1-SafetyMargin).
func Budget(ttl time.Duration) time.Duration {
	return ttl - time.Duration(float64(ttl)*SafetyMargin)
}

// ValidUntil is the end of a term whose Acquire or Renew was sent at sent,
// on the leader's monotonic clock: the store may expire the lease ttl after
// it received the request, which is no earlier than when it was sent.
func ValidUntil(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(Budget(ttl))
}

// StopBy is when a leader must begin stepping down so that its work is dead
// by ValidUntil: stop_timeout for the stop signal, then KillMargin for SIGKILL.
func StopBy(sent time.Time, ttl, stopTimeout time.Duration) time.Time {
	return ValidUntil(sent, ttl).Add(-stopTimeout - KillMargin)
}

// NextRenew is when a leader sends its next renewal, at now: renewEvery
// after the one sent at sent (the last that succeeded), or retryEvery after
// a failure; never after stopBy, and never in the past.
func NextRenew(sent, stopBy, now time.Time, failed bool, renewEvery, retryEvery time.Duration) time.Time {
	next := sent.Add(renewEvery)
	if failed {
		next = now.Add(retryEvery)
	}
	if next.After(stopBy) {
		next = stopBy
	}
	if next.Before(now) {
		next = now
	}
	return next
}

// AttemptShare is how many attempts a renewal may make in the window
// before the step-down point: one request gets that share of it.
const AttemptShare = 5

// AttemptTimeout bounds one renewal sent at now: a fifth of the window from
// the last success (sent) to the step-down point, never past that point. A
// request can hang for all of its deadline on a store member lost silently
// or cut off from its majority; cut off early, it leaves time for more
// attempts, which a client of several members sends to another.
func AttemptTimeout(sent, stopBy, now time.Time) time.Duration {
	return min(stopBy.Sub(now), stopBy.Sub(sent)/AttemptShare)
}

// Problem says how a job's timings break the rule; nil when they keep it.
type Problem struct {
	// RenewNotShorter: renew_every is not shorter than the ttl.
	RenewNotShorter bool
	// Need is renew_every×renewals + stop_timeout + KillMargin, which must
	// be less than Budget (the ttl×0.99 of the rule).
	Need, Budget time.Duration
	// MinTTL is the smallest whole-second ttl that keeps the rule with the
	// same renew_every and stop_timeout.
	MinTTL time.Duration
	// MaxRenew is the largest renew_every (in 100ms steps) that keeps the
	// rule with the same ttl and stop_timeout; zero when none does.
	MaxRenew time.Duration
}

// Check applies the rule to a job: the leader must get renewals renewal
// attempts, and then time to stop its work and for SIGKILL to take effect,
// within Budget(ttl). A job's rule is two renewals (CheckJob); `electd
// lock`, which chooses its own renew_every, asks for three.
func Check(ttl, renewEvery, stopTimeout time.Duration, renewals int) *Problem {
	if renewEvery >= ttl {
		return &Problem{RenewNotShorter: true}
	}
	stop := stopTimeout + KillMargin
	need, budget := time.Duration(renewals)*renewEvery+stop, Budget(ttl)
	if need < budget {
		return nil
	}
	keep := 1 - SafetyMargin
	minTTL := time.Duration(math.Floor(float64(need)/keep/float64(time.Second))+1) * time.Second
	step := 100 * time.Millisecond
	maxRenew := time.Duration(math.Ceil(float64(budget-stop)/float64(renewals)/float64(step))-1) * step
	return &Problem{Need: need, Budget: budget, MinTTL: minTTL, MaxRenew: max(maxRenew, 0)}
}

// CheckJob is Check with a job's two renewal attempts.
func CheckJob(ttl, renewEvery, stopTimeout time.Duration) *Problem {
	return Check(ttl, renewEvery, stopTimeout, 2)
}
