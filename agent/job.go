package agent

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/timing"
	"github.com/hashicorp/go-hclog"
)

type phase uint8

const (
	candidate phase = iota // waiting for its next attempt (or holding off)
	asking                 // an Acquire or Observe is in flight
	leading
	stopping // the work stops, then the lease is released
	retired  // off its loop for good (job.retire)
)

// job is one job's election: a small struct driven by its loop.
type job struct {
	spec   *config.Job // in the configuration the job came from
	l      *loop
	policy policy      // how it competes: supervised, per slot, one shot (policy.go)
	term   *term       // while it leads, and until the term's lease is released (term.go)
	hooks  *hookRunner // nil when the job has no hooks
	runner *runner     // nil when it runs no command
	status

	// Together, so that they take one word.
	phase     phase
	notified  bool  // a notification came while asking
	eligible  bool  // its constraint admits this node
	known     bool  // lastLeader is known (below)
	backoffs  uint8 // terms in a row whose work ended by itself, up to maxBackoffs
	drainKept bool  // a draining agent leads it on, for want of another that can (fleet.go)

	timer    *timer     // a candidate's next attempt
	holdOff  time.Time  // a candidate does not compete before
	rushed   time.Time  // when a refused attempt was last retried at once on a notification
	retiring error      // why retire was called: no new term
	started  time.Time  // when the job started on this agent
	health   *health    // its health check's state (health.go); nil without a check
	task     *taskState // its runs as this node knows them (task.go); nil without a task

	// The leader as this node last knew it, for on_leader_change (events.go).
	lastLeader string
	clash      *clash

	bits canBits // its bits in a membership record's canSet (members.go)

	// The highest token seen for the job, and the last one reported below
	// it (mark.go).
	mark, regressed uint64
}

// newJob is a job of spec, not started: its loop starts it.
func newJob(spec *config.Job, l *loop, o Options) *job {
	j := &job{spec: spec, l: l, policy: supervised{}}
	j.st.Job = spec.Name // log() names the job from it
	if spec.Mode == config.ModeLock {
		j.policy = &perSlot{}
	}
	log := j.log()
	if needsRunner(spec) {
		j.runner = &runner{job: spec.Name, log: log, shim: o.Shim, spares: o.spares, metrics: o.Metrics, as: spec.RunAs}
		o.spares.Fill() // a candidate starts its command the moment it is elected
	}
	if hasHooks(spec) {
		j.hooks = &hookRunner{job: spec.Name, log: log, runner: j.runner, webhooks: o.Webhooks}
	}
	if spec.Health != nil {
		j.health = &health{}
	}
	j.taskSpec = spec.Task
	j.bits = canBitsOf(spec.Name)
	j.eligible = matches(l.fleet.tags, spec.Constraint)
	j.st = JobStatus{Job: spec.Name, Provider: spec.Provider, State: StateCandidate, TTL: spec.TTL, RetryEvery: spec.RetryEvery, Eligible: j.eligible}
	if !j.eligible {
		j.st.State = StateNotEligible
	}
	if spec.Mode == config.ModeLock {
		// Between slots a lock job does not touch the store, so a quiet
		// loop is not a wedged one (see Wedged).
		j.st.TTL = 0
	}
	now := time.Now()
	j.st.Since = &now
	// A store that never answers wedges the loop from its start.
	j.st.LastLeaseOp = now
	return j
}

func hooksOf(spec *config.Job) [][]config.Action {
	return [][]config.Action{spec.OnElected, spec.OnDemoted, spec.OnLeaderChange, spec.OnTaskFailed, spec.OnTaskSucceeded}
}

// needsRunner says whether a job of spec starts commands: run, task, a
// health command or an exec hook.
func needsRunner(spec *config.Job) bool {
	return spec.Run != nil || spec.Task != nil || (spec.Health != nil && spec.Health.Command != nil) || slices.ContainsFunc(hooksOf(spec), func(as []config.Action) bool {
		return slices.ContainsFunc(as, func(a config.Action) bool { return a.Kind == config.ActionExec })
	})
}

func hasHooks(spec *config.Job) bool {
	return slices.ContainsFunc(hooksOf(spec), func(as []config.Action) bool { return len(as) > 0 })
}

