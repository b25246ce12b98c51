package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/api"
	"github.com/electd/electd/config"
	"github.com/electd/electd/metrics"
	"github.com/electd/electd/providers"
)

// job is one job's election loop and what it runs while leading.
type job struct {
	spec    config.Job
	node    string // node_id: what events and the API show
	holder  string // node_id and incarnation: what the store records (identity.go)
	prov    providers.Provider
	batch   *batcher // renewals go through it when the store batches them
	clock   Clock
	log     hclog.Logger
	hooks   *hookRunner
	runner  *runner
	metrics *metrics.Metrics

	stepDown chan chan error // from the API: release and hold off for one ttl

	// Leader as this node last knew it, for on_leader_change. known is
	// false until the first answer from the store: a leader that was
	// already in place when the agent started is not a change.
	known      bool
	lastLeader string // a node_id
	clash      clash
	// backoffs counts the terms in a row whose work ended by itself
	// (stepDownReason.backoff); a term that lasts a ttl resets it.
	backoffs int

	mu sync.Mutex
	st api.JobStatus
}

func newJob(spec config.Job, node, holder string, prov providers.Provider, o Options, log hclog.Logger) *job {
	log = log.With("job", spec.Name)
	r := newRunner(spec.Name, log, o.Shim, o.Metrics)
	j := &job{
		spec: spec, node: node, holder: holder, prov: prov, clock: o.Clock, log: log, runner: r, metrics: o.Metrics,
		hooks:    newHookRunner(spec.Name, log.Named("hooks"), r, o.Webhooks),
		stepDown: make(chan chan error),
	}
	j.st = api.JobStatus{Job: spec.Name, Provider: spec.Provider, State: api.StateCandidate, TTL: spec.TTL}
	if spec.Mode == config.ModeLock {
		// Between slots a lock job does not touch the store, so a quiet
		// loop is not a wedged one (see /healthz).
		j.st.TTL = 0
	}
	now := time.Now()
	j.st.Since = &now
	// A store that never answers wedges the loop from its start.
	j.st.LastLeaseOp = now
	j.setLeaderGauge(0) // the series exists on followers too
	return j
}

// inherit takes over what the job it replaces (after a reload) knew of the
// leader: on_elected's previous_leader and a follower's since stay right.
func (j *job) inherit(prior *job) {
	j.known, j.lastLeader, j.clash = prior.known, prior.lastLeader, prior.clash
	st := prior.status()
	if st.State == api.StateFollower {
		j.mu.Lock()
		j.st.State, j.st.Leader, j.st.Token, j.st.Since = st.State, st.Leader, st.Token, st.Since
		j.mu.Unlock()
	}
}

// lockLoop is the loop of a `mode = "lock"` job: at every slot each node
// competes; the winner runs the task for that slot, then releases.
func (j *job) lockLoop(ctx context.Context) {
	for ctx.Err() == nil {
		now := j.clock.Now()
		slot := nextSlot(j.spec.Task.Schedule, now)
		select {
		case <-ctx.Done():
			return
		case <-j.clock.After(slot.Sub(now)):
		case reply := <-j.stepDown:
			reply <- fmt.Errorf("job %q takes its lock per task run; there is no leadership to hand over", j.spec.Name)
			continue
		}
		lease, sent, err := j.acquire(ctx)
		if err != nil {
			if errors.Is(err, providers.ErrHeld) {
				j.log.Debug("slot taken by another node", "slot", slot.UTC().Format(time.RFC3339))
			}
			continue
		}
		j.lead(ctx, lease, sent, slot)
	}
}

// run is the election loop: it returns when ctx is done, after stopping the
// job's work and releasing its lease.
func (j *job) run(ctx context.Context) {
	if j.spec.Mode == config.ModeLock {
		j.lockLoop(ctx)
		return
	}
	wake := j.watch(ctx)
	var holdOff time.Time
	for ctx.Err() == nil {
		if j.clock.Now().Before(holdOff) {
			j.observe(ctx)
		} else {
			lease, sent, err := j.acquire(ctx)
			if err == nil {
				holdOff = j.lead(ctx, lease, sent, time.Time{})
				continue
			}
		}
		select {
		case <-ctx.Done():
		case <-j.clock.After(jitter(j.spec.RetryEvery)):
		case _, ok := <-wake:
			if !ok {
				wake = nil
			}
		case reply := <-j.stepDown:
			reply <- fmt.Errorf("this node does not lead job %q", j.spec.Name)
		}
	}
}

