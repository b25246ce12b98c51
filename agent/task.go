package agent

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
)

// What every node knows of a task job's runs. The leader writes the slot
// record (record.go) with its lease; the other nodes read it by observing
// the lease: every watchEvery, and soon after the store notifies a change
// (a lock-mode run ends with a release). A node that leads knows its own.

// taskState is a task job's view of its runs on this node; only its loop
// touches it.
type taskState struct {
	rec      slotRecord // the record last seen: the store's, or this leader's own
	seen     string     // the last run added to the history
	watch    *timer
	watching bool   // an Observe of the record is out
	waitFor  uint64 // a trigger request sent from this node: watch closely until it has run
	asked    uint64 // lock mode: the newest trigger request made on this node, which this node runs
}

// requested says whether a lock-mode job has a trigger request to run:
// made on this node, and not yet taken by any node's run.
func (t *taskState) requested() bool { return t != nil && t.asked > t.rec.trigger }

// Bounds of the pause between two reads of the record by a node that does
// not lead: the job's ttl, within them.
const (
	minWatchEvery = time.Second
	maxWatchEvery = 30 * time.Second
	// closeWatch is the pause while this node waits for a trigger request
	// it sent to be run (electd trigger -wait).
	closeWatch = time.Second
)

// watchEvery is how often a node that does not lead reads the record, and
// the leader the trigger requests: the job's ttl, within bounds.
func watchEvery(spec *config.Job) time.Duration {
	return min(max(spec.TTL, minWatchEvery), maxWatchEvery)
}

// startTask starts the job's watch of its slot record (jobs with a task).
func (j *job) startTask() {
	if j.spec.Task == nil {
		return
	}
	j.task = &taskState{}
	j.setTask(slotRecord{})
	j.watchAfter(0)
}

func (j *job) stopTask() {
	if j.task != nil {
		j.l.cancel(j.task.watch)
		j.task.watch = nil
	}
}

func (j *job) watchAfter(d time.Duration) {
	j.l.cancel(j.task.watch)
	j.task.watch = j.l.after(d, j.watchRecord)
}

// watchRecord reads the record unless this node leads (it writes it).
func (j *job) watchRecord() {
	t := j.task
	t.watch = nil
	if j.phase == retired {
		return
	}
	every := watchEvery(j.spec)
	if t.waitFor > 0 {
		every = closeWatch
	}
	j.watchAfter(jitter(every))
	if t.watching || j.phase == leading || j.phase == stopping {
		return
	}
	t.watching = true
	j.l.observe(j.spec.Name, j.spec.RetryEvery+j.spec.TTL/2, func(l providers.Lease, err error) {
		t.watching = false
		if err == nil && j.phase != retired && j.phase != leading && j.phase != stopping {
			j.sawRecord(parseRecord(l.Value))
		}
	})
}

// taskNotified: the store says the job's lease may have changed: read the
// record soon (a lock-mode run has just ended and released it).
func (j *job) taskNotified() {
	if j.task != nil && j.phase != leading && j.phase != stopping && j.phase != retired {
		j.watchAfter(100 * time.Millisecond)
	}
}

// sawRecord shows rec: the API's task fields, and the history when it
// carries a run that ended and that this node had not seen.
func (j *job) sawRecord(rec slotRecord) {
	t := j.task
	if t == nil {
		return
	}
	t.rec = rec
	j.setTask(rec)
	r := rec.run
	if r == nil {
		return
	}
	if t.waitFor > 0 && r.Trigger >= t.waitFor && r.Result != ResultRunning {
		t.waitFor = 0
	}
	if r.Result == ResultRunning {
		return
	}
	if key := runKey(r); key != t.seen {
		t.seen = key
		at := r.Slot
		if r.EndedAt != nil {
			at = *r.EndedAt
		}
		j.recordRun(Transition{Time: at, Type: TransitionTaskRun, Leader: r.Node, Token: r.Token, Reason: describeResult(r), Run: r})
	}
}

