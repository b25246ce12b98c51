package agent

import (
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
)

// leaderWork is what a leader runs: the `run` command under its restart
// policy, or the `task` on its schedule. It lives for one term, t. Its steps
// run on the job's loop (term.onWork), which alone touches the lease: an
// error a step returns is the reason the term ends.
type leaderWork struct {
	j       *job
	t       *term
	elected config.Event
	slot    time.Time // lock mode: the slot the lease was taken for

	child    *started    // the run command, while it runs
	failures []time.Time // failed runs in a row, within the failure window

	task         *started // a task run in progress
	taskTimedOut bool
	recording    bool       // a run is being recorded with the lease
	rec          slotRecord // the task's record as this term writes it (record.go)
	prior        slotRecord // the record before the one being recorded
	pending      uint64     // the newest trigger request read
	polling      bool       // a read of the trigger requests is out
	stoppedTask  *started   // the run stop stopped

	timers []*timer
}

// after runs step on the loop after d, while the term lasts.
func (w *leaderWork) after(d time.Duration, step func() error) {
	w.timers = append(w.timers, w.j.l.after(d, func() { w.t.onWork(step) }))
}

// watchExit runs step on the loop when s exits, while the term lasts.
func (w *leaderWork) watchExit(s *started, step func(*started) error) {
	j := w.j
	go func() {
		<-s.Done()
		j.l.post(func() { w.t.onWork(func() error { return step(s) }) })
	}()
}

// cancelTimers cancels the work's timers; on the loop, before stop.
func (w *leaderWork) cancelTimers() {
	for _, t := range w.timers {
		w.j.l.cancel(t)
	}
	w.timers = nil
}

// begin starts the work once on_elected's execs are done.
func (w *leaderWork) begin() error {
	spec := w.j.spec
	switch {
	case spec.Run != nil:
		return w.startRun()
	case spec.Task != nil && spec.Mode == config.ModeLock && w.slot.IsZero():
		return w.runRequest()
	case spec.Task != nil && spec.Mode == config.ModeLock:
		return w.runSlot(w.slot)
	case spec.Task != nil:
		// A slot missed while no node led (the old leader died just before
		// it) is run once now: no scheduled run is lost to a failover. One
		// whose random_delay has not passed runs when it has.
		now := w.j.l.clock.Now()
		missed := latestSlot(spec.Task.Schedule, w.rec.slot, now)
		switch {
		case missed.IsZero():
			w.scheduleNext(now)
		case w.startsAt(missed).After(now):
			w.after(w.startsAt(missed).Sub(now), func() error { return w.slotDue(missed) })
		default:
			w.j.log().Info("running a slot missed during the failover", "slot", missed.UTC().Format(time.RFC3339))
			if err := w.runSlot(missed); err != nil {
				return err
			}
			w.scheduleNext(now)
		}
		w.pollTriggers() // requests made while no node led run now
	}
	return nil
}

func (w *leaderWork) scheduleNext(after time.Time) {
	next := nextSlot(w.j.spec.Task.Schedule, after)
	w.after(w.startsAt(next).Sub(w.j.l.clock.Now()), func() error { return w.slotDue(next) })
}

func (w *leaderWork) startRun() error {
	run := w.j.spec.Run
	s, err := w.j.runner.start("run", run.Command, w.elected)
	if shortOfResources(err) {
		return w.retryShort(err) // resources.go: not this node's fault for good
	}
	if err != nil {
		// A missing program, a file that is not executable, a dir that does
		// not exist: this node cannot do the work, and retrying here would
		// keep the job from the nodes that can.
		w.j.runner.count(w.elected.Type, "run", "failed")
		return fmt.Errorf("%w: %w", ErrCannotStart, err)
	}
	w.j.log().Info("run command started", "pid", s.Pid(), "token", w.elected.Token)
	w.child = s
	w.watchExit(s, w.runExited)
	return nil
}

// countFailure counts a failed run (a non-zero exit) and says to give the
// job away when max_failures of them came in a row within failure_window.
// A clean exit ends the row.
func (w *leaderWork) countFailure(code int) error {
	run := w.j.spec.Run
	if code == 0 {
		w.failures = nil
		return nil
	}
	now := w.j.l.clock.Now()
	recent := w.failures[:0]
	for _, t := range w.failures {
		if now.Sub(t) < run.FailureWindow {
			recent = append(recent, t)
		}
	}
	w.failures = append(recent, now)
	if len(w.failures) < max(run.MaxFailures, 1) {
		return nil
	}
	return fmt.Errorf("%w: it failed %d times in a row within %s (last exit code %d)",
		ErrFailing, len(w.failures), run.FailureWindow, code)
}