// watch subscribes to the provider's release notifications when it has
// them, so a waiting candidate takes over without waiting for retry_every.
func (j *job) watch(ctx context.Context) <-chan struct{} {
	w, ok := j.prov.(providers.Watcher)
	if !ok {
		return nil
	}
	ch, err := w.Watch(ctx, j.spec.Name)
	if err != nil {
		j.log.Warn("cannot watch the lease; polling every retry_every instead", "error", err)
		return nil
	}
	return ch
}

// jitter spreads candidates' retries over [d, 1.2d) (client-go's factor).
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// acquire tries to start a term. The term is measured from the moment the
// request was sent; a request that cannot finish while the term would still
// be useful is abandoned.
func (j *job) acquire(ctx context.Context) (providers.Lease, time.Time, error) {
	sent := j.clock.Now()
	window := newTerm(sent, j.spec.TTL, j.spec.StopTimeout()).stopBy.Sub(sent)
	actx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	lease, err := j.prov.Acquire(actx, j.spec.Name, j.holder, j.spec.TTL)
	var held *providers.HeldError
	switch {
	case err == nil:
		j.opDone(nil)
		j.checkClash("")
	case errors.As(err, &held):
		j.opDone(nil)
		j.follow(held.Holder, held.Token)
	case ctx.Err() != nil:
	default:
		j.opDone(err)
		j.log.Warn("cannot acquire the lease", "error", err)
	}
	return lease, sent, err
}

// observe learns the current leader without competing (during a hold-off).
func (j *job) observe(ctx context.Context) {
	octx, cancel := context.WithTimeout(ctx, j.spec.RetryEvery+j.spec.TTL/2)
	defer cancel()
	l, err := j.prov.Observe(octx, j.spec.Name)
	if err != nil {
		if ctx.Err() == nil {
			j.opDone(err)
		}
		return
	}
	j.opDone(nil)
	j.follow(l.Holder, l.Token)
}

// follow records the lease's holder as this node's leader.
func (j *job) follow(holder string, token uint64) {
	j.checkClash(holder)
	node := NodeOf(holder)
	j.setFollower(node, token)
	if node != "" {
		j.noteLeader(node, token)
	}
}

// checkClash watches for another process holding the lease under this
// node's node_id (see clash in identity.go).
func (j *job) checkClash(holder string) {
	if holder == "" || holder == j.holder || NodeOf(holder) != j.node {
		if j.clash.logged {
			j.clearLastError(j.clash.msg)
		}
		j.clash = clash{}
		return
	}
	now := j.clock.Now()
	if j.clash.holder != holder {
		j.clash = clash{holder: holder, since: now}
		j.log.Warn("the lease is held by another process with this node_id: an earlier run of this agent (its lease expires within the ttl) or a second agent with the same node_id",
			"holder", holder, "this_process", j.holder)
		return
	}
	if !j.clash.logged && now.Sub(j.clash.since) > j.spec.TTL+j.spec.RetryEvery {
		j.clash.logged = true
		j.clash.msg = fmt.Sprintf("node_id clash: another agent process (%s) with node_id %q keeps renewing this job's lease; give every agent its own node_id", holder, j.node)
		j.log.Error(j.clash.msg, "this_process", j.holder)
		j.setLastError(j.clash.msg)
	}
}

// noteLeader fires on_leader_change when the leader differs from the one
// this node knew.
func (j *job) noteLeader(holder string, token uint64) {
	if j.spec.Mode == config.ModeLock {
		return // every slot has a new winner: not a change of leader
	}
	if !j.known {
		j.known, j.lastLeader = true, holder
		return
	}
	if holder == "" || holder == j.lastLeader {
		return
	}
	prev := j.lastLeader
	j.lastLeader = holder
	ev := j.event(config.EventLeaderChange, holder, prev, token)
	j.log.Info("leader changed", "leader", holder, "previous_leader", prev, "token", token)
	j.transition(config.EventLeaderChange)
	j.hooks.fire(ev, j.spec.OnLeaderChange)
}

func (j *job) event(typ, leader, prev string, token uint64) config.Event {
	return config.Event{Type: typ, Job: j.spec.Name, Node: j.node, Leader: leader,
		PreviousLeader: prev, Token: token, Time: time.Now()}
}

func (j *job) transition(typ string) {
	if j.metrics != nil {
		j.metrics.Transitions.WithLabelValues(j.spec.Name, typ).Inc()
	}
}

func (j *job) setLeaderGauge(v float64) {
	if j.metrics != nil {
		j.metrics.IsLeader.WithLabelValues(j.spec.Name).Set(v)
	}
}

