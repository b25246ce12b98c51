package agent

import (
	"slices"
	"time"

	"github.com/electd/electd/config"
	"github.com/electd/electd/metrics"
	"github.com/electd/electd/providers"
	"github.com/hashicorp/go-hclog"
)

type phase int

const (
	candidate phase = iota // waiting for its next attempt (or holding off)
	asking                 // an Acquire or Observe is in flight
	leading
	stopping // the work stops, then the lease is released
	ended
)

// job is one job's election: a small struct driven by its loop.
type job struct {
	spec         *config.Job // in the configuration the job came from
	node, holder string      // node_id, and node_id#incarnation as the store records it (identity.go)
	l            *loop
	log          hclog.Logger
	hooks        *hookRunner // nil when the job has no hooks
	runner       *runner     // nil when it runs no command
	metrics      *metrics.Metrics
	status

	phase    phase
	timer    *timer
	lease    providers.Lease
	term     term
	began    time.Time
	failed   bool // the last renewal failed: retry at retry_every
	renewing bool // a renewal is in flight; they go one at a time
	queued   *renewal
	work     *leaderWork
	slot     time.Time  // lock mode: the slot of this attempt
	holdOff  time.Time  // a candidate does not compete before
	backoffs int        // terms in a row whose work ended by itself
	notified bool       // a notification came while asking
	ending   error      // end was called: no new term
	once     *onceState // RunOnce: one term only (once.go); nil under Run
	started  time.Time  // when the job started on this agent
	eligible bool       // its constraint admits this node
	health   health     // its health check's state (health.go)

	// The leader as this node last knew it, for on_leader_change (events.go).
	known      bool
	lastLeader string
	clash      *clash

	loopDone chan struct{} // the job ended: work stopped, lease released
}

type renewal struct {
	value string
	then  func(error)
}

// newJob is a job of spec, not started: its loop starts it.
func newJob(spec *config.Job, node, holder string, l *loop, o Options, log hclog.Logger) *job {
	log = jobLog{log, spec.Name}
	j := &job{
		spec: spec, node: node, holder: holder, l: l, log: log, metrics: o.Metrics,
		loopDone: make(chan struct{}),
	}
	hooks := [][]config.Action{spec.OnElected, spec.OnDemoted, spec.OnLeaderChange}
	if spec.Run != nil || spec.Task != nil || (spec.Health != nil && spec.Health.Command != nil) || slices.ContainsFunc(hooks, func(as []config.Action) bool {
		return slices.ContainsFunc(as, func(a config.Action) bool { return a.Kind == config.ActionExec })
	}) {
		j.runner = &runner{job: spec.Name, log: log, shim: o.Shim, spares: o.spares, metrics: o.Metrics}
		o.spares.Fill() // a candidate starts its command the moment it is elected
	}
	if slices.ContainsFunc(hooks, func(as []config.Action) bool { return len(as) > 0 }) {
		j.hooks = &hookRunner{job: spec.Name, log: log, runner: j.runner, webhooks: o.Webhooks}
	}
	j.eligible = matches(l.fleet.tags, spec.Constraint)
	j.st = JobStatus{Job: spec.Name, Provider: spec.Provider, State: StateCandidate, TTL: spec.TTL, Eligible: j.eligible}
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

// inherit takes over what the job it replaces (after a reload) knew of the
// leader: on_elected's previous_leader and a follower's since stay right.
// prior has ended.
func (j *job) inherit(prior *job) {
	j.known, j.lastLeader, j.clash = prior.known, prior.lastLeader, prior.clash
	st := prior.get()
	if st.State == StateFollower {
		j.mu.Lock()
		j.st.State, j.st.Leader, j.st.Token, j.st.Since = st.State, st.Leader, st.Token, st.Since
		j.mu.Unlock()
	}
}

// jobLog is a logger that adds the job's name to every line. It costs a
// string per job where log.With would copy the logger.
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
