package agent

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/redact"
	"github.com/electd/electd/providers"
)

// Which node leads, beyond "exactly one":
//
//   - placement: a job's constraint keeps it on nodes whose tags match; a
//     job's prefer moves it, by a graceful handover, to a matching node that
//     has been fit for prefer_settle;
//   - balance: the agents sharing a provider spread its jobs evenly;
//   - drain: an agent hands over every job and competes for none.
//
// Agents learn about each other through membership records in the lease
// store itself (members.go). Nothing here weakens the timing rule; it only
// decides when a node competes and when a leader hands over.

// fleet is what the agent's loops share: this node's tags, and whether it
// balances and drains.
type fleet struct {
	node     string            // node_id: fixed for the agent's life (a reload does not change it)
	holder   string            // node_id#incarnation, this process's (identity.go)
	tags     map[string]string // the agent's tags, "node" = node_id included
	balance  bool
	draining atomic.Bool
	forced   atomic.Bool  // the drain gives up the jobs no other agent can lead
	views    atomic.Int64 // membership views taken, on every store (tests wait on it)
	redact   *redact.Set  // the configuration's secrets, masked in what hooks are given
}

func newFleet(a config.Agent, holder string) *fleet {
	tags := maps.Clone(a.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[config.TagNode] = a.NodeID
	return &fleet{node: a.NodeID, holder: holder, tags: tags, balance: a.Balance}
}

// matches says whether tags hold every pair of want.
func matches(tags, want map[string]string) bool {
	for k, v := range want {
		if tags[k] != v {
			return false
		}
	}
	return true
}

func describeTags(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

// unfit says why the job stays out of the election now, or "" when it
// competes.
func (j *job) unfit() string {
	switch {
	case !j.eligible:
		return fmt.Sprintf("not eligible: constraint %s does not match this node's tags (%s)",
			describeTags(j.spec.Constraint), describeTags(j.l.fleet.tags))
	case j.l.fleet.draining.Load() && !j.drainKept:
		return "the agent is draining"
	case j.spec.Health != nil && j.health.state == HealthUnknown:
		return "waiting for the first health check"
	case !j.healthy():
		return "health check failing: " + j.health.lastError
	case j.spec.Mode != config.ModeLock && j.l.clock.Now().Before(j.holdOff):
		return "holding off after its last term, until " + time.Now().Add(j.holdOff.Sub(j.l.clock.Now())).UTC().Format(time.RFC3339)
	}
	return ""
}

// refit is called when the job's fitness may have changed (health, drain):
// a waiting candidate tries at once, or learns it must not.
func (j *job) refit() {
	if j.phase == candidate && j.spec.Mode != config.ModeLock && j.retiring == nil {
		j.l.cancel(j.timer)
		j.attempt()
	}
}

// drain sets the agent's drain on this job: a leader hands over, a
// candidate stops competing; cancelling makes it compete again. It returns
// what became of a leader, nil for a job that did not lead here.
func (j *job) drain(on bool) *DrainJob {
	if on && j.phase == leading {
		return j.drainLeader(false)
	}
	if !on && j.drainKept {
		j.drainKept = false
		j.setCompeting(true, "")
	}
	if why := j.unfit(); why != "" {
		j.setCompeting(false, why) // shown now, whatever is in flight
	}
	j.refit()
	return nil
}

// DrainJob is what a drain does with a job this agent leads.
type DrainJob struct {
	Job string `json:"job"`
	// Takers are the other live agents that can lead the job now (their
	// node_id): the job is handed over, and one of them takes it once the
	// lease is released. Empty with Kept.
	Takers []string `json:"takers,omitempty"`
	// Kept: no other live agent can lead the job now (none has it, or
	// each of them is draining, unhealthy, holding it off or excluded by
	// its constraint), so this agent keeps leading it and hands it over
	// as soon as one can; a forced drain gives it up anyway.
	Kept bool `json:"kept,omitempty"`
	// Forced: given up by a forced drain while no other agent could lead it.
	Forced bool `json:"forced,omitempty"`
}

// drainKeptWhy is what a leader kept by a drain shows as its waiting;
// drainNextWhy, one about to be handed over.
const (
	drainKeptWhy = "draining: no other agent can lead this job now; it stays here until one can (electd drain -force gives it up)"
	drainNextWhy = "draining: handing over"
)

// drainLeader decides for j, led by a draining agent: handed over when
// another live agent can lead it, given up when the drain is forced (or
// for a lock-mode job's slot), else kept. Unless now, a job to hand over
// stays until drainSome hands it over (a few at a time, once the other
// agents have seen this one drain, so that they share what it gives).
func (j *job) drainLeader(now bool) *DrainJob {
	rep := &DrainJob{Job: j.spec.Name}
	if m := j.l.members; m != nil && j.spec.Mode != config.ModeLock {
		for _, r := range m.takers(j) {
			rep.Takers = append(rep.Takers, NodeOf(r.holder))
		}
	}
	switch {
	case j.spec.Mode == config.ModeLock:
		// A lock-mode job holds its lease for one slot's run: it goes.
	case len(rep.Takers) > 0 && !now && !j.l.fleet.forced.Load():
		j.drainKept = true
		j.setCompeting(true, drainNextWhy)
		return rep
	case len(rep.Takers) > 0:
	case j.l.fleet.forced.Load():
		rep.Forced = true
	default:
		rep.Kept = true
		if j.st.Waiting != drainKeptWhy {
			j.log().Warn("draining, but no other agent can lead this job now: keeping it until one can")
		}
		j.drainKept = true
		j.setCompeting(true, drainKeptWhy)
		return rep
	}
	j.drainKept = false
	j.stepDown(ErrDrained)
	return rep
}

// deferral is how long a candidate waits, beyond the moment the lease is
// free, so that the node the fleet wants there gets it first: a preferred
// node that is ready, or an agent that leads fewer than its share.
func (j *job) deferral() time.Duration {
	m := j.l.members
	if m == nil || j.spec.Mode == config.ModeLock {
		return 0
	}
	if len(j.spec.Prefer) > 0 && !matches(j.l.fleet.tags, j.spec.Prefer) && m.wanted[j.spec.Name] {
		return j.spec.TTL
	}
	if j.l.fleet.balance && m.othersUnder && j.l.leading >= m.target && m.underCanLead(j) {
		return balanceDefer
	}
	return 0
}

// placed sorts a loop's jobs for the placement rules, which run every
// second: with 10,000 jobs, walking them all was most of an idle agent's
// own CPU. Rebuilt when a job starts or ends.
type placed struct {
	stale     bool
	prefer    []*job // jobs with a prefer
	constrain []*job // leader-mode jobs with a constraint
	plain     int    // leader-mode jobs without one: every agent admits them
}

// placement returns the loop's jobs sorted for placement, on the loop.
func (l *loop) placement() *placed {
	p := &l.placed
	if !p.stale {
		return p
	}
	p.stale, p.prefer, p.constrain, p.plain = false, p.prefer[:0], p.constrain[:0], 0
	for _, j := range l.jobs {
		if len(j.spec.Prefer) > 0 {
			p.prefer = append(p.prefer, j)
		}
		switch {
		case j.spec.Mode == config.ModeLock:
		case len(j.spec.Constraint) > 0:
			p.constrain = append(p.constrain, j)
		default:
			p.plain++
		}
	}
	return p
}

// observe learns the current leader without competing (during a hold-off).
func (j *job) observe() {
	j.phase = asking
	j.l.observe(j.spec.Name, j.spec.RetryEvery+j.spec.TTL/2, func(l providers.Lease, err error) {
		j.phase = candidate
		if j.retiring != nil {
			j.leave()
			return
		}
		j.opDone(err)
		if err == nil {
			j.follow(l.Holder, l.Token)
		}
		every := j.spec.RetryEvery
		if !j.eligible {
			// It will never compete here: look less often, but often
			// enough for the health rule (a lease operation per ttl).
			every = max(every, j.spec.TTL/2)
		}
		j.wait(jitter(every))
	})
}

// requestStepDown is the API's step-down: release and hold off for one ttl.
func (j *job) requestStepDown() error {
	switch {
	case j.spec.Mode == config.ModeLock:
		return fmt.Errorf("job %q takes its lock per task run; there is no leadership to hand over", j.spec.Name)
	case j.phase != leading:
		return fmt.Errorf("this node does not lead job %q", j.spec.Name)
	}
	j.stepDown(ErrStepDownRequested)
	return nil
}

// unfitToLead is why this node may not hold the job's lease now, or nil.
// It is judged at every decision of a term (an Acquire's answer, a
// renewal's, each health result while leading), not only when fitness
// changes: a drain or a health check turning to failing that lands while a
// request is out is seen when its answer comes. A hold-off is a
// candidate's pause, not a reason to let go.
func (j *job) unfitToLead() error {
	switch {
	case !j.eligible:
		return fmt.Errorf("%w: its constraint does not admit this node", ErrConfigChanged)
	case j.l.fleet.draining.Load() && !j.drainKept:
		// A leader the drain keeps, for want of another agent that can
		// lead it or until its turn to be handed over (fleet.go), leads on.
		return ErrDrained
	case j.spec.Health != nil && j.health.state == HealthFailing:
		return j.unhealthy()
	}
	return nil
}

// letGo gives back a lease just won by a node that became unfit while its
// Acquire was out. No term begins: no hook fires and no work starts. The
// history shows the lease won and given back at once, with why (and
// electd_leader_changes_total counts it), and the job is a candidate again
// under its policy: a drained or unhealthy node competes once it is fit,
// and `electd lock` goes on waiting.
func (j *job) letGo(lease providers.Lease, reason error) {
	j.phase = stopping
	j.log().Info("won the lease but may not lead now: releasing it at once", "reason", reason.Error(), "token", lease.Token)
	j.count(config.EventElected)
	j.event(config.EventElected, j.node(), j.lastLeader, lease.Token, ReasonElected)
	j.count(config.EventDemoted)
	j.event(config.EventDemoted, "", j.node(), lease.Token, reasonOf(reason))
	if failure(reason) {
		j.setLastError(reason.Error())
	}
	j.l.release(releaseOp{lease: lease, timeout: j.releaseTimeout(), done: func(err error) {
		j.released(lease, err)
		j.compete()
	}})
}