func runKey(r *TaskRun) string {
	var started int64
	if r.StartedAt != nil {
		started = r.StartedAt.UnixMilli()
	}
	return fmt.Sprintf("%d/%d/%d/%s", r.Slot.Unix(), r.Trigger, started, r.Result)
}

// describeResult is a run's result as the history's reason shows it.
func describeResult(r *TaskRun) string {
	s := r.Result
	if r.ExitCode != nil && r.Result != ResultSucceeded {
		s += " (exit code " + strconv.Itoa(*r.ExitCode) + ")"
	}
	if r.Why != "" {
		s += ": " + r.Why
	}
	return s
}

// showOutcome shows the outcome of a run this node ran or skipped: the
// record shown, the metrics, the log and the task hooks.
func (j *job) showOutcome(rec slotRecord, r *TaskRun, output string, ev config.Event) {
	j.sawRecord(rec)
	if m := j.l.metrics; m != nil {
		m.TaskRuns.WithLabelValues(j.spec.Name, r.Result).Inc()
		if r.Result != ResultSkipped && r.StartedAt != nil {
			m.TaskDuration.WithLabelValues(j.spec.Name).Observe(r.Duration().Seconds())
		}
	}
	typ, hooks := config.EventTaskSucceeded, j.spec.OnTaskSucceeded
	if r.Failed() {
		typ, hooks = config.EventTaskFailed, j.spec.OnTaskFailed
	}
	if len(hooks) == 0 {
		return
	}
	run := &config.TaskRunEvent{Slot: r.Slot, Result: r.Result, Why: r.Why, Trigger: r.Trigger, ExitCode: -1,
		Output: j.l.fleet.redact.String(output)}
	if r.StartedAt != nil {
		run.StartedAt = *r.StartedAt
	}
	if r.EndedAt != nil {
		run.EndedAt = *r.EndedAt
	}
	if r.ExitCode != nil {
		run.ExitCode = *r.ExitCode
	}
	ev.Type, ev.Run, ev.Time, ev.Reason = typ, run, time.Now(), r.Result
	j.hooks.fire(ev, hooks, nil)
}

