package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/electd/electd/config"
)

// A job's health check runs on every node, leader or not, on its own
// goroutine (only jobs with a health block have one); each result is posted
// to the job's loop, which alone decides what it means:
//
//	unknown ──first pass──▶ passing ──failures in a row──▶ failing
//	   │                       ▲                              │
//	   └──failures in a row────┼──────────────────────────────┤
//	                           └──────successes in a row──────┘
//
// A node competes only while its check passes; a leader whose check fails
// steps down by the normal stop protocol and releases the lease at once.
// This is judged on every result while leading, and when the answer to an
// Acquire or a renewal comes (unfitToLead, term.go), not only when the
// state changes: a check that turns to failing while a request is out is
// acted on when its answer comes.
// Health never lengthens a term: the timing rule is untouched.

type health struct {
	state         string // HealthUnknown, HealthPassing, HealthFailing
	fails, passes int    // in a row
	passingSince  time.Time
	lastCheck     time.Time
	lastError     string
	stop          context.CancelFunc
}

// startHealth starts the job's checker; it ends with the job.
func (j *job) startHealth() {
	h := j.spec.Health
	if h == nil {
		return
	}
	j.health.state = HealthUnknown
	j.setHealth(HealthStatus{Status: HealthUnknown})
	ctx, stop := context.WithCancel(context.Background())
	j.health.stop = stop
	ev := config.Event{Type: "health", Job: j.spec.Name, Node: j.node()}
	go func() {
		t := time.NewTicker(h.Interval)
		defer t.Stop()
		for {
			err := j.check(ctx, h, ev)
			if ctx.Err() != nil {
				return
			}
			j.l.post(func() { j.checked(err) })
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

func (j *job) stopHealth() {
	if j.health != nil && j.health.stop != nil {
		j.health.stop()
	}
}

// check runs the check once: nil when it passed. A check that hangs fails
// at its timeout (a command's process group is killed).
func (j *job) check(ctx context.Context, h *config.Health, ev config.Event) error {
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	if h.HTTP != "" {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.HTTP, nil)
		if err != nil {
			return err
		}
		resp, err := healthClient.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("no answer within %s", h.Timeout)
			}
			return fmt.Errorf("GET failed: %w", err)
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("answered %s", resp.Status)
		}
		return nil
	}
	ev.Time = time.Now()
	s, err := j.runner.start("health", *h.Command, ev)
	if err != nil {
		j.runner.count(ev.Type, "health", "failed")
		return fmt.Errorf("cannot start: %w", err)
	}
	timedOut := false
	select {
	case <-s.Done():
	case <-ctx.Done():
		timedOut = true
		s.Kill()
		<-s.Done()
	}
	j.runner.reap(s, timedOut)
	switch {
	case timedOut:
		return fmt.Errorf("no result within %s", h.Timeout)
	case s.Signaled():
		return fmt.Errorf("killed by a signal")
	case s.ExitCode() != 0:
		return fmt.Errorf("exit code %d", s.ExitCode())
	}
	return nil
}

// healthClient does not follow redirects to other hosts' health pages
// silently: a redirect is followed like any GET, at most 3 times.
var healthClient = &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
	if len(via) >= 3 {
		return http.ErrUseLastResponse
	}
	return nil
}}

// checked applies one result, on the loop.
func (j *job) checked(err error) {
	h, spec := j.health, j.spec.Health
	now := time.Now()
	h.lastCheck = now
	if err == nil {
		h.passes, h.fails, h.lastError = h.passes+1, 0, ""
	} else {
		h.passes, h.fails, h.lastError = 0, h.fails+1, err.Error()
	}
	was := h.state
	switch {
	case err == nil && (h.state == HealthUnknown || (h.state == HealthFailing && h.passes >= spec.Successes)):
		h.state, h.passingSince = HealthPassing, now
	case err != nil && h.state != HealthFailing && h.fails >= spec.Failures:
		h.state = HealthFailing
	}
	last := now
	j.setHealth(HealthStatus{Status: h.state, ConsecutiveFailures: h.fails, ConsecutiveSuccesses: h.passes,
		LastCheck: &last, LastError: h.lastError})
	switch {
	case h.state == was:
		if err != nil && h.state != HealthFailing {
			j.log().Warn("health check failed", "error", err, "in_a_row", h.fails, "failures", spec.Failures)
		}
	case h.state == HealthPassing:
		j.log().Info("health check passes: competing", "in_a_row", h.passes)
	case h.state == HealthFailing:
		j.log().Error("health check fails: this node stops competing", "error", err, "in_a_row", h.fails)
	}
	// Judged on every result, not only when the state changes: a leader
	// whose check is failing steps down, however it came to lead.
	if h.state == HealthFailing && j.phase == leading {
		j.stepDown(j.unhealthy())
	}
	if h.state != was {
		j.refit()
	}
}

// unhealthy is why a node whose check is failing may not lead.
func (j *job) unhealthy() error {
	h := j.health
	if h.fails == 0 {
		// Passing again, but not yet the passes in a row that make it fit.
		return fmt.Errorf("%w: %d of the %d passes in a row that make it fit again", ErrUnhealthy, h.passes, j.spec.Health.Successes)
	}
	return fmt.Errorf("%w: %s (%d checks in a row)", ErrUnhealthy, h.lastError, h.fails)
}

// healthy says whether the job's check lets it compete (jobs without a
// check always may).
func (j *job) healthy() bool { return j.spec.Health == nil || j.health.state == HealthPassing }
