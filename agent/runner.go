package agent

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/actions/proc"
	"github.com/electd/electd/config"
	"github.com/electd/electd/metrics"
)

// runner starts one job's commands: evaluates them with the event, adds the
// ELECTD_* environment, sends their output to the log and counts the outcome.
type runner struct {
	job     string
	log     hclog.Logger
	shim    string
	spares  *proc.Spares  // nil: a fresh shim for every command
	as      *config.RunAs // the job's user, group and umask; nil: the agent's
	metrics *metrics.Metrics
	// stdout and stderr, when set, receive the commands' output as it is
	// instead of the log (RunOnce).
	stdout, stderr io.Writer

	mu    sync.Mutex
	procs map[*proc.Process]struct{} // running, for Kill
	// killed: killAll was called (the agent's second signal); a command
	// that was starting then, or starts later, is killed once it is known.
	killed bool
	output *outputLimit // the job's bucket of log lines (output.go)
	// shortInRow counts the starts in a row that failed for lack of a
	// resource, for the backoff (resources.go).
	shortInRow int
}

// outputLimit is the job's bucket of log lines, made on first use.
func (r *runner) outputLimit() *outputLimit {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.output == nil {
		r.output = newOutputLimit(r.job, r.metrics, nil)
	}
	return r.output
}

// started is a running command with its log writers, flushed when it ends.
type started struct {
	*proc.Process
	kind, event string
	out, errw   *lineLogger
	tail        *tail // a task's last lines; nil for other kinds
}

// start evaluates c with ev and starts it. kind is "run", "task" or "exec";
// extra is added to the environment (a task's ELECTD_SLOT).
func (r *runner) start(kind string, c config.Command, ev config.Event, extra ...string) (*started, error) {
	argv, err := c.Argv.Eval(ev)
	if err != nil {
		return nil, fmt.Errorf("evaluate command: %w", err)
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("the command evaluated to an empty list")
	}
	env, err := c.Env.Eval(ev)
	if err != nil {
		return nil, fmt.Errorf("evaluate env: %w", err)
	}
	dir, err := c.Dir.Eval(ev)
	if err != nil {
		return nil, fmt.Errorf("evaluate dir: %w", err)
	}
	environ := make([]string, 0, len(env)+5)
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	environ = append(environ, ev.Environ()...) // last, so a job cannot fake them
	environ = append(environ, ev.RunEnviron()...)
	environ = append(environ, extra...)
	log := r.log.Named(kind)
	level := hclog.Info
	if kind == "health" {
		level = hclog.Debug // a check every few seconds: its output would drown the log
	}
	lim := r.outputLimit()
	s := &started{kind: kind, event: ev.Type,
		out:  &lineLogger{log: log, stream: "stdout", level: level, limit: lim},
		errw: &lineLogger{log: log, stream: "stderr", level: level, limit: lim}}
	if kind == "task" {
		// The last lines go to on_task_failed and on_task_succeeded.
		s.tail = &tail{}
		s.out.tail, s.errw.tail = s.tail, s.tail
	}
	var stdout, stderr io.Writer = s.out, s.errw
	if r.stdout != nil && r.stderr != nil {
		stdout, stderr = r.stdout, r.stderr
	}
	spec := proc.Spec{Argv: argv, Env: environ, Dir: dir, Stdout: stdout, Stderr: stderr, Shim: r.shim, Spares: r.spares, Name: r.job}
	if err := applyRunAs(r.as, &spec); err != nil {
		return nil, err
	}
	p, err := proc.Start(spec)
	r.noteStart(kind, err)
	if err != nil {
		return nil, err
	}
	s.Process = p
	r.mu.Lock()
	if r.procs == nil {
		r.procs = map[*proc.Process]struct{}{}
	}
	r.procs[p] = struct{}{}
	killed := r.killed
	r.mu.Unlock()
	if killed {
		p.Signal(syscall.SIGKILL)
	}
	log.Debug("started", "pid", p.Pid(), "command", argv[0], "token", ev.Token)
	return s, nil
}