func restartWait(run *config.Run) time.Duration {
	if run.RestartWait > 0 {
		return run.RestartWait
	}
	return time.Second
}

func (w *leaderWork) runExited(s *started) error {
	run := w.j.spec.Run
	if s != w.child {
		return nil
	}
	w.child = nil
	w.j.runner.reap(s, false)
	code := s.ExitCode()
	if err := w.countFailure(code); err != nil {
		return err
	}
	switch {
	case run.Restart == config.RestartNever:
		return &ExitError{Code: code}
	case run.Restart == config.RestartOnFailure && code == 0:
		w.j.log().Info("run command exited cleanly; not restarted (restart = on-failure); keeping the lease")
	default:
		w.j.log().Info("restarting the run command", "exit_code", code, "in", restartWait(run))
		w.after(restartWait(run), w.startRun)
	}
	return nil
}

// taskExited ends a run whose command exited by itself (or at its timeout).
func (w *leaderWork) taskExited(s *started) error {
	if s != w.task {
		return nil
	}
	timedOut := w.taskTimedOut
	w.j.runner.reap(s, timedOut)
	w.task, w.taskTimedOut = nil, false
	code := s.ExitCode()
	result := ResultSucceeded
	switch {
	case timedOut:
		result = ResultTimedOut
	case code != 0:
		result = ResultFailed // a death by a signal the agent did not send included
	}
	w.setOutcome(result, &code, "", s.tail.String())
	if w.j.spec.Mode == config.ModeLock {
		return fmt.Errorf("%w: the task run finished", ErrSlotDone) // the release carries the record
	}
	w.write()
	return w.takeTrigger()
}

func (w *leaderWork) taskTimeout(s *started) error {
	task := w.j.spec.Task
	if s == w.task && !w.taskTimedOut {
		w.taskTimedOut = true
		w.j.log().Warn("task timed out: stopping it", "timeout", task.Timeout)
		go s.Stop(signalOr(task.StopSignal), task.StopTimeout)
	}
	return nil
}

// stamp is now as the record keeps it (milliseconds, UTC), so that the
// leader shows the very times the other nodes read from the store.
func (w *leaderWork) stamp() time.Time { return w.j.l.clock.Now().Truncate(time.Millisecond).UTC() }

// inherit takes over the record the previous term left. A run it shows as
// running died with the node that ran it (its lease expired, it was not
// released): it is recorded as killed, and on_task_failed fires here, as
// no other node will say that the run was lost.
func (w *leaderWork) inherit(rec slotRecord) {
	w.rec = rec
	r := rec.current()
	if r == nil || r.Result != ResultRunning {
		w.j.sawRecord(rec)
		return
	}
	lost := *r
	lost.Result, lost.Why = ResultKilled, "lost with the lease of the node running it"
	w.rec.run, w.rec.active = &lost, nil
	w.j.log().Warn("the last run died with the node that ran it", "node", r.Node, "token", r.Token,
		"slot", r.Slot.Format(time.RFC3339))
	w.j.showOutcome(w.rec, &lost, "", w.elected)
}

// startsAt is when slot's run starts: random_delay after it.
func (w *leaderWork) startsAt(slot time.Time) time.Time {
	return slot.Add(slotDelay(w.j.spec.Name, w.j.spec.Task, slot))
}

func (w *leaderWork) slotDue(slot time.Time) error {
	if w.task != nil || w.recording {
		w.j.log().Warn("slot skipped: the previous run is still running", "slot", slot.UTC().Format(time.RFC3339))
		w.j.runner.count(w.elected.Type, "task", "skipped")
		// The skip is the last run, for every node to show; the record
		// keeps the run in progress beside it, and its end is the last run
		// then.
		now := w.stamp()
		skipped := &TaskRun{Slot: slot.UTC(), EndedAt: &now, Result: ResultSkipped, Node: w.j.node(), Token: w.t.lease.Token,
			Why: "the previous run was still running"}
		w.rec.active, w.rec.run = w.rec.current(), skipped
		w.j.showOutcome(w.rec, skipped, "", w.elected)
		if !w.recording {
			w.write() // else the next renewal carries it
		}
	} else if err := w.runSlot(slot); err != nil {
		return err
	}
	w.scheduleNext(slot)
	return nil
}

