package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
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
	// Open opens the lease store a provider block describes. Nil opens it
	// with its own settings (p.Settings.Open).
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

// Agent runs one election loop per job of a configuration, and swaps
// configurations on Reload without touching the jobs that did not change.
type Agent struct {
	opts Options
	log  hclog.Logger
	// node is the node_id, fixed for the agent's life (a reload does not
	// change it); holder adds this process's incarnation (identity.go).
	node, holder string

	reloads chan reloadReq
	ready   atomic.Bool

	mu      sync.Mutex
	cfg     *config.Config
	jobs    []*runningJob                 // in configuration order
	provs   map[string]*openProvider      // by provider key
	stopped map[*runningJob]chan struct{} // replaced jobs still stepping down
}

// runningJob is one job's loop and hook runner, stoppable on its own.
type runningJob struct {
	*job
	provKey   string
	cancel    context.CancelCauseFunc // the cause is the step-down reason
	loopDone  chan struct{}           // the loop ended: work stopped, lease released
	hooksDone chan struct{}           // and its hooks (on_demoted) have run
}

type openProvider struct {
	p     providers.Provider
	batch *batcher // nil when the store cannot batch renewals
	refs  int
}

type reloadReq struct {
	cfg   *config.Config
	reply chan reloadResult
}

type reloadResult struct {
	summary ReloadSummary
	err     error
}

// ReloadSummary says what a reload did, by job name.
type ReloadSummary struct {
	Kept, Restarted, Added, Removed []string
}

