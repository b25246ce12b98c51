package agent

import (
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/electd/electd/config"
)

// leaderWork is what a leader runs: the `run` command under its restart
// policy, or the `task` on its schedule. It lives for one term. Its steps
// run on the job's loop (job.onWork), which alone touches the lease: an
// error a step returns is the reason the term ends.
type leaderWork struct {
	j       *job
	elected config.Event
	slot    time.Time // lock mode: the slot the lease was taken for

	child    *started    // the run command, while it runs
	failures []time.Time // failed runs in a row, within the failure window

	task         *started // a task run in progress
	taskTimedOut bool
	recording    bool // a slot is being recorded with the lease

	timers []*timer
}

// after runs step on the loop after d, while the term lasts.
func (w *leaderWork) after(d time.Duration, step func() error) {
	w.timers = append(w.timers, w.j.l.after(d, func() { w.j.onWork(w, step) }))
}

// watchExit runs step on the loop when s exits, while the term lasts.
func (w *leaderWork) watchExit(s *started, step func(*started) error) {
	j := w.j
	go func() {
		<-s.Done()
		j.l.post(func() { j.onWork(w, func() error { return step(s) }) })
	}()
}

// quit cancels the work's timers; on the loop, before stop.
func (w *leaderWork) quit() {
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
	case spec.Task != nil && spec.Mode == config.ModeLock:
		return w.runSlot(w.slot)
	case spec.Task != nil:
		// A slot missed while no node led (the old leader died just before
		// it) is run once now: no scheduled run is lost to a failover.
		now := w.j.l.clock.Now()
		if missed := latestSlot(spec.Task.Schedule, lastSlot(w.j.lease.Value), now); !missed.IsZero() {
			w.j.log().Info("running a slot missed during the failover", "slot", missed.UTC().Format(time.RFC3339))
			if err := w.runSlot(missed); err != nil {
				return err
			}
		}
		w.scheduleNext(now)
	}
	return nil
}

func (w *leaderWork) scheduleNext(after time.Time) {
	next := nextSlot(w.j.spec.Task.Schedule, after)
	w.after(next.Sub(w.j.l.clock.Now()), func() error { return w.slotDue(next) })
}

func (w *leaderWork) startRun() error {
	run := w.j.spec.Run
	s, err := w.j.runner.start("run", run.Command, w.elected)
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
	w.j.runner.finished(s, false)
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

func (w *leaderWork) taskExited(s *started) error {
	if s != w.task {
		return nil
	}
	w.j.runner.finished(s, w.taskTimedOut)
	w.task, w.taskTimedOut = nil, false
	if w.j.spec.Mode == config.ModeLock {
		return fmt.Errorf("%w: the task run finished", ErrSlotDone)
	}
	return nil
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

func (w *leaderWork) slotDue(slot time.Time) error {
	if w.task != nil || w.recording {
		w.j.log().Warn("slot skipped: the previous run is still running", "slot", slot.UTC().Format(time.RFC3339))
		w.j.runner.count(w.elected.Type, "task", "skipped")
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
	if !lastSlot(w.j.lease.Value).Before(slot) {
		w.j.log().Info("slot already run; skipping it", "slot", slot.UTC().Format(time.RFC3339))
		if w.j.spec.Mode == config.ModeLock {
			return fmt.Errorf("%w: the slot was already run", ErrSlotDone)
		}
		return nil
	}
	w.recording = true
	w.j.renew(renewal{value: formatSlot(slot), then: func(err error) {
		w.recording = false
		w.j.onWork(w, func() error { return w.startTask(slot, err) })
	}})
	return nil
}

// startTask starts the task for slot once the slot is recorded (recorded
// is the store's error, or nil).
func (w *leaderWork) startTask(slot time.Time, recorded error) error {
	task, lock := w.j.spec.Task, w.j.spec.Mode == config.ModeLock
	log := w.j.log().With("slot", slot.UTC().Format(time.RFC3339))
	if recorded != nil {
		log.Warn("cannot record the slot with the lease; not running it (at most once per slot)", "error", recorded)
		w.j.runner.count(w.elected.Type, "task", "skipped")
		if lock {
			return fmt.Errorf("%w: the slot could not be recorded", ErrSlotDone)
		}
		return nil
	}
	ev := w.elected
	ev.Time = time.Now()
	// ELECTD_SLOT names the run for the task itself: an idempotency key.
	s, err := w.j.runner.start("task", task.Command, ev, "ELECTD_SLOT="+slot.UTC().Format(time.RFC3339))
	if err != nil {
		log.Error("cannot start the task", "error", err)
		w.j.runner.count(ev.Type, "task", "failed")
		if lock {
			return fmt.Errorf("%w: the task could not start: %v", ErrCannotStart, err)
		}
		return nil
	}
	log.Info("task started", "pid", s.Pid(), "token", ev.Token)
	w.task, w.taskTimedOut = s, false
	w.watchExit(s, w.taskExited)
	if task.Timeout > 0 {
		w.after(task.Timeout, func() error { return w.taskTimeout(s) })
	}
	return nil
}

// stop ends the work: stop signal to each process group, SIGKILL after the
// grace, and returns once everything is gone. It runs off the loop, after
// quit: no new work starts.
func (w *leaderWork) stop() {
	if s := w.child; s != nil {
		run := w.j.spec.Run
		if s.Stop(signalOr(run.StopSignal), run.StopTimeout) {
			w.j.log().Warn("run command did not stop within stop_timeout: killed its process group", "stop_timeout", run.StopTimeout)
		}
		w.j.runner.finished(s, false)
	}
	if s := w.task; s != nil {
		task := w.j.spec.Task
		if s.Stop(signalOr(task.StopSignal), task.StopTimeout) {
			w.j.log().Warn("task did not stop within stop_timeout: killed its process group", "stop_timeout", task.StopTimeout)
		}
		w.j.runner.finished(s, w.taskTimedOut)
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
