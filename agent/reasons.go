package agent

import (
	"errors"
	"math/rand/v2"
	"time"
)

// Why a term ended. The reason is one of these, wrapped with detail.
var (
	ErrLeaseLost         = errors.New("the store says the lease is lost")
	ErrRenewDeadline     = errors.New("the lease could not be renewed in time")
	ErrStepDownRequested = errors.New("step-down requested")
	ErrStopping          = errors.New("the agent is stopping")
	ErrConfigChanged     = errors.New("the job's configuration changed")
	ErrJobRemoved        = errors.New("the job was removed from the configuration")
	ErrCannotStart       = errors.New("the command cannot start on this node")
	ErrFailing           = errors.New("the run command keeps failing")
	ErrWorkEnded         = errors.New("the run command exited (restart = never)")
	ErrSlotDone          = errors.New("the slot is done")
	ErrUnhealthy         = errors.New("the job's health check fails on this node")
	ErrPreempted         = errors.New("a preferred node is ready to lead")
	ErrBalanced          = errors.New("handed over to spread the jobs over the agents")
	ErrDrained           = errors.New("the agent is draining")
)

// Reasons as events (event.reason, ELECTD_REASON) and the history show them.
const (
	ReasonElected       = "elected"
	ReasonLeaderChange  = "observed" // another node was seen leading
	ReasonLost          = "lost"
	ReasonRenewDeadline = "renew_deadline"
	ReasonReleased      = "released" // a step-down asked for through the API
	ReasonStopping      = "stopping"
	ReasonReloaded      = "reloaded"
	ReasonRemoved       = "removed"
	ReasonCannotStart   = "cannot_start"
	ReasonFailing       = "failing"
	ReasonWorkEnded     = "work_ended"
	ReasonSlotDone      = "slot_done"
	ReasonUnhealthy     = "unhealthy"
	ReasonPreempted     = "preempted"
	ReasonBalanced      = "balanced"
	ReasonDrained       = "drained"
)

var reasonNames = []struct {
	err  error
	name string
}{
	{ErrLeaseLost, ReasonLost}, {ErrRenewDeadline, ReasonRenewDeadline}, {ErrStepDownRequested, ReasonReleased},
	{ErrStopping, ReasonStopping}, {ErrConfigChanged, ReasonReloaded}, {ErrJobRemoved, ReasonRemoved},
	{ErrCannotStart, ReasonCannotStart}, {ErrFailing, ReasonFailing}, {ErrWorkEnded, ReasonWorkEnded},
	{ErrSlotDone, ReasonSlotDone}, {ErrUnhealthy, ReasonUnhealthy}, {ErrPreempted, ReasonPreempted},
	{ErrBalanced, ReasonBalanced}, {ErrDrained, ReasonDrained},
}

// reasonOf is the short name of why a term ended.
func reasonOf(err error) string {
	for _, r := range reasonNames {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return ReasonReleased
}

// failure says whether a term that ended for reason is shown as the job's
// last error.
func failure(reason error) bool {
	for _, err := range []error{ErrLeaseLost, ErrRenewDeadline, ErrCannotStart, ErrFailing, ErrUnhealthy} {
		if errors.Is(reason, err) {
			return true
		}
	}
	return false
}

// pause is how long a node stays out of the election after a term that
// ended for reason.
func (j *job) pause(reason error) time.Duration {
	var why string
	switch {
	case errors.Is(reason, ErrStepDownRequested), errors.Is(reason, ErrPreempted), errors.Is(reason, ErrBalanced):
		return j.spec.TTL // let another node take over
	case errors.Is(reason, ErrWorkEnded):
		// A command that exits at once must not make an election storm.
		d := min(j.spec.RetryEvery<<j.backoffs, maxBackoff)
		j.backoffs = min(j.backoffs+1, maxBackoffs)
		j.log().Info("backing off before competing again", "for", d)
		return d
	case j.spec.Run == nil:
		return 0
	case errors.Is(reason, ErrCannotStart):
		why = "cannot_start"
	case errors.Is(reason, ErrFailing):
		why = "failing"
	default:
		return 0
	}
	j.log().Error("this node cannot do the work: gave the job away", "reason", reason.Error(), "hold_off", j.spec.Run.HoldOff)
	if j.l.metrics != nil {
		j.l.metrics.GivenAway.WithLabelValues(j.spec.Name, why).Inc()
	}
	return j.spec.Run.HoldOff
}

// maxBackoff caps the pause between terms whose work ends by itself;
// maxBackoffs is as far as a job counts them (retry_every << 20 is past
// any cap).
const (
	maxBackoff  = time.Minute
	maxBackoffs = 20
)

// jitter spreads candidates' retries over [d, 1.2d) (client-go's factor).
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}
