package config

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/electd/electd/providers"
)

// This file is the runtime layer: plain values the agent runs from. The agent
// never sees HCL types; expressions that depend on `event` are wrapped in the
// small evaluator types of eval.go.

// Config is one merged configuration (all files and directories given).
type Config struct {
	Agent     Agent
	Providers []Provider // in declaration order
	Jobs      []Job      // in declaration order
	// Secrets are the values of every secret attribute and the secret parts
	// inside values (a DSN's password, a webhook URL's query), so that they
	// can be removed from whatever the agent prints (package
	// internal/redact). docs/configuration.md#secrets lists them.
	Secrets []string
}

// Provider returns the provider with the given reference ("sql.main").
func (c *Config) Provider(ref string) (Provider, bool) {
	for _, p := range c.Providers {
		if p.Ref() == ref {
			return p, true
		}
	}
	return Provider{}, false
}

// ByName returns the job with the given name.
func (c *Config) ByName(name string) (Job, bool) {
	for _, j := range c.Jobs {
		if j.Name == name {
			return j, true
		}
	}
	return Job{}, false
}

// Agent is the `agent` block.
type Agent struct {
	NodeID          string // never empty after Load: defaulted to <hostname>-<pid>-<4 hex>
	Listen          string // "" turns the API off
	APIToken        string // secret
	LogLevel        string // trace|debug|info|warn|error
	LogFormat       string // text|json
	ShutdownTimeout time.Duration
	// Tags are this node's labels for placement (constraint, prefer);
	// "node" is always the node_id.
	Tags map[string]string
	// Balance spreads the jobs of each provider over the live agents
	// (default true); false keeps leadership where it first landed.
	Balance bool
}

// Provider is a `provider "TYPE" "NAME"` block. Settings are typed by the
// store's package, which decoded and validated them.
type Provider struct {
	Type     string
	Name     string
	Settings providers.Settings

	values attrValues // hashed, for ChangedSettings
}

// Ref is how jobs name the provider: "TYPE.NAME".
func (p Provider) Ref() string { return p.Type + "." + p.Name }

// Modes of a job.
const (
	ModeLeader = "leader" // hold the lease while alive
	ModeLock   = "lock"   // take the lease per task run, then release
)

// Restart policies of a run block.
const (
	RestartAlways    = "always"
	RestartOnFailure = "on-failure"
	RestartNever     = "never"
)

// Default timings.
const (
	DefaultTTL             = 15 * time.Second
	DefaultRenewEvery      = 4 * time.Second
	DefaultRetryEvery      = 2 * time.Second
	DefaultStopTimeout     = 5 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultExecTimeout     = 60 * time.Second
	DefaultWebhookTimeout  = 10 * time.Second
	DefaultWebhookAttempts = 5
	DefaultMaxFailures     = 5
	DefaultFailureWindow   = time.Minute
	DefaultHoldOff         = time.Minute
)

// Job is a `job "NAME"` block, or one instance of a block with for_each.
type Job struct {
	Name string
	// Block is the label of the job block; Key is the instance's for_each
	// key ("" without for_each): Name is Block + "." + Key.
	Block, Key string
	Provider   string // reference, "TYPE.NAME"; resolved even when omitted in the file
	Mode       string // ModeLeader | ModeLock
	TTL        time.Duration
	RenewEvery time.Duration
	RetryEvery time.Duration

	Run  *Run  // at most one of Run and Task
	Task *Task //

	OnElected      []Action
	OnDemoted      []Action
	OnLeaderChange []Action
	// On a task's result, on the node that ran it (jobs with a task).
	OnTaskFailed    []Action // failed, timed_out, killed, skipped
	OnTaskSucceeded []Action

	// Placement: only nodes whose tags match every pair of Constraint may
	// lead; nodes matching Prefer lead when one is alive, healthy and has
	// been so for PreferSettle.
	Constraint   map[string]string
	Prefer       map[string]string
	PreferSettle time.Duration
	// Health is the leader's fitness check (nil: always fit).
	Health *Health
	// RunAs is who the job's commands run as: run, task, health command and
	// exec hooks alike. nil: the agent's user and umask.
	RunAs *RunAs

	// Fingerprint changes when anything that affects how the job runs
	// changes (its block, its provider's settings, the env values it
	// read). Reload keeps a job whose fingerprint is the same.
	Fingerprint string

	values attrValues // hashed, for ChangedAttributes
}

// StopTimeout is the stop_timeout of the job's run or task, 0 without either:
// the number the timing safety rule reserves for stopping work.
func (j Job) StopTimeout() time.Duration {
	switch {
	case j.Run != nil:
		return j.Run.StopTimeout
	case j.Task != nil:
		return j.Task.StopTimeout
	}
	return 0
}

// Command is what a run, task or exec hook starts: an argv list and its
// surroundings, evaluated with `event` when it fires.
type Command struct {
	Argv StringList // never empty once evaluated
	Env  StringMap  // added to the agent's environment and the ELECTD_* variables
	Dir  String     // "" = the agent's working directory
}

// Run is a `run` block: a command supervised while leader.
type Run struct {
	Command
	StopSignal  syscall.Signal // default SIGTERM
	StopTimeout time.Duration  // default 5s; then SIGKILL to the process group
	Restart     string         // RestartAlways | RestartOnFailure (default) | RestartNever
	RestartWait time.Duration  // pause between restarts; default 1s
	// A node that cannot do the work gives the job away: when the command
	// cannot start, or fails MaxFailures times in a row within
	// FailureWindow, the leader steps down and stays out of the election
	// for HoldOff, so that another node runs the job.
	MaxFailures   int           // default 5
	FailureWindow time.Duration // default 1m
	HoldOff       time.Duration // default 1m
}

