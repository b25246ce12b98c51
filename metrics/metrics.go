package metrics

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/electd/electd/providers"
)

// Metrics is one agent's set. Its own registry (not the global default) keeps
// tests and several agents in one process apart.
type Metrics struct {
	reg         *prometheus.Registry
	jobs        *jobsCollector // electd_is_leader, electd_transitions_total
	LeaseOp     *prometheus.HistogramVec
	LeaseErrors *prometheus.CounterVec // provider, op
	ActionRuns  *prometheus.CounterVec // job, event, kind, result
	GivenAway   *prometheus.CounterVec // job, reason
	// A task's runs on this node: counted by the node that ran (or
	// skipped) them, so sum them over the fleet.
	TaskRuns     *prometheus.CounterVec   // job, result
	TaskDuration *prometheus.HistogramVec // job
	// OutputDropped counts command output lines kept out of the log by
	// the job's rate limit.
	OutputDropped *prometheus.CounterVec // job
	// ResourceErrors counts commands that could not start because this
	// node was short of a resource (open files, memory, processes).
	ResourceErrors *prometheus.CounterVec // job, errno
}

func New(version, commit string) *Metrics {
	m := &Metrics{
		reg:  prometheus.NewRegistry(),
		jobs: &jobsCollector{},
		LeaseOp: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "electd_lease_op_seconds",
			Help:    "Duration of lease operations against the store.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"provider", "op"}),
		LeaseErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "electd_lease_op_errors_total",
			Help: "Lease operations that failed (store errors and timeouts; a lease held by another node or lost is an answer, not an error).",
		}, []string{"provider", "op"}),
		ActionRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "electd_action_runs_total", Help: "Hook actions, run commands and tasks run, by outcome.",
		}, []string{"job", "event", "kind", "result"}),
		GivenAway: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "electd_job_given_away_total",
			Help: "Times this node gave a job away because it could not do the work: its run command could not start (cannot_start) or failed max_failures times in a row (failing).",
		}, []string{"job", "reason"}),
		TaskRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "electd_task_runs_total",
			Help: "Task runs this node ran or skipped, by result (succeeded, failed, timed_out, killed, skipped).",
		}, []string{"job", "result"}),
		TaskDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "electd_task_duration_seconds",
			Help:    "How long the task runs this node ran took, from start to exit.",
			Buckets: []float64{.1, .5, 1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400},
		}, []string{"job"}),
		OutputDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "electd_output_lines_dropped_total",
			Help: "Lines of command output kept out of the agent's log by the job's rate limit.",
		}, []string{"job"}),
		ResourceErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "electd_resource_errors_total",
			Help: "Commands that could not start because this node was short of a resource, by errno (EMFILE, ENFILE, ENOMEM, EAGAIN, ...).",
		}, []string{"job", "errno"}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "electd_build_info", Help: "Build of this agent; always 1.",
	}, []string{"version", "commit", "goversion"})
	build.WithLabelValues(version, commit, runtime.Version()).Set(1)
	m.reg.MustRegister(m.jobs, m.LeaseOp, m.LeaseErrors, m.ActionRuns, m.GivenAway, m.TaskRuns, m.TaskDuration, m.OutputDropped, m.ResourceErrors, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is for tests and for embedding more collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Instrument wraps p so every operation is timed and failures counted under
// the provider's reference (e.g. "sql.main"). The result unwraps to p
// (providers.Wrapper), so p's optional capabilities (providers.Notifier,
// providers.Batcher) are still found with
// providers.As; a plain type assertion on the result does not find them.
func (m *Metrics) Instrument(ref string, p providers.Provider) providers.Provider {
	ip := &instrumented{p: p, ref: ref, m: m}
	for _, op := range []string{"acquire", "renew", "release", "observe"} {
		m.LeaseErrors.WithLabelValues(ref, op) // zero series, so rate() works before the first error
	}
	return ip
}

type instrumented struct {
	p   providers.Provider
	ref string
	m   *Metrics
}

func (i *instrumented) observe(op string, start time.Time, err error) {
	i.m.LeaseOp.WithLabelValues(i.ref, op).Observe(time.Since(start).Seconds())
	if err != nil && !errors.Is(err, providers.ErrHeld) && !errors.Is(err, providers.ErrLost) {
		i.m.LeaseErrors.WithLabelValues(i.ref, op).Inc()
	}
}

func (i *instrumented) Acquire(ctx context.Context, req providers.AcquireRequest) (providers.Lease, error) {
	start := time.Now()
	l, err := i.p.Acquire(ctx, req)
	i.observe("acquire", start, err)
	return l, err
}

func (i *instrumented) Renew(ctx context.Context, l providers.Lease) (providers.Lease, error) {
	start := time.Now()
	l, err := i.p.Renew(ctx, l)
	i.observe("renew", start, err)
	return l, err
}

func (i *instrumented) Release(ctx context.Context, l providers.Lease) error {
	start := time.Now()
	err := i.p.Release(ctx, l)
	i.observe("release", start, err)
	return err
}

func (i *instrumented) Observe(ctx context.Context, key string) (providers.Lease, error) {
	start := time.Now()
	l, err := i.p.Observe(ctx, key)
	i.observe("observe", start, err)
	return l, err
}

func (i *instrumented) Close() error { return i.p.Close() }

var (
	_ providers.Provider = (*instrumented)(nil)
	_ providers.Wrapper  = (*instrumented)(nil)
)

// Unwrap gives the provider beneath, for capability lookups (providers.As).
func (i *instrumented) Unwrap() providers.Provider { return i.p }

// ObserveBatch records one batched request (op "acquire_batch",
// "renew_batch" or "release_batch"), timed like every other lease operation.
func (m *Metrics) ObserveBatch(ref, op string, start time.Time, err error) {
	m.LeaseOp.WithLabelValues(ref, op).Observe(time.Since(start).Seconds())
	if err != nil {
		m.LeaseErrors.WithLabelValues(ref, op).Inc()
	}
}

// JobSample is one job's leadership as a scrape sees it.
type JobSample struct {
	Job    string
	Leader bool
	// The leadership events this node saw, by type.
	Elected, Demoted, LeaderChanges uint64
	// Eligible: the job's constraint admits this node. Healthy is the
	// job's health check here, when it has one.
	Eligible, HasHealth, Healthy bool
	// TokenRegressions: tokens the store reported below the highest this
	// node had seen (writes it lost in a failover).
	TokenRegressions uint64
	// TermsEnded: the terms of this node that ended, by reason (the
	// agent's reason vocabulary: balanced, drained, lost, ...).
	TermsEnded map[string]uint64
	// A task job's fleet-wide record, as this node last saw it (zero
	// times: not known, or not a task job).
	LastSuccess, NextRun time.Time
	// LastRunSucceeded: the record's last run that ended succeeded (a run
	// in progress leaves the one before it). LastRunKnown is false until
	// a run that ended is known.
	LastRunKnown, LastRunSucceeded bool
}

// CollectJobs sets where electd_is_leader and electd_transitions_total come
// from: each scrape asks the agent for its jobs. The agent keeps one small
// count per event type and job, where a metric vector would keep a series
// object per label set (about 1 KiB each, 30,000 of them at 10,000 jobs).
func (m *Metrics) CollectJobs(sample func() []JobSample) {
	m.jobs.mu.Lock()
	defer m.jobs.mu.Unlock()
	m.jobs.sample = sample
}

var (
	isLeaderDesc = prometheus.NewDesc("electd_is_leader",
		"1 while this node leads the job, else 0.", []string{"job"}, nil)
	transitionsDesc = prometheus.NewDesc("electd_transitions_total",
		"Leadership events seen by this node, by type (elected, demoted, leader_change).", []string{"job", "type"}, nil)
	healthyDesc = prometheus.NewDesc("electd_job_healthy",
		"1 while the job's health check passes on this node, else 0 (jobs with a health block).", []string{"job"}, nil)
	regressionsDesc = prometheus.NewDesc("electd_token_regressions_total",
		"Fencing tokens the store reported below the highest this node had seen for the job: writes the store lost (a failover to a replica behind). Acquires still ask above the highest seen.", []string{"job"}, nil)
	eligibleDesc = prometheus.NewDesc("electd_job_eligible",
		"1 when the job's constraint admits this node, else 0.", []string{"job"}, nil)
	lastSuccessDesc = prometheus.NewDesc("electd_task_last_success_timestamp_seconds",
		"When a run of the task last succeeded, on any node (Unix time), as the job's slot record says.", []string{"job"}, nil)
	leaderChangesDesc = prometheus.NewDesc("electd_leader_changes_total",
		"Terms of this node that ended, by why (reason: balanced, drained, preempted, released, reloaded, lost, renew_deadline, unhealthy, failing, ...): each moves the job to another node or leaves it without a leader for a while. Summed over the agents, the moves of a job.", []string{"job", "reason"}, nil)
	lastRunSucceededDesc = prometheus.NewDesc("electd_task_last_run_succeeded",
		"1 when the task's last run that ended, on any node, succeeded, else 0 (failed, timed out or killed), as the job's slot record says; a run in progress keeps the value of the one before it.", []string{"job"}, nil)
	nextRunDesc = prometheus.NewDesc("electd_task_next_run_timestamp_seconds",
		"When the task's next scheduled run starts (Unix time, random_delay included).", []string{"job"}, nil)
)

func gauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

type jobsCollector struct {
	mu     sync.Mutex
	sample func() []JobSample
}

func (c *jobsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- isLeaderDesc
	ch <- transitionsDesc
	ch <- healthyDesc
	ch <- eligibleDesc
	ch <- regressionsDesc
	ch <- lastSuccessDesc
	ch <- nextRunDesc
	ch <- lastRunSucceededDesc
	ch <- leaderChangesDesc
}

func (c *jobsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sample := c.sample
	c.mu.Unlock()
	if sample == nil {
		return
	}
	for _, s := range sample() {
		ch <- prometheus.MustNewConstMetric(isLeaderDesc, prometheus.GaugeValue, gauge(s.Leader), s.Job)
		ch <- prometheus.MustNewConstMetric(eligibleDesc, prometheus.GaugeValue, gauge(s.Eligible), s.Job)
		ch <- prometheus.MustNewConstMetric(regressionsDesc, prometheus.CounterValue, float64(s.TokenRegressions), s.Job)
		if s.HasHealth {
			ch <- prometheus.MustNewConstMetric(healthyDesc, prometheus.GaugeValue, gauge(s.Healthy), s.Job)
		}
		if !s.LastSuccess.IsZero() {
			ch <- prometheus.MustNewConstMetric(lastSuccessDesc, prometheus.GaugeValue, unixSeconds(s.LastSuccess), s.Job)
		}
		if !s.NextRun.IsZero() {
			ch <- prometheus.MustNewConstMetric(nextRunDesc, prometheus.GaugeValue, unixSeconds(s.NextRun), s.Job)
		}
		if s.LastRunKnown {
			ch <- prometheus.MustNewConstMetric(lastRunSucceededDesc, prometheus.GaugeValue, gauge(s.LastRunSucceeded), s.Job)
		}
		for reason, n := range s.TermsEnded {
			ch <- prometheus.MustNewConstMetric(leaderChangesDesc, prometheus.CounterValue, float64(n), s.Job, reason)
		}
		for _, t := range []struct {
			typ string
			n   uint64
		}{{"elected", s.Elected}, {"demoted", s.Demoted}, {"leader_change", s.LeaderChanges}} {
			if t.n > 0 { // a series appears with its first event, as a counter vector's would
				ch <- prometheus.MustNewConstMetric(transitionsDesc, prometheus.CounterValue, float64(t.n), s.Job, t.typ)
			}
		}
	}
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
