package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/actions/proc"
	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/redact"
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
	// Redact masks secrets in the output given to the task hooks; nil
	// masks the configuration's (config.Config.Secrets).
	Redact *redact.Set

	// spares keeps a shim started ahead of the next command, once a job
	// has one (actions/proc.Spares); nil without a Shim.
	spares *proc.Spares
}

// Agent runs one election loop per job of a configuration, and swaps
// configurations on Reload without touching the jobs that did not change.
type Agent struct {
	opts    Options
	log     hclog.Logger
	started config.Agent // the agent block in force: a reload does not change it

	reloads chan reloadReq
	ready   atomic.Bool
	fleet   *fleet   // tags, balance, drain: fixed but for the drain
	once    *oneShot // RunOnce's policy, before it wraps its job's (once.go); nil under Run

	mu      sync.Mutex
	cfg     *config.Config
	jobs    []*runningJob            // in configuration order
	provs   map[string]*openProvider // by provider key
	stopped map[*runningJob]bool     // replaced jobs whose on_demoted hooks may still run
}

// runningJob is a job and the provider it runs on.
type runningJob struct {
	*job
	provKey string
}

// retire retires the job for reason, on its loop.
func (r *runningJob) retire(reason error) { r.l.post(func() { r.job.retire(reason) }) }

type openProvider struct {
	p    providers.Provider
	loop *loop // runs the elections of every job on p
	refs int
}

type reloadReq struct {
	cfg   *config.Config
	reply chan reloadResult
}

type reloadResult struct {
	plan Plan
	err  error
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
	if opts.Shim != "" {
		opts.spares = proc.NewSpares(opts.Shim)
	}
	if opts.Redact == nil {
		opts.Redact = redact.New(cfg.Secrets...)
	}
	if len(cfg.Jobs) == 0 {
		opts.Logger.Warn("the configuration declares no job: the agent has nothing to do")
	}
	holder := holderOf(cfg.Agent.NodeID, newIncarnation())
	a := &Agent{cfg: cfg, opts: opts, log: opts.Logger, started: cfg.Agent, reloads: make(chan reloadReq), fleet: newFleet(cfg.Agent, holder),
		provs: map[string]*openProvider{}, stopped: map[*runningJob]bool{}}
	a.fleet.redact = opts.Redact
	if opts.Metrics != nil {
		opts.Metrics.CollectJobs(a.sample)
	}
	opts.Logger.Debug("lease holder of this process", "holder", holder)
	return a, nil
}

// Run opens the providers the jobs use, starts every job's loop and runs
// until ctx is done, applying reloads meanwhile. Then each leader stops its
// work, releases its lease and fires on_demoted; Run returns once that is
// done, or with an error when it took longer than the agent's
// shutdown_timeout (the remaining children are then killed).
func (a *Agent) Run(ctx context.Context) error {
	defer a.opts.spares.Close()
	if _, err := a.apply(ctx, a.cfg); err != nil {
		a.closeProviders()
		return err
	}
	a.ready.Store(true)
	// Parsing a large configuration leaves garbage many times the size of
	// what the agent keeps: give it back now rather than at the scavenger's
	// pace.
	debug.FreeOSMemory()
	for {
		select {
		case req := <-a.reloads:
			p, err := a.apply(ctx, req.cfg)
			req.reply <- reloadResult{p, err}
			continue
		case <-ctx.Done():
		}
		break
	}
	// No job leads from here on, so no `run` or `task` command starts (an
	// on_demoted hook's starts under a fresh shim): the spare's exit goes
	// beside the children's stops rather than after the releases, where it
	// would take the CPU from a new leader's command starting on the same
	// machine.
	go a.opts.spares.Close()
	return a.shutdown()
}

