package agent

import (
	"errors"
	"fmt"
	"maps"
	"slices"
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
	// StateNotEligible: the job's constraint does not match this node's
	// tags; it never competes here.
	StateNotEligible = "not_eligible"
)

// Health states of a job's check on this node.
const (
	HealthUnknown = "unknown" // no check has finished yet
	HealthPassing = "passing"
	HealthFailing = "failing"
)

// HealthStatus is a job's health check as this node last ran it.
type HealthStatus struct {
	Status               string     `json:"status"`
	ConsecutiveFailures  int        `json:"consecutive_failures"`
	ConsecutiveSuccesses int        `json:"consecutive_successes"`
	LastCheck            *time.Time `json:"last_check"`
	LastError            string     `json:"last_error"` // why the last check failed
}

// Transition is one change of leadership this agent saw, for the history,
// or a task run it learned of (Type "task_run": Leader is the node that ran
// it, Reason its result, Run the run).
type Transition struct {
	Time           time.Time `json:"time"`
	Type           string    `json:"type"` // elected, demoted, leader_change, task_run
	Leader         string    `json:"leader"`
	PreviousLeader string    `json:"previous_leader"`
	Token          uint64    `json:"token"`
	Reason         string    `json:"reason"`
	Run            *TaskRun  `json:"run,omitempty"`
}

// TransitionTaskRun is the Type of a task run in the history.
const TransitionTaskRun = "task_run"

// TaskStatus is a task job's runs as GET /v1/jobs shows them. LastRun and
// LastSuccessAt come from the slot record in the store, so every node shows
// the same, whichever ran the task.
type TaskStatus struct {
	Schedule      string     `json:"schedule"`
	LastRun       *TaskRun   `json:"last_run"`        // nil: no run known
	LastSuccessAt *time.Time `json:"last_success_at"` // nil: none known
	NextRun       *time.Time `json:"next_run"`        // when the next scheduled run starts
}

// historyLen is how many transitions a job keeps.
const historyLen = 32

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
	// LastLeaseOp is when the store last answered a lease operation (any
	// answer, "held" included). LastAttempt is when a lease operation last
	// ended, answered or not (an error, a timeout): the job's loop is
	// turning. StoreUnreachableSince is when the operations began to fail,
	// while none has been answered since (nil while the store answers).
	// TTL and RetryEvery are the job's; the health rule (Wedged) fails
	// when the loop stops turning (kubernetes #82960), never because the
	// store does not answer.
	LastLeaseOp           time.Time     `json:"last_lease_op"`
	LastAttempt           time.Time     `json:"last_attempt"`
	StoreUnreachableSince *time.Time    `json:"store_unreachable_since"`
	TTL                   time.Duration `json:"-"`
	RetryEvery            time.Duration `json:"-"`
	// Eligible is false when the job's constraint excludes this node;
	// Competing is false while this node stays out of the election (not
	// eligible, unhealthy, draining, holding off), and Waiting says why.
	Eligible  bool          `json:"eligible"`
	Competing bool          `json:"competing"`
	Waiting   string        `json:"waiting,omitempty"`
	Health    *HealthStatus `json:"health,omitempty"` // nil when the job has no check
	// TokenMark is the highest fencing token this node has seen for the
	// job; TokenRegressions counts the tokens the store reported below it
	// (writes the store lost, mark.go).
	TokenMark        uint64      `json:"token_mark"`
	TokenRegressions uint64      `json:"token_regressions"`
	Task             *TaskStatus `json:"task,omitempty"` // nil when the job has no task
}

// ErrNoSuchJob is returned by StepDown for a job the agent does not run.
var ErrNoSuchJob = errors.New("agent: no such job")