// slotDelay is how long after slot its run starts (random_delay): the same
// on every node, from the job's name and the slot, so that the nodes agree
// on when a lock-mode slot is competed for and what the next run is.
func slotDelay(job string, t *config.Task, slot time.Time) time.Duration {
	if t.RandomDelay <= 0 {
		return 0
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%d", job, slot.Unix())
	return time.Duration(h.Sum64()%uint64(t.RandomDelay/time.Millisecond)) * time.Millisecond
}

// nextRun is when the first scheduled run not yet due at now starts: the
// first slot after last (slots up to it ran) whose run, random_delay
// included, starts at or after now. Zero without a task.
func nextRun(t *config.Task, job string, last, now time.Time) time.Time {
	if t == nil || t.Schedule == nil {
		return time.Time{}
	}
	after := now.Add(-t.RandomDelay)
	if last.After(after) {
		after = last
	}
	for i := 0; i < 100000; i++ {
		slot := nextSlot(t.Schedule, after)
		if slot.IsZero() {
			return time.Time{}
		}
		if at := slot.Add(slotDelay(job, t, slot)); !at.Before(now) {
			return at.UTC()
		}
		after = slot
	}
	return time.Time{}
}

// Run now. `electd trigger` and POST /v1/jobs/{job}/trigger ask for a run
// through the store, not through the leader's API (which another node may
// not reach, and which moves with the lease): the request is a term of the
// job's trigger key, taken and released at once, and its fencing token is
// the request's number. The leader of a task job reads the trigger key
// every renew_every (and when the store notifies its release); a number
// above the record's last one is recorded with the job's lease, like a
// slot, before the task runs for it. So a request runs at most once across
// the cluster, whichever node leads when it is read and however often the
// lease moves: a new leader reads the number already taken from the record.
// Requests that come while a run is in progress run once after it (they
// are coalesced, as a slot is never run twice at once).
//
// A lock-mode job has no leader between slots: the node asked runs the
// request. It competes for the job's lease at once (again every
// retry_every while another node holds it for a slot), records the
// request's number with it and runs the task, then releases, as for a slot.
// A node that takes the lease and finds a number at or above its own in the
// record does not run it: a request runs at most once there too.

// triggerPrefix names a job's trigger key ("_electd." keys are the agent's;
// job names cannot start with "_").
const triggerPrefix = "_electd.trigger."

func triggerKey(job string) string { return triggerPrefix + job }

// Why a job cannot be triggered: it has no task, or (lock mode, where the
// node asked runs the request) this node may not run it now.
var (
	ErrNotTask    = errors.New("agent: the job has no task")
	ErrCannotLead = errors.New("agent: this node cannot run the job's task now")
)

// Trigger asks for one run of job's task now, on whichever node leads it,
// and returns the request's number: a run with TaskRun.Trigger at or above
// it is a run for this request. It returns once the request is in the
// store.
func (a *Agent) Trigger(ctx context.Context, name string) (uint64, error) {
	for _, r := range a.running() {
		if r.spec.Name != name {
			continue
		}
		if r.spec.Task == nil {
			return 0, fmt.Errorf("%w: job %q supervises a run command or only hooks", ErrNotTask, name)
		}
		lock := r.spec.Mode == config.ModeLock
		if lock {
			// The node asked runs a lock-mode request: not one that may not
			// take the lease.
			why := make(chan string, 1)
			r.l.post(func() { why <- r.unfit() })
			select {
			case w := <-why:
				if w != "" {
					return 0, fmt.Errorf("%w: job %q runs in lock mode, where the node asked runs the request, and this node does not compete for it (%s); ask another node", ErrCannotLead, name, w)
				}
			case <-r.done():
				return 0, fmt.Errorf("job %q is stopping", name)
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		n, err := request(ctx, r.l.prov, triggerKey(name), r.holder(), r.spec.TTL)
		if err != nil {
			return 0, fmt.Errorf("trigger %q: %w", name, err)
		}
		r.l.post(func() {
			if t := r.task; t != nil && r.phase != retired {
				t.waitFor = max(t.waitFor, n)
				if lock {
					t.asked = max(t.asked, n)
					r.requestLock()
					return
				}
				r.triggerNotified()
				r.watchAfter(closeWatch)
			}
		})
		a.log.Info("task run requested", "job", name, "request", n)
		return n, nil
	}
	return 0, ErrNoSuchJob
}

// request takes and releases key: the term's token numbers the request.
// Another request being made at the same moment holds the key for a round
// trip: this one waits for it.
func request(ctx context.Context, p providers.Provider, key, holder string, ttl time.Duration) (uint64, error) {
	for {
		l, err := p.Acquire(ctx, providers.AcquireRequest{Key: key, Holder: holder, TTL: ttl})
		var held *providers.HeldError
		switch {
		case err == nil:
			// The request stands once its token is taken: a release that
			// fails leaves the key to expire at the end of its ttl.
			_ = p.Release(ctx, l)
			return l.Token, nil
		case errors.As(err, &held):
			select {
			case <-ctx.Done():
				return 0, fmt.Errorf("the trigger key is held by %s: %w", held.Holder, ctx.Err())
			case <-time.After(20*time.Millisecond + rand.N(30*time.Millisecond)):
			}
		default:
			return 0, err
		}
	}
}

// triggerNotified: a trigger request may have been made; the leader reads
// the key now.
func (j *job) triggerNotified() {
	if j.phase == leading && j.term.work != nil && j.spec.Task != nil && j.spec.Mode != config.ModeLock {
		j.term.work.checkTrigger()
	}
}

// value is what the lease carries at its next renewal: a task's record as
// its work keeps it, else the value it has.
func (t *term) value() string {
	if w := t.work; w != nil && t.j.spec.Task != nil {
		return w.rec.String()
	}
	return t.lease.Value
}

// requestLock: a lock-mode candidate competes for a request made on this
// node now rather than at its next slot; a node holding the lease for a
// slot runs it after (policy.go, perSlot).
func (j *job) requestLock() {
	if j.phase == candidate && j.retiring == nil {
		j.compete()
	}
}