// runSlot records slot with the lease, then runs the task for it: at most
// once per slot across the cluster, because a slot is only run after the
// store has accepted it under this term. A slot already recorded is skipped.
func (w *leaderWork) runSlot(slot time.Time) error {
	if !w.rec.slot.Before(slot) {
		w.j.log().Info("slot already run; skipping it", "slot", slot.UTC().Format(time.RFC3339))
		if w.j.spec.Mode == config.ModeLock {
			return fmt.Errorf("%w: the slot was already run", ErrSlotDone)
		}
		return nil
	}
	rec := w.rec
	rec.slot = slot
	w.record(rec, slot, 0)
	return nil
}

// takeTrigger runs the task for the newest trigger request read, unless it
// was run already or a run is in progress (then it runs after it).
func (w *leaderWork) takeTrigger() error {
	if w.pending <= w.rec.trigger || w.task != nil || w.recording {
		return nil
	}
	rec := w.rec
	rec.trigger = w.pending
	w.j.log().Info("running the task on request", "request", w.pending)
	w.record(rec, w.j.l.clock.Now().Truncate(time.Second), w.pending)
	return nil
}

// runRequest runs the task for the trigger request made on this node, in
// lock mode (a term taken for it rather than for a slot), unless a run for
// it, or for a later one, is in the record already.
func (w *leaderWork) runRequest() error {
	w.pending = w.j.task.asked
	if w.pending <= w.rec.trigger {
		return fmt.Errorf("%w: the trigger request was already run", ErrSlotDone)
	}
	return w.takeTrigger()
}

// pollTriggers reads the trigger key now and then as often as the other
// nodes read the record (watchEvery); a store that notifies has the
// leader read it at once (loop.notify).
func (w *leaderWork) pollTriggers() {
	w.checkTrigger()
	w.after(jitter(watchEvery(w.j.spec)), func() error { w.pollTriggers(); return nil })
}

// checkTrigger reads the job's trigger key (task.go): its token is the
// newest request.
func (w *leaderWork) checkTrigger() {
	if w.polling {
		return
	}
	w.polling = true
	j := w.j
	j.l.observe(triggerKey(j.spec.Name), j.spec.RenewEvery, func(l providers.Lease, err error) {
		w.polling = false
		w.t.onWork(func() error {
			if err != nil {
				j.log().Debug("cannot read the trigger requests", "error", err)
				return nil
			}
			w.pending = max(w.pending, l.Token)
			return w.takeTrigger()
		})
	})
}

// record writes rec, which marks the run of slot (for trigger, when not 0)
// as taken, with the lease, then starts the task: at most once across the
// cluster, as it runs only once the store has accepted the record under
// this term.
func (w *leaderWork) record(rec slotRecord, slot time.Time, trigger uint64) {
	now := w.stamp()
	run := &TaskRun{Slot: slot.UTC(), StartedAt: &now, Result: ResultRunning, Node: w.j.node(), Token: w.t.lease.Token, Trigger: trigger}
	rec.run, rec.active = run, nil
	w.prior, w.rec, w.recording = w.rec, rec, true
	w.j.sawRecord(rec)
	w.t.renew(renewal{value: rec.String(), then: func(err error) {
		w.recording = false
		w.t.onWork(func() error { return w.startTask(run, err) })
	}})
}

// write sends the record with the lease now rather than at the next
// renewal, so that the other nodes see a run's outcome soon. A renewal that
// fails leaves the record to the next one.
func (w *leaderWork) write() {
	w.t.renew(renewal{value: w.rec.String(), then: func(error) {}})
}