// Wedged is the health rule of /healthz and the systemd watchdog: it
// describes the jobs whose loop is stuck, having ended no lease operation,
// answered or not, for longer than stuckAfter. A store that does not answer
// does not wedge a loop: its operations end in errors and timeouts, and a
// restart of the agent would not bring the store back (StoreUnreachable
// says so instead).
func Wedged(jobs []JobStatus, now time.Time) []string {
	var wedged []string
	for _, j := range jobs {
		last := j.LastAttempt
		if j.LastLeaseOp.After(last) {
			last = j.LastLeaseOp // the job's start, before any attempt ended
		}
		if limit := stuckAfter(j.TTL, j.RetryEvery); j.TTL > 0 && !last.IsZero() && now.Sub(last) > limit {
			wedged = append(wedged, fmt.Sprintf("%s: loop stuck: no lease operation ended for %s (limit %s)",
				j.Job, now.Sub(last).Round(time.Second), limit))
		}
	}
	return wedged
}

// stuckAfter is how long a working loop can go without a lease operation
// ending: an acquire's whole window (under a ttl) and a pause of
// retry_every with its jitter; a hold-off's observation (retry_every plus
// half a ttl, then up to the larger of them with jitter); a step-down's
// stop and release after the last renewal (two ttls). Three of each leaves
// a margin.
func stuckAfter(ttl, retryEvery time.Duration) time.Duration {
	return 3*ttl + 3*retryEvery
}

// StoreUnreachable describes the stores whose jobs have had no answer from
// them since their last failure: one line per provider, with the oldest
// failure and the last error.
func StoreUnreachable(jobs []JobStatus, now time.Time) []string {
	type outage struct {
		since time.Time
		jobs  int
		err   string
	}
	byProvider := map[string]*outage{}
	var order []string
	for _, j := range jobs {
		if j.StoreUnreachableSince == nil {
			continue
		}
		o := byProvider[j.Provider]
		if o == nil {
			o = &outage{since: *j.StoreUnreachableSince}
			byProvider[j.Provider] = o
			order = append(order, j.Provider)
		}
		o.jobs++
		if !j.StoreUnreachableSince.After(o.since) {
			o.since, o.err = *j.StoreUnreachableSince, j.LastError
		}
		if o.err == "" {
			o.err = j.LastError
		}
	}
	slices.Sort(order)
	var out []string
	for _, p := range order {
		o := byProvider[p]
		line := fmt.Sprintf("%s: store unreachable since %s (%s ago, %d job(s))", p,
			o.since.Format(time.RFC3339), now.Sub(o.since).Round(time.Second), o.jobs)
		if o.err != "" {
			line += ": " + o.err
		}
		out = append(out, line)
	}
	return out
}

// status is a job's JobStatus, written by its loop and read by the API.
type status struct {
	mu sync.Mutex
	// For the metrics (metrics.JobSample): leading from elected to
	// demoted, and the events seen.
	leading bool
	left    bool  // the job has left its loop (job.done)
	next    int32 // the oldest transition in history, once it is full
	doneCh  chan struct{}
	st      JobStatus
	// The last transitions, oldest first (a ring once full).
	history                         []Transition
	elected, demoted, leaderChanges uint64
	// ops counts the lease operations ended, answered or not (opDone):
	// tests wait on it for proof that the loop turned.
	ops uint64
	// Terms of this node that ended, by reason (electd_leader_changes_total).
	termsEnded map[string]uint64
	// A task job's last runs (a ring of their own, so that a task every
	// minute does not push the leadership changes out), its spec and the
	// last slot recorded, for task.next_run.
	runs     []Transition
	nextRun  int32
	taskSpec *config.Task
	taskLast time.Time
	// The result of the task's last run that has ended, as the record
	// said it ("": none seen ended yet): a run in progress keeps the one
	// before it (electd_task_last_run_succeeded).
	taskLastEnded string
}

// recordRun adds a task run to the history.
func (s *status) recordRun(t Transition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	push(&s.runs, &s.nextRun, t)
}

// push adds t to a ring of historyLen transitions, whose oldest is at
// *next once it is full.
func push(ring *[]Transition, next *int32, t Transition) {
	if len(*ring) < historyLen {
		*ring = append(*ring, t)
		return
	}
	(*ring)[*next] = t
	*next = (*next + 1) % historyLen
}

// setTask shows what the slot record says.
func (s *status) setTask(rec slotRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := &TaskStatus{Schedule: s.taskSpec.ScheduleText, LastRun: rec.run}
	if !rec.lastSuccess.IsZero() {
		t := rec.lastSuccess
		ts.LastSuccessAt = &t
	}
	s.st.Task, s.taskLast = ts, rec.slot
	if rec.run != nil && rec.run.Result != ResultRunning {
		s.taskLastEnded = rec.run.Result
	}
}

