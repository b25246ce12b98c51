package agent

import (
	"time"

	"github.com/electd/electd/internal/timing"
)

// term is a leader's view of its lease, on its own monotonic clock: the
// store may expire the lease ttl after it received the operation, which is
// no earlier than when the leader sent it.
type term struct {
	sent   time.Time // when the last successful Acquire or Renew was sent
	stopBy time.Time // timing.StopBy: stepping down must begin
}

// attemptShare is how many attempts a renewal or an acquire may make in the
// window before the step-down point: one request gets that share of it.
const attemptShare = 5

func newTerm(sent time.Time, ttl, stopTimeout time.Duration) term {
	return term{sent: sent, stopBy: timing.StopBy(sent, ttl, stopTimeout)}
}

// nextRenew is when the next renewal is sent: renewEvery after the last
// success, or retryEvery after a failure; never after stopBy, and never in
// the past.
func (t term) nextRenew(now time.Time, failed bool, renewEvery, retryEvery time.Duration) time.Time {
	next := t.sent.Add(renewEvery)
	if failed {
		next = now.Add(retryEvery)
	}
	if next.After(t.stopBy) {
		next = t.stopBy
	}
	if next.Before(now) {
		next = now
	}
	return next
}

// attemptTimeout bounds one request sent at now: a fifth of the window from
// the last success to the step-down point, never past that point. A request
// can hang for all of its deadline on a store member lost silently (packets
// dropped, no RST: the client's connection still looks ready), or on a
// member cut off from its cluster's majority; cut off early, it leaves time
// for more attempts, which a client of several members sends to another.
func (t term) attemptTimeout(now time.Time) time.Duration {
	return min(t.stopBy.Sub(now), t.stopBy.Sub(t.sent)/attemptShare)
}