// Health is a job's `health` block: a command (exit 0) or an HTTP GET (2xx)
// run every Interval on every node, leader or not. Failures in a row make a
// leader step down and a candidate stop competing; Successes in a row make
// it compete again.
type Health struct {
	Command   *Command // nil when HTTP is set
	HTTP      string
	Interval  time.Duration
	Timeout   time.Duration
	Failures  int
	Successes int
}

// Task is a `task` block: a command run on schedule by the leader only.
type Task struct {
	Command
	ScheduleText string        // as written: "30 2 * * *", "@every 1m"
	Schedule     cron.Schedule // parsed
	Timeout      time.Duration // 0 = none; then StopSignal, SIGKILL after StopTimeout
	StopSignal   syscall.Signal
	StopTimeout  time.Duration
	// RandomDelay spreads the runs of one schedule: a slot's run starts up
	// to RandomDelay after the slot (the same delay on every node, so the
	// slot keeps its name and is still run at most once). 0 = none.
	RandomDelay time.Duration
}

// Action kinds.
const (
	ActionExec    = "exec"
	ActionWebhook = "webhook"
)

// Action is one `exec` or `webhook` block inside a hook block; exactly one of
// Exec and Webhook is set, as Kind says.
type Action struct {
	Kind    string
	Exec    *Exec
	Webhook *Webhook
}

// Exec is an `exec` hook: a command that runs to completion (or Timeout).
type Exec struct {
	Command
	Timeout time.Duration // default 60s; then SIGKILL to the process group
}

// Webhook is a `webhook` hook.
type Webhook struct {
	URL         String
	Body        String    // optional: when unset, the default JSON payload
	Headers     StringMap // header values are secret
	Secret      string    // secret: signs the body with HMAC-SHA256
	Timeout     time.Duration
	MaxAttempts int
	CAFile      string
}

// Event types.
const (
	EventElected      = "elected"
	EventDemoted      = "demoted"
	EventLeaderChange = "leader_change"
	// A task run ended (on the node that ran it): on_task_failed and
	// on_task_succeeded.
	EventTaskFailed    = "task_failed"
	EventTaskSucceeded = "task_succeeded"
)

// Event is the object in scope as `event` when an action fires.
type Event struct {
	Type           string
	Job            string
	Node           string
	Leader         string
	PreviousLeader string
	Token          uint64
	Time           time.Time
	// Reason says why a term ended (on_demoted: lost, released, unhealthy,
	// preempted, balanced, drained, ...) or began (elected); the agent
	// package lists them.
	Reason string
	// Run is the task run a task_failed or task_succeeded event is about;
	// nil for leadership events.
	Run *TaskRunEvent
}

// TaskRunEvent is a task run's outcome, as on_task_failed and
// on_task_succeeded see it.
type TaskRunEvent struct {
	Slot      time.Time
	StartedAt time.Time // zero when the command did not start
	EndedAt   time.Time
	ExitCode  int // -1 when the command did not start
	Result    string
	Why       string
	Trigger   uint64 // the trigger request it ran for; 0: on schedule
	// Output is the last lines the run wrote (stdout and stderr
	// interleaved), with the configuration's secrets masked.
	Output string
}

// Fields are the run's fields as strings, as `event.NAME` and the default
// webhook payload show them (times in RFC 3339, "" when unset).
func (r *TaskRunEvent) Fields() map[string]string {
	f := map[string]string{"slot": "", "started_at": "", "ended_at": "", "exit_code": "", "result": "", "why": "", "trigger": "", "output": ""}
	if r == nil {
		return f
	}
	ts := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	f["slot"], f["started_at"], f["ended_at"] = ts(r.Slot), ts(r.StartedAt), ts(r.EndedAt)
	f["exit_code"], f["result"], f["why"], f["output"] = strconv.Itoa(r.ExitCode), r.Result, r.Why, r.Output
	if r.Trigger != 0 {
		f["trigger"] = strconv.FormatUint(r.Trigger, 10)
	}
	return f
}

// TokenString is the fencing token as commands and webhooks see it.
func (e Event) TokenString() string { return strconv.FormatUint(e.Token, 10) }

// Environ is the ELECTD_* environment every command gets, as KEY=VALUE.
func (e Event) Environ() []string {
	return []string{
		"ELECTD_EVENT=" + e.Type,
		"ELECTD_JOB=" + e.Job,
		"ELECTD_NODE=" + e.Node,
		"ELECTD_LEADER=" + e.Leader,
		"ELECTD_TOKEN=" + e.TokenString(),
		"ELECTD_REASON=" + e.Reason,
	}
}

// RunEnviron is the ELECTD_* environment of a task run's hook (nil for a
// leadership event): ELECTD_SLOT, ELECTD_RESULT, ELECTD_EXIT_CODE, ...
func (e Event) RunEnviron() []string {
	if e.Run == nil {
		return nil
	}
	var out []string
	f := e.Run.Fields()
	for _, k := range taskRunFields {
		out = append(out, "ELECTD_"+strings.ToUpper(k)+"="+f[k])
	}
	return out
}

// taskRunFields are the names of a task run's fields in `event`, in order.
var taskRunFields = []string{"slot", "started_at", "ended_at", "exit_code", "result", "why", "trigger", "output"}

func (e Event) String() string {
	return fmt.Sprintf("%s job=%s node=%s leader=%s token=%d", e.Type, e.Job, e.Node, e.Leader, e.Token)
}