// New checks the options; Run does the work.
func New(cfg *config.Config, opts Options) (*Agent, error) {
	if opts.Open == nil {
		log := opts.Logger
		opts.Open = func(ctx context.Context, p config.Provider) (providers.Provider, error) {
			return p.Settings.Open(ctx, log)
		}
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
	holder := holderOf(cfg.Agent.NodeID, newIncarnation())
	opts.Logger.Debug("lease holder of this process", "holder", holder)
	return &Agent{cfg: cfg, opts: opts, log: opts.Logger, node: cfg.Agent.NodeID, holder: holder, reloads: make(chan reloadReq),
		provs: map[string]*openProvider{}, stopped: map[*runningJob]chan struct{}{}}, nil
}

// Run opens the providers the jobs use, starts every job's loop and runs
// until ctx is done, applying reloads meanwhile. Then each leader stops its
// work, releases its lease and fires on_demoted; Run returns once that is
// done, or with an error when it took longer than the agent's
// shutdown_timeout (the remaining children are then killed).
func (a *Agent) Run(ctx context.Context) error {
	if _, err := a.apply(ctx, a.cfg); err != nil {
		a.closeProviders()
		return err
	}
	a.ready.Store(true)
	for {
		select {
		case req := <-a.reloads:
			s, err := a.apply(ctx, req.cfg)
			req.reply <- reloadResult{s, err}
			continue
		case <-ctx.Done():
		}
		break
	}
	return a.shutdown()
}

// Reload replaces the configuration: unchanged jobs (same fingerprint) keep
// their leadership, token and child; changed jobs step down and start again
// with the new spec; removed jobs release; added jobs start. The agent block
// is not reloaded (node_id, listen and api_token need a restart). When a new
// provider cannot be opened, nothing changes and the error is returned.
func (a *Agent) Reload(ctx context.Context, cfg *config.Config) (ReloadSummary, error) {
	req := reloadReq{cfg: cfg, reply: make(chan reloadResult, 1)}
	select {
	case a.reloads <- req:
	case <-ctx.Done():
		return ReloadSummary{}, ctx.Err()
	}
	r := <-req.reply
	return r.summary, r.err
}

// apply moves from the running jobs to those of cfg. It runs on Run's
// goroutine only.
func (a *Agent) apply(ctx context.Context, cfg *config.Config) (ReloadSummary, error) {
	var sum ReloadSummary
	old := map[string]*runningJob{}
	for _, r := range a.jobs {
		old[r.spec.Name] = r
	}

	// Open what the new configuration needs first: a provider that cannot
	// be opened rejects the reload before anything is disturbed.
	opened := map[string]providers.Provider{}
	keyOf := map[string]string{} // provider ref → key
	refOf := map[string]string{} // key → provider ref
	for _, spec := range cfg.Jobs {
		if _, done := keyOf[spec.Provider]; done {
			continue
		}
		pc, ok := cfg.Provider(spec.Provider)
		if !ok {
			a.closeAll(opened)
			return sum, fmt.Errorf("agent: job %q: no provider %s", spec.Name, spec.Provider)
		}
		key := providerKey(pc)
		keyOf[spec.Provider] = key
		if _, ok := a.provs[key]; ok {
			continue
		}
		p, err := a.opts.Open(ctx, pc)
		if err != nil {
			a.closeAll(opened)
			return sum, fmt.Errorf("agent: open provider %s: %w", spec.Provider, err)
		}
		opened[key] = p
		refOf[key] = spec.Provider
	}
	for key, p := range opened {
		op := &openProvider{p: p}
		if br, ok := providers.As[providers.BatchRenewer](p); ok {
			op.batch = newBatcher(br, refOf[key], a.opts.Metrics, a.opts.Clock.Now())
		}
		a.provs[key] = op
	}

	// Stop the jobs that changed or went away, all at once, and wait.
	keep := map[string]bool{}
	var stopping []*runningJob
	for _, spec := range cfg.Jobs {
		if r, ok := old[spec.Name]; ok && r.spec.Fingerprint == spec.Fingerprint && r.provKey == keyOf[spec.Provider] {
			keep[spec.Name] = true
		}
	}
	for _, r := range a.jobs {
		if keep[r.spec.Name] {
			continue
		}
		if _, still := cfg.ByName(r.spec.Name); still {
			r.cancel(errors.New("the job's configuration changed"))
		} else {
			r.cancel(errors.New("the job was removed from the configuration"))
		}
		stopping = append(stopping, r)
	}
	for _, r := range stopping {
		<-r.loopDone
		a.release(r.provKey)
		if _, still := cfg.ByName(r.spec.Name); still {
			sum.Restarted = append(sum.Restarted, r.spec.Name)
		} else {
			sum.Removed = append(sum.Removed, r.spec.Name)
			r.log.Info("job removed from the configuration: stopped and released")
		}
		// Its on_demoted hooks still run; shutdown waits for them.
		a.mu.Lock()
		a.stopped[r] = r.hooksDone
		a.mu.Unlock()
	}

	jobs := make([]*runningJob, 0, len(cfg.Jobs))
	for _, spec := range cfg.Jobs {
		if keep[spec.Name] {
			jobs = append(jobs, old[spec.Name])
			sum.Kept = append(sum.Kept, spec.Name)
			continue
		}
		if _, ok := old[spec.Name]; !ok && a.jobs != nil {
			sum.Added = append(sum.Added, spec.Name)
		}
		key := keyOf[spec.Provider]
		a.provs[key].refs++
		jobs = append(jobs, a.startJob(spec, key, old[spec.Name]))
	}
	for key, op := range a.provs {
		if op.refs == 0 {
			if err := op.p.Close(); err != nil {
				a.log.Warn("closing provider", "error", err)
			}
			delete(a.provs, key)
		}
	}
	a.mu.Lock()
	a.jobs, a.cfg = jobs, cfg
	a.mu.Unlock()
	return sum, nil
}

// startJob starts a job's loop. prior is the job it replaces after a reload
// (its loop has ended), or nil: the new loop keeps what it knew of the
// leader, so events and status do not start from nothing.
func (a *Agent) startJob(spec config.Job, key string, prior *runningJob) *runningJob {
	ctx, cancel := context.WithCancelCause(context.Background())
	op := a.provs[key]
	j := newJob(spec, a.node, a.holder, op.p, a.opts, a.log)
	if prior != nil {
		j.inherit(prior.job)
	}
	r := &runningJob{job: j, provKey: key, cancel: cancel,
		loopDone: make(chan struct{}), hooksDone: make(chan struct{})}
	r.batch = op.batch
	hookCtx, stopHooks := context.WithCancel(context.Background())
	go func() { defer close(r.hooksDone); r.hooks.run(hookCtx) }()
	go func() {
		defer close(r.loopDone)
		defer stopHooks() // the hook runner drains what the loop queued, then ends
		r.run(ctx)
	}()
	return r
}

func (a *Agent) release(key string) {
	if op, ok := a.provs[key]; ok {
		op.refs--
	}
}

func (a *Agent) closeAll(ps map[string]providers.Provider) {
	for _, p := range ps {
		p.Close()
	}
}

func (a *Agent) closeProviders() {
	for key, op := range a.provs {
		if err := op.p.Close(); err != nil {
			a.log.Warn("closing provider", "error", err)
		}
		delete(a.provs, key)
	}
}

// providerKey identifies a provider's settings: a provider whose settings
// change is reopened. It is a hash, so no secret is kept in the key.
func providerKey(p config.Provider) string {
	v := reflect.ValueOf(p.Settings)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%#v", p.Ref(), v.Interface())))
	return hex.EncodeToString(h[:])
}

func (a *Agent) shutdown() error {
	deadline := time.Now().Add(a.cfg.Agent.ShutdownTimeout)
	var loops, hooks []chan struct{}
	for _, r := range a.jobs {
		r.cancel(errors.New("the agent is stopping"))
		loops = append(loops, r.loopDone)
		hooks = append(hooks, r.hooksDone)
	}
	a.mu.Lock()
	for _, done := range a.stopped {
		hooks = append(hooks, done)
	}
	a.mu.Unlock()
	defer a.closeProviders()
	if !waitAll(loops, time.Until(deadline)) {
		a.log.Error("jobs did not stop within shutdown_timeout: killing their process groups",
			"shutdown_timeout", a.cfg.Agent.ShutdownTimeout)
		a.Kill()
		waitAll(loops, 5*time.Second)
		return errors.New("agent: shutdown_timeout exceeded")
	}
	if !waitAll(hooks, time.Until(deadline)) {
		a.log.Error("hooks still running at shutdown_timeout: killing them")
		a.Kill()
		waitAll(hooks, 5*time.Second)
		return errors.New("agent: shutdown_timeout exceeded while hooks ran")
	}
	return nil
}

func waitAll(chs []chan struct{}, d time.Duration) bool {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	for _, ch := range chs {
		select {
		case <-ch:
		case <-t.C:
			return false
		}
	}
	return true
}

// Ready reports whether every job's loop has started.
func (a *Agent) Ready() bool { return a.ready.Load() }

func (a *Agent) running() []*runningJob {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.jobs
}

// Jobs is the state of every job, for the API.
func (a *Agent) Jobs() []api.JobStatus {
	jobs := a.running()
	out := make([]api.JobStatus, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j.status())
	}
	return out
}

// StepDown asks the loop of job to release its lease and hold off for one
// ttl, so another node takes over. It fails when this node does not lead.
func (a *Agent) StepDown(name string) error {
	for _, j := range a.running() {
		if j.spec.Name != name {
			continue
		}
		reply := make(chan error, 1)
		select {
		case j.stepDown <- reply:
			return <-reply
		case <-j.loopDone:
			return fmt.Errorf("job %q is stopping", name)
		case <-time.After(10 * time.Second):
			return fmt.Errorf("job %q is busy; try again", name)
		}
	}
	return api.ErrNoSuchJob
}

// Kill SIGKILLs every command the agent started (the second stop signal).
func (a *Agent) Kill() {
	a.mu.Lock()
	var rs []*runner
	for _, j := range a.jobs {
		rs = append(rs, j.runner)
	}
	for r := range a.stopped {
		rs = append(rs, r.runner)
	}
	a.mu.Unlock()
	for _, r := range rs {
		r.killAll()
	}
}

var _ api.Agent = (*Agent)(nil)