// stepDownReason says why a leader stops leading.
type stepDownReason struct {
	why     string
	lost    bool // the store says the lease is gone: nothing to release
	failure bool // shown as the job's last error
	holdOff bool // asked through the API: let another node take over
	// giveAway: this node cannot do the work (the metric's reason); it
	// stays out of the election for the run block's hold_off.
	giveAway string
	// backoff: the work ended by itself (restart = "never"); the next term
	// waits, longer each time, so a command that exits at once cannot
	// make an election storm.
	backoff bool
}

// maxBackoff caps the pause between terms whose work ends by itself.
const maxBackoff = time.Minute

// lead holds the lease and runs the job's work until a reason to stop:
// shutdown, a lost lease, a renewal deadline missed, a step-down request,
// or the work ending (restart = "never"; a lock-mode slot done). It returns
// the time until which the node should not compete again.
//
// lockSlot is the slot a lock-mode job took the lease for (zero in leader
// mode).
func (j *job) lead(ctx context.Context, lease providers.Lease, sent time.Time, lockSlot time.Time) (holdOff time.Time) {
	spec := j.spec
	began := j.clock.Now()
	tm := newTerm(sent, spec.TTL, spec.StopTimeout())
	prev := j.lastLeader
	j.known, j.lastLeader = true, j.node
	j.setLeader(lease)
	j.setLeaderGauge(1)
	j.transition(config.EventElected)
	j.log.Info("elected", "token", lease.Token)
	elected := j.event(config.EventElected, j.node, prev, lease.Token)
	electedDone := j.hooks.fire(elected, spec.OnElected)
	if prev != j.node && spec.Mode == config.ModeLeader {
		ev := j.event(config.EventLeaderChange, j.node, prev, lease.Token)
		j.transition(config.EventLeaderChange)
		j.hooks.fire(ev, spec.OnLeaderChange)
	}

	w := &leaderWork{j: j, elected: elected}
	var reason stepDownReason
	failed := false
	for reason.why == "" {
		now := j.clock.Now()
		renewAt := tm.nextRenew(now, failed, spec.RenewEvery, spec.RetryEvery)
		if j.batch != nil && !failed {
			renewAt = j.batch.align(renewAt, now, spec.RenewEvery)
		}
		select {
		case <-ctx.Done():
			reason.why = context.Cause(ctx).Error()

		case <-electedDone:
			// on_elected execs have finished: the work may start.
			electedDone = nil
			if late := j.pastDeadline(tm); late.why != "" {
				reason = late // paused past the deadline: start nothing
				break
			}
			if r := w.begin(ctx, &lease, &tm, lockSlot); r.why != "" {
				reason = r
			}

		case <-j.clock.After(renewAt.Sub(now)):
			if late := j.pastDeadline(tm); late.why != "" {
				reason = late
				break
			}
			renewed, rsent, err := j.renew(ctx, lease, tm.stopBy)
			switch {
			case err == nil:
				lease, tm, failed = renewed, newTerm(rsent, spec.TTL, spec.StopTimeout()), false
				j.setLeader(lease)
			case errors.Is(err, providers.ErrLost):
				reason = stepDownReason{why: "the store says the lease is lost", lost: true, failure: true}
			case ctx.Err() != nil:
			default:
				failed = true
				j.log.Warn("renewal failed; retrying", "error", err,
					"stepping_down_in", tm.stopBy.Sub(j.clock.Now()).Round(time.Millisecond))
			}

		case r := <-w.events():
			// After a pause (SIGSTOP, VM freeze) a work event and the
			// renewal timer can be ready together; a restart or a slot
			// must not be acted on for a term that is already over.
			if late := j.pastDeadline(tm); late.why != "" {
				reason = late
				break
			}
			if r2 := w.handle(ctx, r, &lease, &tm); r2.why != "" {
				reason = r2
			}

		case reply := <-j.stepDown:
			reply <- nil
			reason = stepDownReason{why: "step-down requested", holdOff: true}
		}
	}
	if j.clock.Now().Sub(began) >= spec.TTL {
		j.backoffs = 0 // a healthy term
	}
	return j.stepDownNow(lease, w, reason)
}

// pastDeadline is the reason to step down when the term's stopBy has
// passed, or a zero reason.
func (j *job) pastDeadline(tm term) stepDownReason {
	now := j.clock.Now()
	if now.Before(tm.stopBy) {
		return stepDownReason{}
	}
	return stepDownReason{failure: true, why: fmt.Sprintf(
		"the lease could not be renewed in time (last successful renewal sent %s ago)",
		now.Sub(tm.sent).Round(time.Millisecond))}
}