// reap records the end of s: flushes its output, logs and counts the
// outcome, which it returns ("ok", "timeout", "stopped" or "failed"). Call
// once Done is closed.
func (r *runner) reap(s *started, timedOut bool) string {
	r.mu.Lock()
	delete(r.procs, s.Process)
	r.mu.Unlock()
	s.out.flush()
	s.errw.flush()
	s.out.limit.summary(r.log.Named(s.kind))
	code := s.ExitCode()
	result := "ok"
	switch {
	case timedOut:
		result = "timeout"
	case s.Signaled():
		result = "stopped" // the agent stopped it: a step-down, not a failure
	case code != 0:
		result = "failed"
	}
	log := r.log.Named(s.kind)
	// Under RunOnce the exit code is the caller's to report (electd lock
	// exits with it): a failure is not news to log as a warning.
	switch {
	case s.kind == "health":
		// The job logs what a check's result means (health.go).
		log.Debug("exited", "pid", s.Pid(), "exit_code", code, "result", result)
	case result == "ok" || result == "stopped" || r.stdout != nil:
		log.Info("exited", "pid", s.Pid(), "exit_code", code, "result", result)
	default:
		log.Warn("exited", "pid", s.Pid(), "exit_code", code, "result", result)
	}
	r.count(s.event, s.kind, result)
	return result
}

func (r *runner) count(event, kind, result string) {
	if r.metrics != nil {
		r.metrics.ActionRuns.WithLabelValues(r.job, event, kind, result).Inc()
	}
}

// exec runs an exec hook to completion, or kills its group at its timeout.
func (r *runner) exec(ev config.Event, e *config.Exec) {
	s, err := r.start("exec", e.Command, ev)
	if err != nil {
		r.log.Error("exec hook not started", "event", ev.Type, "error", err)
		r.count(ev.Type, "exec", "failed")
		return
	}
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = config.DefaultExecTimeout
	}
	timedOut := false
	select {
	case <-s.Done():
	case <-time.After(timeout):
		timedOut = true
		r.log.Warn("exec hook timed out: killing its process group", "event", ev.Type, "timeout", timeout)
		s.Kill()
	}
	r.reap(s, timedOut)
}

// killAll SIGKILLs every running command, and every command that starts
// after (the agent's second signal).
func (r *runner) killAll() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.killed = true
	ps := make([]*proc.Process, 0, len(r.procs))
	for p := range r.procs {
		ps = append(ps, p)
	}
	r.mu.Unlock()
	for _, p := range ps {
		p.Signal(syscall.SIGKILL)
	}
}

// lineLogger logs each line a command writes, under the job's logger.
type lineLogger struct {
	log    hclog.Logger
	stream string
	level  hclog.Level
	tail   *tail        // also keeps the last lines, when set
	limit  *outputLimit // the job's bucket; nil: no limit
	mu     sync.Mutex
	buf    bytes.Buffer
}

const maxLine = 16 << 10

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		i := bytes.IndexByte(l.buf.Bytes(), '\n')
		if i < 0 {
			if l.buf.Len() > maxLine {
				l.emit(l.buf.Next(maxLine))
				continue
			}
			return len(p), nil
		}
		line := l.buf.Next(i + 1)
		l.emit(line[:i])
	}
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf.Len() > 0 {
		l.emit(l.buf.Bytes())
		l.buf.Reset()
	}
}

func (l *lineLogger) emit(line []byte) {
	s := strings.TrimRight(string(line), "\r")
	l.tail.add(s) // the task hooks' tail is kept whole: it is small
	// Lines below the log's level cost nothing and take no tokens (a
	// health check's output at Debug).
	if l.log.GetLevel() <= l.level && l.limit.allow(l.log) {
		l.log.Log(l.level, s, "stream", l.stream)
	}
}

// tail keeps the last lines a command wrote, both streams interleaved, for
// the task hooks: enough to say why a run failed, never the whole output.
type tail struct {
	mu    sync.Mutex
	lines []string
}

const (
	tailLines    = 20
	tailLineMax  = 512 // bytes of one line kept
	tailMaxBytes = 4 << 10
)

func (t *tail) add(line string) {
	if t == nil {
		return
	}
	if len(line) > tailLineMax {
		line = line[:tailLineMax] + "..."
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > tailLines {
		t.lines = t.lines[len(t.lines)-tailLines:]
	}
}

// String is the lines kept, newline-separated, within tailMaxBytes.
func (t *tail) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.Join(t.lines, "\n")
	if len(s) > tailMaxBytes {
		s = s[len(s)-tailMaxBytes:]
	}
	return s
}

// applyRunAs sets who spec's command runs as. A user that was never looked
// up (a configuration checked with -no-env) runs nothing: its ids are not
// known, and zero would be root's.
func applyRunAs(as *config.RunAs, spec *proc.Spec) error {
	if as == nil {
		return nil
	}
	if !as.Resolved {
		return fmt.Errorf("%w: the job's user and group were not looked up", proc.ErrCannotStart)
	}
	if as.Switches() {
		spec.User = &syscall.Credential{Uid: as.Uid, Gid: as.Gid, Groups: as.Groups}
	}
	spec.Umask = as.Umask
	return nil
}
