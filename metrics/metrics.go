package metrics

import (
	"context"
	"errors"
	"net/http"
	"runtime"
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
	IsLeader    *prometheus.GaugeVec   // job
	Transitions *prometheus.CounterVec // job, type
	LeaseOp     *prometheus.HistogramVec
	LeaseErrors *prometheus.CounterVec // provider, op
	ActionRuns  *prometheus.CounterVec // job, event, kind, result
	GivenAway   *prometheus.CounterVec // job, reason
}

func New(version, commit string) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		IsLeader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "electd_is_leader", Help: "1 while this node leads the job, else 0.",
		}, []string{"job"}),
		Transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "electd_transitions_total", Help: "Leadership events seen by this node, by type (elected, demoted, leader_change).",
		}, []string{"job", "type"}),
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
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "electd_build_info", Help: "Build of this agent; always 1.",
	}, []string{"version", "commit", "goversion"})
	build.WithLabelValues(version, commit, runtime.Version()).Set(1)
	m.reg.MustRegister(m.IsLeader, m.Transitions, m.LeaseOp, m.LeaseErrors, m.ActionRuns, m.GivenAway, build,
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
// the provider's reference (e.g. "sql.main"). The result implements
// providers.Watcher exactly when p does, so capability checks still work.
func (m *Metrics) Instrument(ref string, p providers.Provider) providers.Provider {
	ip := &instrumented{p: p, ref: ref, m: m}
	for _, op := range []string{"acquire", "renew", "release", "observe"} {
		m.LeaseErrors.WithLabelValues(ref, op) // zero series, so rate() works before the first error
	}
	if w, ok := p.(providers.Watcher); ok {
		return &instrumentedWatcher{instrumented: ip, w: w}
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

func (i *instrumented) Acquire(ctx context.Context, key, holder string, ttl time.Duration) (providers.Lease, error) {
	start := time.Now()
	l, err := i.p.Acquire(ctx, key, holder, ttl)
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

type instrumentedWatcher struct {
	*instrumented
	w providers.Watcher
}

func (i *instrumentedWatcher) Watch(ctx context.Context, key string) (<-chan struct{}, error) {
	return i.w.Watch(ctx, key)
}

var (
	_ providers.Provider = (*instrumented)(nil)
	_ providers.Watcher  = (*instrumentedWatcher)(nil)
)

// Unwrap gives the provider beneath, for capability lookups (providers.As).
func (i *instrumented) Unwrap() providers.Provider { return i.p }

// ObserveBatch records one batched renewal request of n leases, timed like
// every other lease operation (op "renew_batch").
func (m *Metrics) ObserveBatch(ref string, start time.Time, err error) {
	m.LeaseOp.WithLabelValues(ref, "renew_batch").Observe(time.Since(start).Seconds())
	if err != nil {
		m.LeaseErrors.WithLabelValues(ref, "renew_batch").Inc()
	}
}