// stepDownNow stops the work (stop signal, grace, SIGKILL), releases the
// lease unless it is known lost, then fires on_demoted.
func (j *job) stepDownNow(lease providers.Lease, w *leaderWork, reason stepDownReason) (holdOff time.Time) {
	j.setState(api.StateStopping)
	j.log.Info("stepping down", "reason", reason.why, "token", lease.Token)
	w.stop()
	if !reason.lost {
		// The loop's context may be cancelled (shutdown): release on a
		// context of its own, bounded so a dead store cannot hold up exit.
		rctx, cancel := context.WithTimeout(context.Background(), min(j.spec.TTL, 5*time.Second))
		err := j.prov.Release(rctx, lease)
		cancel()
		switch {
		case err == nil:
			j.log.Info("released the lease", "token", lease.Token)
		case errors.Is(err, providers.ErrLost):
			j.log.Info("the lease was already gone when releasing it", "token", lease.Token)
		default:
			j.log.Warn("cannot release the lease; it will expire", "error", err)
		}
	}
	j.setLeaderGauge(0)
	j.transition(config.EventDemoted)
	j.setState(api.StateCandidate)
	if reason.failure {
		j.setLastError(reason.why)
	}
	// Who leads next is not known yet; the next answer from the store
	// fires on_leader_change with this node as previous_leader.
	j.hooks.fire(j.event(config.EventDemoted, "", j.node, lease.Token), j.spec.OnDemoted)
	now := j.clock.Now()
	switch {
	case reason.holdOff:
		return now.Add(j.spec.TTL)
	case reason.giveAway != "":
		holdOff := j.spec.Run.HoldOff
		j.log.Error("this node cannot do the work: gave the job away", "reason", reason.why, "hold_off", holdOff)
		if j.metrics != nil {
			j.metrics.GivenAway.WithLabelValues(j.spec.Name, reason.giveAway).Inc()
		}
		return now.Add(holdOff)
	case reason.backoff:
		d := min(j.spec.RetryEvery<<min(j.backoffs, 20), maxBackoff)
		j.backoffs++
		j.log.Info("backing off before competing again", "for", d)
		return now.Add(d)
	}
	return time.Time{}
}

// renew sends a renewal that must answer before stopBy.
func (j *job) renew(ctx context.Context, lease providers.Lease, stopBy time.Time) (providers.Lease, time.Time, error) {
	sent := j.clock.Now()
	rctx, cancel := context.WithTimeout(ctx, stopBy.Sub(sent))
	defer cancel()
	var renewed providers.Lease
	var err error
	if j.batch != nil {
		renewed, err = j.batch.Renew(rctx, lease)
	} else {
		renewed, err = j.prov.Renew(rctx, lease)
	}
	if err != nil && ctx.Err() == nil {
		j.opDone(err)
	} else if err == nil {
		j.opDone(nil)
		renewed.Value = lease.Value
	}
	return renewed, sent, err
}

// Status bookkeeping, read by the API.

func (j *job) status() api.JobStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.st
}

// opDone records the outcome of a lease operation. Only an answer from the
// store (success, "held", "lost") counts for /healthz: an error or a timeout
// is not a completed operation, so a loop whose store stops answering is
// reported wedged (kubernetes #82960).
func (j *job) opDone(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err != nil && !errors.Is(err, providers.ErrLost) {
		j.st.LastError = err.Error()
		return
	}
	j.st.LastLeaseOp = time.Now()
}

func (j *job) setLastError(msg string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.st.LastError = msg
}

// clearLastError clears the last error when it is still msg.
func (j *job) clearLastError(msg string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.st.LastError == msg {
		j.st.LastError = ""
	}
}

func (j *job) setStateLocked(state string) {
	if j.st.State != state {
		j.st.State = state
		now := time.Now()
		j.st.Since = &now
	}
}

func (j *job) setState(state string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.setStateLocked(state)
	if state != api.StateLeader {
		j.st.LeaseExpires = nil
	}
}

func (j *job) setLeader(l providers.Lease) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.setStateLocked(api.StateLeader)
	j.st.Leader, j.st.Token, j.st.LastError = j.node, l.Token, ""
	if !l.Expires.IsZero() {
		e := l.Expires
		j.st.LeaseExpires = &e
	}
}

func (j *job) setFollower(holder string, token uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if holder == "" {
		j.setStateLocked(api.StateCandidate)
	} else {
		j.setStateLocked(api.StateFollower)
	}
	j.st.Leader, j.st.Token = holder, token
	j.st.LeaseExpires = nil
}