// Reload replaces the configuration: unchanged jobs (same fingerprint) keep
// their leadership, token and child; jobs whose changes apply in place
// (Plan.Updated) keep them too and take the new spec; other changed jobs
// step down and start again with the new spec; removed jobs release; added
// jobs start. The agent block
// is not reloaded (node_id, listen and api_token need a restart). When a new
// provider cannot be opened, nothing changes and the error is returned. It
// returns the plan it carried out: Diff of the running configuration and
// cfg, as Plan shows beforehand.
func (a *Agent) Reload(ctx context.Context, cfg *config.Config) (Plan, error) {
	req := reloadReq{cfg: cfg, reply: make(chan reloadResult, 1)}
	select {
	case a.reloads <- req:
	case <-ctx.Done():
		return Plan{}, ctx.Err()
	}
	r := <-req.reply
	return r.plan, r.err
}

// Plan is what Reload(cfg) would do now; it changes nothing.
func (a *Agent) Plan(cfg *config.Config) Plan { return Diff(a.inForce(), cfg) }

// inForce is the configuration the jobs run, with the agent block the agent
// started with; nil before the jobs started.
func (a *Agent) inForce() *config.Config {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.jobs == nil {
		return nil
	}
	c := *a.cfg
	c.Agent = a.started
	return &c
}

// apply moves from the running jobs to those of cfg, as Diff plans it. It
// runs on Run's goroutine only.
func (a *Agent) apply(ctx context.Context, cfg *config.Config) (Plan, error) {
	a.fleet.redact.Add(cfg.Secrets...)
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
			return Plan{}, fmt.Errorf("agent: job %q: no provider %s", spec.Name, spec.Provider)
		}
		key := providerKey(pc)
		keyOf[spec.Provider] = key
		if _, ok := a.provs[key]; ok {
			continue
		}
		p, err := a.opts.Open(ctx, pc)
		if err != nil {
			a.closeAll(opened)
			return Plan{}, fmt.Errorf("agent: open provider %s: %w", spec.Provider, err)
		}
		opened[key] = p
		refOf[key] = spec.Provider
	}
	for key, p := range opened {
		l := newLoop(p, refOf[key], a.opts.Clock, a.opts.Metrics, a.fleet, a.log)
		subscribe := func() {
			if err := l.notify(); err != nil {
				level := hclog.Warn
				if a.once != nil {
					level = hclog.Info // electd lock says what the store did itself
				}
				a.log.Log(level, "cannot subscribe to the store's notifications; candidates poll every retry_every instead",
					"provider", refOf[key], "error", err)
			}
		}
		if a.once != nil {
			// RunOnce's wait is bounded (Once.Wait): a store that is down
			// can hold a subscription up for its client's connect timeout,
			// and the first attempt need not wait for it.
			go subscribe()
		} else {
			subscribe()
		}
		a.provs[key] = &openProvider{p: p, loop: l}
	}

	// Stop the jobs that changed or went away, all at once, and wait.
	plan := Diff(a.inForce(), cfg)
	keep, restart := map[string]bool{}, map[string]bool{}
	for _, name := range plan.Kept {
		keep[name] = true
	}
	updated := map[string][]string{}
	for _, c := range plan.Updated {
		keep[c.Job] = true
		updated[c.Job] = c.Attributes
	}
	for _, c := range plan.Restarted {
		restart[c.Job] = true
	}
	var stopping []*runningJob
	for _, r := range a.jobs {
		switch {
		case keep[r.spec.Name]:
			continue
		case restart[r.spec.Name]:
			r.retire(ErrConfigChanged)
		default:
			r.retire(ErrJobRemoved)
		}
		stopping = append(stopping, r)
	}
	for _, r := range stopping {
		<-r.done()
		a.release(r.provKey)
		if !restart[r.spec.Name] {
			r.log().Info("job removed from the configuration: stopped and released")
		}
		// Its on_demoted hooks still run; shutdown waits for them.
		a.mu.Lock()
		a.stopped[r] = true
		a.mu.Unlock()
	}

	// The updated jobs take their new spec in place, each on its loop; the
	// reload waits, so that nothing of the old spec is read after it.
	for i := range cfg.Jobs {
		spec := &cfg.Jobs[i]
		attrs, ok := updated[spec.Name]
		if !ok {
			continue
		}
		r, ack := old[spec.Name], make(chan struct{})
		r.l.post(func() { r.job.update(spec, attrs, a.opts); close(ack) })
		select {
		case <-ack:
		case <-r.done():
		}
	}

	// The new jobs of a loop start in one turn of it, so that their first
	// attempts go out together (one AcquireMany where the store batches).
	jobs := make([]*runningJob, 0, len(cfg.Jobs))
	starts := map[*loop][]*job{}
	for i := range cfg.Jobs {
		spec := &cfg.Jobs[i]
		if keep[spec.Name] {
			jobs = append(jobs, old[spec.Name])
			continue
		}
		key := keyOf[spec.Provider]
		a.provs[key].refs++
		r := a.newRunningJob(spec, key, old[spec.Name])
		starts[r.l] = append(starts[r.l], r.job)
		jobs = append(jobs, r)
	}
	for l, js := range starts {
		l.post(func() {
			for _, j := range js {
				j.start()
			}
		})
	}
	a.startMembers(jobs)
	for key, op := range a.provs {
		if op.refs == 0 {
			a.closeProvider(key, op)
		}
	}
	a.mu.Lock()
	a.jobs, a.cfg = jobs, cfg
	a.mu.Unlock()
	return plan, nil
}

