package agent

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
)

// leaderWork is what a leader runs: the `run` command under its restart
// policy, or the `task` on its schedule. It lives for one term and is driven
// by the election loop, which alone touches the lease.
type leaderWork struct {
	j       *job
	elected config.Event

	child    *started    // the run command, while it runs
	failures []time.Time // failed runs in a row, within the failure window

	task         *started // a task run in progress
	taskTimedOut bool

	evs  chan workEvent
	quit chan struct{}
}

type workEvent struct {
	kind string // runExited | restartDue | taskExited | taskTimeout | slotDue
	s    *started
	slot time.Time
}

func (w *leaderWork) events() <-chan workEvent {
	if w.evs == nil {
		w.evs = make(chan workEvent)
		w.quit = make(chan struct{})
	}
	return w.evs
}

// send delivers ev to the loop unless the work has stopped.
func (w *leaderWork) send(ev workEvent) {
	select {
	case w.evs <- ev:
	case <-w.quit:
	}
}

func (w *leaderWork) after(d time.Duration, ev workEvent) {
	c := w.j.clock.After(d)
	go func() {
		select {
		case <-c:
			w.send(ev)
		case <-w.quit:
		}
	}()
}

func (w *leaderWork) watchExit(s *started, kind string) {
	go func() {
		select {
		case <-s.Done():
			w.send(workEvent{kind: kind, s: s})
		case <-w.quit:
		}
	}()
}

// begin starts the work once on_elected's execs are done.
func (w *leaderWork) begin(ctx context.Context, lease *providers.Lease, tm *term, lockSlot time.Time) stepDownReason {
	w.events()
	spec := w.j.spec
	switch {
	case spec.Run != nil:
		return w.startRun()
	case spec.Task != nil && spec.Mode == config.ModeLock:
		ran, r := w.runSlot(ctx, lockSlot, lease, tm)
		if !ran && r.why == "" {
			return stepDownReason{why: "the slot was already run"}
		}
		return r
	case spec.Task != nil:
		// A slot missed while no node led (the old leader died just before
		// it) is run once now: no scheduled run is lost to a failover.
		now := w.j.clock.Now()
		if missed := latestSlot(spec.Task.Schedule, lastSlot(lease.Value), now); !missed.IsZero() {
			w.j.log.Info("running a slot missed during the failover", "slot", missed.UTC().Format(time.RFC3339))
			if _, r := w.runSlot(ctx, missed, lease, tm); r.why != "" {
				return r
			}
		}
		w.scheduleNext(now)
	}
	return stepDownReason{}
}

func (w *leaderWork) scheduleNext(after time.Time) {
	next := nextSlot(w.j.spec.Task.Schedule, after)
	w.after(next.Sub(w.j.clock.Now()), workEvent{kind: "slotDue", slot: next})
}

func (w *leaderWork) startRun() stepDownReason {
	run := w.j.spec.Run
	s, err := w.j.runner.start("run", run.Command, w.elected)
	if err != nil {
		// A missing program, a file that is not executable, a dir that does
		// not exist: this node cannot do the work, and retrying here would
		// keep the job from the nodes that can.
		w.j.runner.count(w.elected.Type, "run", "failed")
		return stepDownReason{why: "the run command cannot start on this node: " + err.Error(), failure: true, giveAway: "cannot_start"}
	}
	w.j.log.Info("run command started", "pid", s.Pid(), "token", w.elected.Token)
	w.child = s
	w.watchExit(s, "runExited")
	return stepDownReason{}
}

// countFailure counts a failed run (a non-zero exit) and says to give the
// job away when max_failures of them came in a row within failure_window.
// A clean exit ends the row.
func (w *leaderWork) countFailure(code int) stepDownReason {
	run := w.j.spec.Run
	if code == 0 {
		w.failures = nil
		return stepDownReason{}
	}
	now := w.j.clock.Now()
	recent := w.failures[:0]
	for _, t := range w.failures {
		if now.Sub(t) < run.FailureWindow {
			recent = append(recent, t)
		}
	}
	w.failures = append(recent, now)
	if len(w.failures) < max(run.MaxFailures, 1) {
		return stepDownReason{}
	}
	return stepDownReason{failure: true, giveAway: "failing", why: fmt.Sprintf(
		"the run command failed %d times in a row within %s (last exit code %d)", len(w.failures), run.FailureWindow, code)}
}

func restartWait(run *config.Run) time.Duration {
	if run.RestartWait > 0 {
		return run.RestartWait
	}
	return time.Second
}