func (s *status) record(t Transition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	push(&s.history, &s.next, t)
}

// History is the transitions kept, oldest first.
func (s *status) History() []Transition {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Transition, 0, len(s.history)+len(s.runs))
	out = append(out, s.history[s.next:]...)
	out = append(out, s.history[:s.next]...)
	if len(s.runs) > 0 {
		out = append(out, s.runs...)
		slices.SortStableFunc(out, func(a, b Transition) int { return a.Time.Compare(b.Time) })
	}
	return out
}

// setCompeting records whether the job competes here, and why not.
func (s *status) setCompeting(competing bool, waiting string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Competing, s.st.Waiting = competing, waiting
	if !s.st.Eligible && s.st.State == StateCandidate {
		s.setStateLocked(StateNotEligible)
	}
}

func (s *status) setHealth(h HealthStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Health = &h
}

func (s *status) sample() metrics.JobSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	js := metrics.JobSample{Job: s.st.Job, Leader: s.leading,
		Elected: s.elected, Demoted: s.demoted, LeaderChanges: s.leaderChanges, Eligible: s.st.Eligible,
		TokenRegressions: s.st.TokenRegressions}
	if len(s.termsEnded) > 0 {
		js.TermsEnded = maps.Clone(s.termsEnded)
	}
	if s.st.Health != nil {
		js.HasHealth, js.Healthy = true, s.st.Health.Status == HealthPassing
	}
	if t := s.st.Task; t != nil {
		if t.LastSuccessAt != nil {
			js.LastSuccess = *t.LastSuccessAt
		}
		js.NextRun = nextRun(s.taskSpec, s.st.Job, s.taskLast, time.Now())
		if s.taskLastEnded != "" {
			js.LastRunKnown, js.LastRunSucceeded = true, s.taskLastEnded == ResultSucceeded
		}
	}
	return js
}

// countTermEnded counts a term of this node that ended, by reason: a move
// of the job, or a gap in its leadership.
func (s *status) countTermEnded(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.termsEnded == nil {
		s.termsEnded = map[string]uint64{}
	}
	s.termsEnded[reason]++
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
	st := s.st
	if t := st.Task; t != nil {
		c := *t
		if next := nextRun(s.taskSpec, st.Job, s.taskLast, time.Now()); !next.IsZero() {
			c.NextRun = &next
		}
		st.Task = &c
	}
	return st
}

// opDone records the outcome of a lease operation. An answer from the
// store (success, "held", "lost") is a completed operation; an error or a
// timeout is not, and starts or continues the store's outage. Either shows
// that the loop turns (Wedged).
func (s *status) opDone(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.st.LastAttempt = now
	s.ops++
	if err != nil && !errors.Is(err, providers.ErrLost) {
		s.st.LastError = err.Error()
		if s.st.StoreUnreachableSince == nil {
			s.st.StoreUnreachableSince = &now
		}
		return
	}
	s.st.LastLeaseOp, s.st.StoreUnreachableSince = now, nil
}

// opsDone is how many lease operations the job has ended (opDone).
func (s *status) opsDone() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ops
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
	if state == StateCandidate && !s.st.Eligible {
		state = StateNotEligible
	}
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
	switch {
	case !s.st.Eligible:
		s.setStateLocked(StateNotEligible) // the leader is shown all the same
	case node == "":
		s.setStateLocked(StateCandidate)
	default:
		s.setStateLocked(StateFollower)
	}
	s.st.Leader, s.st.Token = node, token
	s.st.LeaseExpires = nil
}

func (s *status) setTokenMark(token uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.TokenMark = token
}

// countRegression counts a token reported below the mark and returns the
// count.
func (s *status) countRegression() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.TokenRegressions++
	return s.st.TokenRegressions
}

// inheritTokens keeps the mark's figures of the job this one replaces.
func (s *status) inheritTokens(prior JobStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.TokenMark, s.st.TokenRegressions = prior.TokenMark, prior.TokenRegressions
}
