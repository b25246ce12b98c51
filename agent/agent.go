package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/api"
	"github.com/electd/electd/config"
	"github.com/electd/electd/metrics"
	"github.com/electd/electd/providers"
)

// Options are what the agent needs from its surroundings.
type Options struct {
	Logger hclog.Logger
	// Open opens the lease store a provider block describes (the plain
	// table of provider types lives in cmd/electd).
	Open func(ctx context.Context, p config.Provider) (providers.Provider, error)
	// Webhooks delivers webhook actions; nil logs and drops them.
	Webhooks WebhookSender
	// Metrics, when set, is updated as jobs change state.
	Metrics *metrics.Metrics
	// Shim is the executable that supervises each command (the electd
	// binary itself; see actions/proc). Empty starts commands directly.
	Shim string
	// Clock defaults to the real monotonic clock.
	Clock Clock
}

// Agent runs one election loop per job of a configuration.
type Agent struct {
	cfg  *config.Config
	opts Options
	log  hclog.Logger

	jobs  []*job // in configuration order, set by Run
	ready atomic.Bool
	mu    sync.Mutex
}

// New checks the options; Run does the work.
func New(cfg *config.Config, opts Options) (*Agent, error) {
	if opts.Open == nil {
		return nil, errors.New("agent: no Open function for providers")
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if len(cfg.Jobs) == 0 {
		opts.Logger.Warn("the configuration declares no job: the agent has nothing to do")
	}
	return &Agent{cfg: cfg, opts: opts, log: opts.Logger}, nil
}

// Run opens the providers the jobs use, starts every job's loop and runs
// until ctx is done. Then each leader stops its work, releases its lease
// and fires on_demoted; Run returns once that is done, or with an error
// when it took longer than the agent's shutdown_timeout (the remaining
// children are then killed).
func (a *Agent) Run(ctx context.Context) error {
	provs := map[string]providers.Provider{}
	defer func() {
		for ref, p := range provs {
			if err := p.Close(); err != nil {
				a.log.Warn("closing provider", "provider", ref, "error", err)
			}
		}
	}()
	jobs := make([]*job, 0, len(a.cfg.Jobs))
	for _, spec := range a.cfg.Jobs {
		p, ok := provs[spec.Provider]
		if !ok {
			pc, found := a.cfg.Provider(spec.Provider)
			if !found {
				return fmt.Errorf("agent: job %q: no provider %s", spec.Name, spec.Provider)
			}
			var err error
			if p, err = a.opts.Open(ctx, pc); err != nil {
				return fmt.Errorf("agent: open provider %s: %w", spec.Provider, err)
			}
			provs[spec.Provider] = p
		}
		jobs = append(jobs, newJob(spec, a.cfg.Agent.NodeID, p, a.opts, a.log))
	}
	a.mu.Lock()
	a.jobs = jobs
	a.mu.Unlock()

	// Hooks outlive the loops: on_demoted fires as each loop ends.
	hookCtx, stopHooks := context.WithCancel(context.Background())
	defer stopHooks()
	var loops, hooks sync.WaitGroup
	for _, j := range jobs {
		hooks.Add(1)
		go func() { defer hooks.Done(); j.hooks.run(hookCtx) }()
		loops.Add(1)
		go func() { defer loops.Done(); j.run(ctx) }()
	}
	a.ready.Store(true)
	<-ctx.Done()

	deadline := time.Now().Add(a.cfg.Agent.ShutdownTimeout)
	if !waitTimeout(&loops, time.Until(deadline)) {
		a.log.Error("jobs did not stop within shutdown_timeout: killing their process groups",
			"shutdown_timeout", a.cfg.Agent.ShutdownTimeout)
		a.Kill()
		waitTimeout(&loops, 5*time.Second)
		return errors.New("agent: shutdown_timeout exceeded")
	}
	stopHooks()
	if !waitTimeout(&hooks, time.Until(deadline)) {
		a.log.Error("hooks still running at shutdown_timeout: killing them")
		a.Kill()
		waitTimeout(&hooks, 5*time.Second)
		return errors.New("agent: shutdown_timeout exceeded while hooks ran")
	}
	return nil
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// Ready reports whether every job's loop has started.
func (a *Agent) Ready() bool { return a.ready.Load() }

// Jobs is the state of every job, for the API.
func (a *Agent) Jobs() []api.JobStatus {
	a.mu.Lock()
	jobs := a.jobs
	a.mu.Unlock()
	out := make([]api.JobStatus, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j.status())
	}
	return out
}

// StepDown asks the loop of job to release its lease and hold off for one
// ttl, so another node takes over. It fails when this node does not lead.
func (a *Agent) StepDown(name string) error {
	a.mu.Lock()
	jobs := a.jobs
	a.mu.Unlock()
	for _, j := range jobs {
		if j.spec.Name != name {
			continue
		}
		reply := make(chan error, 1)
		select {
		case j.stepDown <- reply:
			return <-reply
		case <-time.After(10 * time.Second):
			return fmt.Errorf("job %q is busy; try again", name)
		}
	}
	return api.ErrNoSuchJob
}

// Kill SIGKILLs every command the agent started (the second stop signal).
func (a *Agent) Kill() {
	a.mu.Lock()
	jobs := a.jobs
	a.mu.Unlock()
	for _, j := range jobs {
		j.runner.killAll()
	}
}

var _ api.Agent = (*Agent)(nil)