// newRunningJob is a job of spec on its store's loop, not started. prior is
// the job it replaces after a reload (it has retired), or nil: the new job
// keeps what it knew of the leader, so events and status do not start from
// nothing.
func (a *Agent) newRunningJob(spec *config.Job, key string, prior *runningJob) *runningJob {
	j := newJob(spec, a.provs[key].loop, a.opts)
	if a.once != nil {
		once := *a.once
		once.policy = j.policy
		j.policy = &once
		if j.runner != nil && a.once.Stdout != nil && a.once.Stderr != nil {
			j.runner.stdout, j.runner.stderr = a.once.Stdout, a.once.Stderr
		}
	}
	if prior != nil {
		j.inherit(prior.job)
	}
	return &runningJob{job: j, provKey: key}
}

// startMembers starts the membership record on each store of the agent's
// jobs (for RunOnce: when balancing, else where a job prefers some nodes).
// Its ttl is the shortest of the jobs' there.
func (a *Agent) startMembers(jobs []*runningJob) {
	need := map[*loop]time.Duration{}
	for _, r := range jobs {
		// A drain needs to know which agents can take each job: every
		// agent keeps its record, but `electd lock` only where it balances
		// or prefers.
		if r.l.members != nil || (a.once != nil && !a.fleet.balance && len(r.spec.Prefer) == 0) {
			continue
		}
		if ttl, ok := need[r.l]; !ok || r.spec.TTL < ttl {
			need[r.l] = r.spec.TTL
		}
	}
	for l, ttl := range need {
		l.startMembers(a.fleet.holder, ttl, a.log)
	}
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
		a.closeProvider(key, op)
	}
}

func (a *Agent) closeProvider(key string, op *openProvider) {
	op.loop.close()
	if err := op.p.Close(); err != nil {
		a.log.Warn("closing provider", "error", err)
	}
	delete(a.provs, key)
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
	deadline := time.Now().Add(a.started.ShutdownTimeout)
	for _, op := range a.provs {
		if m := op.loop.members; m != nil {
			m.leaveEarly()
		}
	}
	var loops []<-chan struct{}
	for _, r := range a.jobs {
		r.retire(ErrStopping)
		loops = append(loops, r.done())
	}
	defer a.closeProviders()
	if !waitAll(loops, time.Until(deadline)) {
		a.log.Error("jobs did not stop within shutdown_timeout: killing their process groups",
			"shutdown_timeout", a.started.ShutdownTimeout)
		a.Kill()
		waitAll(loops, 5*time.Second)
		return errors.New("agent: shutdown_timeout exceeded")
	}
	// The hooks the last events queued (on_demoted) run to their end.
	var hooks []<-chan struct{}
	a.mu.Lock()
	for r := range a.stopped {
		hooks = append(hooks, r.hooks.idle())
	}
	a.mu.Unlock()
	for _, r := range a.jobs {
		hooks = append(hooks, r.hooks.idle())
	}
	if !waitAll(hooks, time.Until(deadline)) {
		a.log.Error("hooks still running at shutdown_timeout: killing them")
		a.Kill()
		waitAll(hooks, 5*time.Second)
		return errors.New("agent: shutdown_timeout exceeded while hooks ran")
	}
	return nil
}