// handle reacts to one event of the work.
func (w *leaderWork) handle(ctx context.Context, ev workEvent, lease *providers.Lease, tm *term) stepDownReason {
	run, task := w.j.spec.Run, w.j.spec.Task
	switch ev.kind {
	case "runExited":
		if ev.s != w.child {
			return stepDownReason{}
		}
		w.child = nil
		w.j.runner.finished(ev.s, false)
		code := ev.s.ExitCode()
		if r := w.countFailure(code); r.why != "" {
			return r
		}
		switch {
		case run.Restart == config.RestartNever:
			return stepDownReason{why: "the run command exited (restart = never)", backoff: true}
		case run.Restart == config.RestartOnFailure && code == 0:
			w.j.log.Info("run command exited cleanly; not restarted (restart = on-failure); keeping the lease")
		default:
			w.j.log.Info("restarting the run command", "exit_code", code, "in", restartWait(run))
			w.after(restartWait(run), workEvent{kind: "restartDue"})
		}
	case "restartDue":
		return w.startRun()
	case "taskExited":
		if ev.s != w.task {
			return stepDownReason{}
		}
		w.j.runner.finished(ev.s, w.taskTimedOut)
		w.task, w.taskTimedOut = nil, false
		if w.j.spec.Mode == config.ModeLock {
			return stepDownReason{why: "the task run finished"}
		}
	case "taskTimeout":
		if ev.s == w.task && !w.taskTimedOut {
			w.taskTimedOut = true
			w.j.log.Warn("task timed out: stopping it", "timeout", task.Timeout)
			go ev.s.Stop(signalOr(task.StopSignal), task.StopTimeout)
		}
	case "slotDue":
		if w.task != nil {
			w.j.log.Warn("slot skipped: the previous run is still running", "slot", ev.slot.UTC().Format(time.RFC3339))
			w.j.runner.count(w.elected.Type, "task", "skipped")
		} else if _, r := w.runSlot(ctx, ev.slot, lease, tm); r.why != "" {
			return r
		}
		w.scheduleNext(ev.slot)
	}
	return stepDownReason{}
}

// runSlot records slot with the lease, then runs the task for it: at most
// once per slot across the cluster, because a slot is only run after the
// store has accepted it under this term. A slot already recorded is skipped.
func (w *leaderWork) runSlot(ctx context.Context, slot time.Time, lease *providers.Lease, tm *term) (bool, stepDownReason) {
	task := w.j.spec.Task
	log := w.j.log.With("slot", slot.UTC().Format(time.RFC3339))
	if !lastSlot(lease.Value).Before(slot) {
		log.Info("slot already run; skipping it")
		return false, stepDownReason{}
	}
	l := *lease
	l.Value = formatSlot(slot)
	renewed, sent, err := w.j.renew(ctx, l, tm.stopBy)
	switch {
	case errors.Is(err, providers.ErrLost):
		return false, stepDownReason{why: "the store says the lease is lost", lost: true, failure: true}
	case err != nil:
		log.Warn("cannot record the slot with the lease; not running it (at most once per slot)", "error", err)
		w.j.runner.count(w.elected.Type, "task", "skipped")
		return false, stepDownReason{}
	}
	*lease, *tm = renewed, newTerm(sent, w.j.spec.TTL, w.j.spec.StopTimeout())
	w.j.setLeader(renewed)
	ev := w.elected
	ev.Time = time.Now()
	// ELECTD_SLOT names the run for the task itself: an idempotency key.
	s, err := w.j.runner.start("task", task.Command, ev, "ELECTD_SLOT="+slot.UTC().Format(time.RFC3339))
	if err != nil {
		log.Error("cannot start the task", "error", err)
		w.j.runner.count(ev.Type, "task", "failed")
		if w.j.spec.Mode == config.ModeLock {
			return false, stepDownReason{why: "the task could not start: " + err.Error(), failure: true}
		}
		return false, stepDownReason{}
	}
	log.Info("task started", "pid", s.Pid(), "token", ev.Token)
	w.task, w.taskTimedOut = s, false
	w.watchExit(s, "taskExited")
	if task.Timeout > 0 {
		w.after(task.Timeout, workEvent{kind: "taskTimeout", s: s})
	}
	return true, stepDownReason{}
}

// stop ends the work: stop signal to each process group, SIGKILL after the
// grace, and returns once everything is gone. No new work starts after it.
func (w *leaderWork) stop() {
	if w.quit != nil {
		close(w.quit)
	}
	if s := w.child; s != nil {
		run := w.j.spec.Run
		if s.Stop(signalOr(run.StopSignal), run.StopTimeout) {
			w.j.log.Warn("run command did not stop within stop_timeout: killed its process group", "stop_timeout", run.StopTimeout)
		}
		w.j.runner.finished(s, false)
		w.child = nil
	}
	if s := w.task; s != nil {
		task := w.j.spec.Task
		if s.Stop(signalOr(task.StopSignal), task.StopTimeout) {
			w.j.log.Warn("task did not stop within stop_timeout: killed its process group", "stop_timeout", task.StopTimeout)
		}
		w.j.runner.finished(s, w.taskTimedOut)
		w.task = nil
	}
}

func signalOr(s syscall.Signal) syscall.Signal {
	if s == 0 {
		return syscall.SIGTERM
	}
	return s
}

// Slots. A slot is named by its scheduled time in Unix seconds; it is the
// value carried with the lease (the last slot run).

func formatSlot(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

func lastSlot(v string) time.Time {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.Unix(n, 0)
}

// nextSlot is the first slot after t. `@every D` slots are aligned to
// multiples of D since the Unix epoch rather than to each node's start, so
// every node names the same slots.
func nextSlot(s cron.Schedule, t time.Time) time.Time {
	if c, ok := s.(cron.ConstantDelaySchedule); ok && c.Delay > 0 {
		n := t.Unix() / int64(c.Delay/time.Second)
		return time.Unix((n+1)*int64(c.Delay/time.Second), 0)
	}
	return s.Next(t)
}

// latestSlot is the latest slot after last and not after now (zero when
// there is none, or when no slot was ever run: a new job does not catch up).
func latestSlot(s cron.Schedule, last, now time.Time) time.Time {
	if last.IsZero() {
		return time.Time{}
	}
	var found time.Time
	for i, t := 0, nextSlot(s, last); i < 100000 && !t.After(now); i, t = i+1, nextSlot(s, t) {
		found = t
	}
	return found
}