// update applies, on the loop, a reload's new spec whose changes are all
// applied in place (Diff): the leadership, token, command and history stay.
// A new stop_timeout moves the term's step-down point; a new health check
// starts over; a constraint that no longer admits this node makes a leader
// step down and a candidate stop competing.
func (j *job) update(spec *config.Job, attrs []string, o Options) {
	j.spec = spec
	if j.hooks == nil && hasHooks(spec) {
		j.hooks = &hookRunner{job: spec.Name, log: j.log(), runner: j.runner, webhooks: o.Webhooks}
	}
	if slices.ContainsFunc(attrs, func(a string) bool { return a == "health" || strings.HasPrefix(a, "health.") }) {
		j.stopHealth()
		j.health = nil
		if spec.Health != nil {
			j.health = &health{}
			j.startHealth()
		} else {
			j.mu.Lock()
			j.st.Health = nil
			j.mu.Unlock()
		}
	}
	j.eligible = matches(j.l.fleet.tags, spec.Constraint)
	j.mu.Lock()
	j.st.Eligible, j.st.RetryEvery = j.eligible, spec.RetryEvery
	j.mu.Unlock()
	j.l.placed.stale = true
	if len(attrs) > 0 {
		j.log().Info("configuration changed: applied in place, the job keeps running", "attributes", strings.Join(attrs, ","))
	}
	switch j.phase {
	case leading:
		if !j.eligible {
			j.stepDown(fmt.Errorf("%w: its constraint no longer admits this node", ErrConfigChanged))
			return
		}
		j.term.retime()
	case candidate:
		if why := j.unfit(); why != "" {
			j.setCompeting(false, why)
		}
		j.refit()
	}
}

// done is closed once the job has retired: its work stopped, its lease
// released. The channel is made when first asked for (at a reload or a
// stop), not kept by every job for its whole life.
func (j *job) done() <-chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.doneCh == nil {
		j.doneCh = make(chan struct{})
		if j.left {
			close(j.doneCh)
		}
	}
	return j.doneCh
}

// node is this agent's node_id; holder is node_id#incarnation, as the store
// records it (identity.go). Both are the agent's, kept once in its fleet.
func (j *job) node() string   { return j.l.fleet.node }
func (j *job) holder() string { return j.l.fleet.holder }

// inherit takes over what the job it replaces (after a reload) knew of the
// leader: on_elected's previous_leader and a follower's since stay right.
// prior has retired.
func (j *job) inherit(prior *job) {
	j.known, j.lastLeader, j.clash = prior.known, prior.lastLeader, prior.clash
	j.mark, j.regressed = prior.mark, prior.regressed
	j.inheritTokens(prior.get())
	st := prior.get()
	if st.State == StateFollower {
		j.mu.Lock()
		j.st.State, j.st.Leader, j.st.Token, j.st.Since = st.State, st.Leader, st.Token, st.Since
		j.mu.Unlock()
	}
}

// log is the loop's logger with the job's name on every line. It is made
// when a line is logged, rather than kept: thousands of jobs log little.
// The name is the status's, which never changes: a reload may replace
// j.spec on the loop while the work's stop logs off it.
func (j *job) log() hclog.Logger { return jobLog{j.l.log, j.st.Job} }

// name is the job's name, safe to read off the loop.
func (j *job) name() string { return j.st.Job }

// jobLog is a logger that adds the job's name to every line. It costs a
// string where log.With would copy the logger.
type jobLog struct {
	hclog.Logger
	job string
}

func (l jobLog) args(args []any) []any { return append([]any{"job", l.job}, args...) }

func (l jobLog) Log(level hclog.Level, msg string, args ...any) {
	l.Logger.Log(level, msg, l.args(args)...)
}
func (l jobLog) Trace(msg string, args ...any)  { l.Logger.Trace(msg, l.args(args)...) }
func (l jobLog) Debug(msg string, args ...any)  { l.Logger.Debug(msg, l.args(args)...) }
func (l jobLog) Info(msg string, args ...any)   { l.Logger.Info(msg, l.args(args)...) }
func (l jobLog) Warn(msg string, args ...any)   { l.Logger.Warn(msg, l.args(args)...) }
func (l jobLog) Error(msg string, args ...any)  { l.Logger.Error(msg, l.args(args)...) }
func (l jobLog) ImpliedArgs() []any             { return l.args(l.Logger.ImpliedArgs()) }
func (l jobLog) With(args ...any) hclog.Logger  { return jobLog{l.Logger.With(args...), l.job} }
func (l jobLog) Named(name string) hclog.Logger { return jobLog{l.Logger.Named(name), l.job} }

// retime follows a reload that changed the job's stop_timeout in place:
// the step-down point moves, and the next renewal with it.
func (t *term) retime() {
	j := t.j
	t.stopBy = timing.StopBy(t.sent, j.spec.TTL, j.spec.StopTimeout())
	if t.renewing {
		j.l.cancel(t.timer)
		t.timer = j.l.at(t.stopBy, func() {
			t.timer = nil
			t.pastDeadline()
		})
		return
	}
	if !t.pastDeadline() {
		t.scheduleRenewal()
	}
}