// startTask starts the task for run once its record is in the store
// (recorded is the store's error, or nil).
func (w *leaderWork) startTask(run *TaskRun, recorded error) error {
	task, lock := w.j.spec.Task, w.j.spec.Mode == config.ModeLock
	log := w.j.log().With("slot", run.Slot.Format(time.RFC3339))
	if recorded != nil {
		w.j.runner.count(w.elected.Type, "task", "skipped")
		if run.Trigger != 0 {
			// Not run, so not taken: the next read of the requests tries
			// again (a request runs at most once: only after a record
			// the store accepted).
			log.Warn("cannot record the trigger request with the lease; trying again", "request", run.Trigger, "error", recorded)
			w.rec = w.prior
			w.j.sawRecord(w.rec)
			if lock {
				return fmt.Errorf("%w: the trigger request could not be recorded", ErrSlotDone)
			}
			return nil
		}
		log.Warn("cannot record the slot with the lease; not running it (at most once per slot)", "error", recorded)
		w.setOutcome(ResultSkipped, nil, "the slot could not be recorded in the store", "")
		if lock {
			return fmt.Errorf("%w: the slot could not be recorded", ErrSlotDone)
		}
		return nil
	}
	ev := w.elected
	ev.Time = time.Now()
	// ELECTD_SLOT names the run for the task itself: an idempotency key.
	extra := []string{"ELECTD_SLOT=" + run.Slot.Format(time.RFC3339)}
	if run.Trigger != 0 {
		extra = append(extra, "ELECTD_TRIGGER="+strconv.FormatUint(run.Trigger, 10))
	}
	s, err := w.j.runner.start("task", task.Command, ev, extra...)
	if err != nil {
		log.Error("cannot start the task", "error", err)
		w.j.runner.count(ev.Type, "task", "failed")
		w.setOutcome(ResultFailed, nil, "not started: "+err.Error(), "")
		if lock {
			return fmt.Errorf("%w: the task could not start: %v", ErrCannotStart, err)
		}
		w.write()
		return nil
	}
	log.Info("task started", "pid", s.Pid(), "token", ev.Token)
	now := w.stamp()
	started := *run
	started.StartedAt = &now
	if w.rec.active != nil {
		w.rec.active = &started // a slot was skipped while the record was on its way
	} else {
		w.rec.run = &started
	}
	w.j.sawRecord(w.rec)
	w.task, w.taskTimedOut = s, false
	w.watchExit(s, w.taskExited)
	if task.Timeout > 0 {
		w.after(task.Timeout, func() error { return w.taskTimeout(s) })
	}
	return nil
}

// setOutcome sets the outcome of the run in the record, shows it and fires
// the task hooks. The record reaches the store with the next renewal (write)
// or the release.
func (w *leaderWork) setOutcome(result string, code *int, why, output string) {
	now := w.stamp()
	done := *w.rec.current()
	done.EndedAt, done.Result, done.ExitCode, done.Why = &now, result, code, why
	w.rec.run, w.rec.active = &done, nil
	if result == ResultSucceeded {
		w.rec.lastSuccess = now
	}
	log := w.j.log().With("slot", done.Slot.Format(time.RFC3339), "result", result)
	if done.Trigger != 0 {
		log = log.With("request", done.Trigger)
	}
	switch {
	case result == ResultSucceeded:
		log.Info("task run ended", "duration", done.Duration().Round(time.Millisecond))
	case code != nil:
		log.Warn("task run ended", "exit_code", *code, "duration", done.Duration().Round(time.Millisecond))
	default:
		log.Warn("task run ended", "why", why)
	}
	w.j.showOutcome(w.rec, &done, output, w.elected)
}

// stopped is called on the loop once stop has returned: a run it stopped
// is recorded as killed (timed_out when its timeout had come), and a run
// whose record was still on its way to the store is forgotten, as it never
// started. It returns the record for the release.
func (w *leaderWork) stopped(reason error) string {
	switch {
	case w.recording:
		w.rec, w.recording = w.prior, false
		w.j.sawRecord(w.rec)
	case w.stoppedTask != nil:
		s := w.stoppedTask
		code := s.ExitCode()
		result, why := ResultKilled, "stopped: "+reasonOf(reason)
		if w.taskTimedOut {
			result, why = ResultTimedOut, ""
		}
		w.setOutcome(result, &code, why, s.tail.String())
	}
	return w.rec.String()
}

// stop ends the work: stop signal to each process group, SIGKILL after the
// grace, and returns once everything is gone. It runs off the loop, after
// cancelTimers: no new work starts.
func (w *leaderWork) stop(spec *config.Job) {
	if s := w.child; s != nil {
		run := spec.Run
		if s.Stop(signalOr(run.StopSignal), run.StopTimeout) {
			w.j.log().Warn("run command did not stop within stop_timeout: killed its process group", "stop_timeout", run.StopTimeout)
		}
		w.j.runner.reap(s, false)
	}
	if s := w.task; s != nil {
		task := spec.Task
		if s.Stop(signalOr(task.StopSignal), task.StopTimeout) {
			w.j.log().Warn("task did not stop within stop_timeout: killed its process group", "stop_timeout", task.StopTimeout)
		}
		w.j.runner.reap(s, w.taskTimedOut)
		w.stoppedTask = s // its record is written on the loop (stopped)
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

// lastSlot is the last slot a lease value records (record.go).
func lastSlot(v string) time.Time { return parseRecord(v).slot }

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