func waitAll(chs []<-chan struct{}, d time.Duration) bool {
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
func (a *Agent) Jobs() []JobStatus {
	jobs := a.running()
	out := make([]JobStatus, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j.get())
	}
	return out
}

// sample is every job's leadership, for the metrics.
func (a *Agent) sample() []metrics.JobSample {
	jobs := a.running()
	out := make([]metrics.JobSample, len(jobs))
	for i, j := range jobs {
		out[i] = j.sample()
	}
	return out
}

// StepDown asks job to release its lease and hold off for one ttl, so
// another node takes over. It fails when this node does not lead.
func (a *Agent) StepDown(ctx context.Context, name string) error {
	for _, j := range a.running() {
		if j.name() != name {
			continue
		}
		reply := make(chan error, 1)
		j.l.post(func() { reply <- j.requestStepDown() })
		select {
		case err := <-reply:
			return err
		case <-j.done():
			return fmt.Errorf("job %q is stopping", name)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return ErrNoSuchJob
}

// Drain makes every job hand over and compete for none (on), or compete
// again (off). It lasts until cancelled or the agent restarts. A job this
// agent leads is handed over when another live agent can lead it now (its
// membership record says so); otherwise it is kept, and handed over as soon
// as one can, unless force gives it up anyway. Drain returns what it did
// with each job this agent led when asked.
func (a *Agent) Drain(on, force bool) []DrainJob {
	was := a.fleet.draining.Swap(on)
	a.fleet.forced.Store(on && force)
	var replies []chan *DrainJob
	var dones []<-chan struct{}
	for _, r := range a.running() {
		reply := make(chan *DrainJob, 1)
		r.l.post(func() { reply <- r.job.drain(on) })
		replies = append(replies, reply)
		dones = append(dones, r.done())
	}
	out := []DrainJob{}
	for i, reply := range replies {
		select {
		case d := <-reply:
			if d != nil {
				out = append(out, *d)
			}
		case <-dones[i]:
		}
	}
	if was != on || force {
		if on {
			kept := 0
			for _, d := range out {
				if d.Kept {
					kept++
				}
			}
			a.log.Info("draining: handing over every job and competing for none", "leading", len(out), "kept", kept, "force", force)
		} else {
			a.log.Info("drain cancelled: competing again")
		}
	}
	return out
}

// Info is the agent as GET /v1/agent shows it.
type Info struct {
	Node     string            `json:"node"`
	Tags     map[string]string `json:"tags"`
	Balance  bool              `json:"balance"`
	Draining bool              `json:"draining"`
}

// Info describes the agent.
func (a *Agent) Info() Info {
	return Info{Node: a.fleet.node, Tags: a.fleet.tags, Balance: a.fleet.balance, Draining: a.fleet.draining.Load()}
}

// History is the last transitions of job this agent saw, oldest first.
func (a *Agent) History(name string) ([]Transition, error) {
	for _, j := range a.running() {
		if j.name() == name {
			return j.History(), nil
		}
	}
	return nil, ErrNoSuchJob
}

// Kill SIGKILLs every command the agent started, and every command its
// jobs start after (the second stop signal).
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
