package agent

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/electd/electd/config"
	"github.com/electd/electd/metrics"
	"github.com/electd/electd/providers"
)

// Job states as the API and `electd status` show them.
const (
	StateLeader    = "leader"
	StateFollower  = "follower"
	StateCandidate = "candidate"
	StateStopping  = "stopping"
)

// JobStatus is one job as GET /v1/jobs shows it.
type JobStatus struct {
	Job          string     `json:"job"`
	Provider     string     `json:"provider"`
	State        string     `json:"state"`
	Leader       string     `json:"leader"`
	Token        uint64     `json:"token"`
	Since        *time.Time `json:"since"`         // when the current state began
	LeaseExpires *time.Time `json:"lease_expires"` // the store's view, while this node leads
	LastError    string     `json:"last_error"`
	// LastLeaseOp is when a lease operation last completed (any answer,
	// "held" included); TTL is the job's ttl. The health rule (Wedged)
	// fails when the gap grows past the ttl: the loop is wedged
	// (kubernetes #82960).
	LastLeaseOp time.Time     `json:"last_lease_op"`
	TTL         time.Duration `json:"-"`
}

// ErrNoSuchJob is returned by StepDown for a job the agent does not run.
var ErrNoSuchJob = errors.New("agent: no such job")

// Wedged is the health rule of /healthz and the systemd watchdog: it
// describes the jobs whose loop has completed no lease operation for longer
// than their ttl.
func Wedged(jobs []JobStatus, now time.Time) []string {
	var wedged []string
	for _, j := range jobs {
		if j.TTL > 0 && !j.LastLeaseOp.IsZero() && now.Sub(j.LastLeaseOp) > j.TTL {
			wedged = append(wedged, fmt.Sprintf("%s: no lease operation completed for %s (ttl %s)",
				j.Job, now.Sub(j.LastLeaseOp).Round(time.Second), j.TTL))
		}
	}
	return wedged
}

// status is a job's JobStatus, written by its loop and read by the API.
type status struct {
	mu sync.Mutex
	st JobStatus
	// For the metrics (metrics.JobSample): leading from elected to
	// demoted, and the events seen.
	leading                         bool
	elected, demoted, leaderChanges uint64
}

func (s *status) sample() metrics.JobSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return metrics.JobSample{Job: s.st.Job, Leader: s.leading,
		Elected: s.elected, Demoted: s.demoted, LeaderChanges: s.leaderChanges}
}

// count records a leadership event for the metrics.
func (s *status) count(typ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch typ {
	case config.EventElected:
		s.elected++
		s.leading = true
	case config.EventDemoted:
		s.demoted++
		s.leading = false
	case config.EventLeaderChange:
		s.leaderChanges++
	}
}

func (s *status) get() JobStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// opDone records the outcome of a lease operation. Only an answer from the
// store (success, "held", "lost") counts for the health rule: an error or a
// timeout is not a completed operation, so a loop whose store stops
// answering is reported wedged.
func (s *status) opDone(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && !errors.Is(err, providers.ErrLost) {
		s.st.LastError = err.Error()
		return
	}
	s.st.LastLeaseOp = time.Now()
}

func (s *status) setLastError(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.LastError = msg
}

// clearLastError clears the last error when it is still msg.
func (s *status) clearLastError(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.LastError == msg {
		s.st.LastError = ""
	}
}

func (s *status) setStateLocked(state string) {
	if s.st.State != state {
		s.st.State = state
		now := time.Now()
		s.st.Since = &now
	}
}

func (s *status) setState(state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setStateLocked(state)
	if state != StateLeader {
		s.st.LeaseExpires = nil
	}
}

func (s *status) setLeader(node string, l providers.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setStateLocked(StateLeader)
	s.st.Leader, s.st.Token, s.st.LastError = node, l.Token, ""
	if !l.Expires.IsZero() {
		e := l.Expires
		s.st.LeaseExpires = &e
	}
}

func (s *status) setFollower(node string, token uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if node == "" {
		s.setStateLocked(StateCandidate)
	} else {
		s.setStateLocked(StateFollower)
	}
	s.st.Leader, s.st.Token = node, token
	s.st.LeaseExpires = nil
}
