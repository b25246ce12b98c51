package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/electd/electd/internal/timing"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/robfig/cron/v3"
	"github.com/zclconf/go-cty/cty"

	"github.com/electd/electd/internal/attr"
)

// DefaultRestartWait is the pause between restarts of a run command.
const DefaultRestartWait = time.Second

// Hook blocks; each may appear at most once per job (its exec and webhook
// blocks already give order and multiplicity; a second block of the same
// kind is more likely a mistake than a wish).
const (
	hookElected       = "on_elected"
	hookDemoted       = "on_demoted"
	hookLeaderChange  = "on_leader_change"
	hookTaskFailed    = "on_task_failed"
	hookTaskSucceeded = "on_task_succeeded"
)

var jobSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: forEachAttr},
		{Name: "provider"},
		{Name: "mode"},
		{Name: "ttl"},
		{Name: "renew_every"},
		{Name: "retry_every"},
		{Name: "constraint"},
		{Name: "prefer"},
		{Name: "prefer_settle"},
		{Name: "user"},
		{Name: "group"},
		{Name: "umask"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "health"},
		{Type: "run"},
		{Type: "task"},
		{Type: hookElected},
		{Type: hookDemoted},
		{Type: hookLeaderChange},
		{Type: hookTaskFailed},
		{Type: hookTaskSucceeded},
	},
}

var runSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "command", Required: true},
		{Name: "env"},
		{Name: "dir"},
		{Name: "stop_signal"},
		{Name: "stop_timeout"},
		{Name: "restart"},
		{Name: "restart_wait"},
		{Name: "max_failures"},
		{Name: "failure_window"},
		{Name: "hold_off"},
	},
}

var healthSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "command"},
		{Name: "http"},
		{Name: "env"},
		{Name: "dir"},
		{Name: "interval"},
		{Name: "timeout"},
		{Name: "failures"},
		{Name: "successes"},
	},
}

// Health check defaults.
const (
	DefaultHealthInterval  = 10 * time.Second
	DefaultHealthTimeout   = 2 * time.Second
	DefaultHealthFailures  = 3
	DefaultHealthSuccesses = 2
	DefaultPreferSettle    = 5 * time.Second
)

var taskSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "schedule", Required: true},
		{Name: "command", Required: true},
		{Name: "env"},
		{Name: "dir"},
		{Name: "timeout"},
		{Name: "stop_signal"},
		{Name: "stop_timeout"},
		{Name: "random_delay"},
	},
}

var hookSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: ActionExec}, {Type: ActionWebhook}},
}

var execSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "command", Required: true},
		{Name: "env"},
		{Name: "dir"},
		{Name: "timeout"},
	},
}

var webhookSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "url", Required: true},
		{Name: "body"},
		{Name: "headers"},
		{Name: "secret"},
		{Name: "timeout"},
		{Name: "max_attempts"},
		{Name: "ca_file"},
	},
}

var jobNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// jobDecl is a decoded job block with what resolution, diagnostics and the
// fingerprint need.
type jobDecl struct {
	Job
	DeclRange    hcl.Range
	providerExpr hcl.Expression // nil when omitted
	providerRef  string         // "TYPE.NAME" as written; "" when omitted or invalid
	provider     *providerDecl  // resolved; nil when it could not be
	nameRange    hcl.Range      // the label
	src          []byte
	reads        reads
	ttlRange     hcl.Range // the ttl attribute, or the block header when omitted
	ttlOK        bool      // ttl was given validly or defaulted
	block        *hcl.Block
	inst         *instance
}

func (l *loader) decodeJobs(blocks []*hcl.Block) ([]*jobDecl, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	var out []*jobDecl
	seen := map[string]*jobDecl{}
	for _, b := range blocks {
		label := b.Labels[0]
		if !jobNameRe.MatchString(label) {
			diags = append(diags, errorf(b.LabelRanges[0], "Invalid job name",
				"A job name must start with a letter or digit and hold only letters, digits, \"_\", \".\" and \"-\"; it is the lease key in every store."))
		}
		insts, d := l.expandJob(b)
		diags = append(diags, d...)
		per := make([]hcl.Diagnostics, len(insts))
		var dups []string
		var dupOf *jobDecl
		for i, in := range insts {
			l.inst = in
			j, d := l.decodeJobBlock(b, in)
			l.inst = nil
			per[i] = d
			if prev, ok := seen[j.Name]; ok && !in.unknown {
				dups = append(dups, strconv.Quote(j.Name))
				dupOf = prev
				continue
			}
			seen[j.Name] = j
			out = append(out, j)
		}
		diags = append(diags, mergeInstanceDiags(insts, per)...)
		switch {
		case len(dups) == 0:
		case len(insts) == 1 && insts[0].key == "":
			diags = append(diags, errorf(b.LabelRanges[0], "Duplicate job",
				"A job named %q was already declared at %s. Job names must be unique across all files: they are the lease keys.", label, dupOf.DeclRange))
		default:
			diags = append(diags, errorf(b.LabelRanges[0], "Duplicate job",
				"The for_each of this block names the job %s, already declared at %s. Job names, instances' included, must be unique across all files: they are the lease keys. An instance of job %q is named %s%sKEY.",
				listSome(dups, 3), dupOf.DeclRange, label, label, InstanceSeparator))
		}
	}
	return out, diags
}

// decodeJobBlock decodes one instance of a job block: the block itself
// without for_each.
func (l *loader) decodeJobBlock(block *hcl.Block, in *instance) (*jobDecl, hcl.Diagnostics) {
	l.startReads()
	defer l.endReads()
	content, diags := block.Body.Content(jobSchema)
	j := &jobDecl{DeclRange: block.DefRange, nameRange: block.LabelRanges[0], block: block, inst: in}
	j.Name, j.Block, j.Key = in.name, block.Labels[0], in.key
	b := l.attrs(content.Attributes, block, &diags)

	if a, ok := content.Attributes["provider"]; ok {
		j.providerExpr = a.Expr
		tr, d := hcl.AbsTraversalForExpr(a.Expr)
		if d.HasErrors() || len(tr) != 2 {
			diags = append(diags, errorf(a.Expr.Range(), "Invalid provider reference",
				"The provider must be a reference TYPE.NAME without quotes, such as sql.main."))
		} else if attr, ok := tr[1].(hcl.TraverseAttr); ok {
			j.providerRef = tr.RootName() + "." + attr.Name
		} else {
			diags = append(diags, errorf(a.Expr.Range(), "Invalid provider reference",
				"The provider must be a reference TYPE.NAME without quotes, such as sql.main."))
		}
	}
	j.Mode = b.enum("mode", ModeLeader, ModeLeader, ModeLock)
	ttl, ttlOK := b.duration("ttl", DefaultTTL)
	renew, renewOK := b.duration("renew_every", DefaultRenewEvery)
	retry, retryOK := b.duration("retry_every", DefaultRetryEvery)
	j.TTL, j.RenewEvery, j.RetryEvery = ttl, renew, retry
	j.ttlRange = b.rangeOf("ttl", block.DefRange)
	if ttlOK && ttl < MinTTL {
		diags = append(diags, errorf(b.rangeOf("ttl", block.DefRange), "Invalid ttl",
			"The ttl (%s) must be at least %s: a shorter term leaves no time for renewals, and one slow answer from the store would end it.", ttl, MinTTL))
		ttlOK = false
	}
	if renewOK && renew == 0 {
		diags = append(diags, errorf(b.rangeOf("renew_every", block.DefRange), "Invalid renew_every", "The renew_every must be longer than zero."))
		renewOK = false
	}
	if retryOK && retry == 0 {
		diags = append(diags, errorf(b.rangeOf("retry_every", block.DefRange), "Invalid retry_every",
			"The retry_every must be longer than zero: it is the pause between attempts to take the lease."))
	}

	j.Constraint = b.tags("constraint")
	j.Prefer = b.tags("prefer")
	var settleOK bool
	if j.PreferSettle, settleOK = b.duration("prefer_settle", DefaultPreferSettle); settleOK && b.has("prefer_settle") && !b.has("prefer") {
		diags = append(diags, errorf(b.rangeOf("prefer_settle", block.DefRange), "prefer_settle without prefer",
			"The prefer_settle is how long a preferred node must have been fit before it takes the job over; it needs a prefer map."))
	}

	j.RunAs = l.decodeRunAs(b, block)

	hooks := map[string]*hcl.Block{}
	var runBlock, taskBlock, healthBlock *hcl.Block
	for _, sub := range content.Blocks {
		switch sub.Type {
		case "health":
			if healthBlock != nil {
				diags = append(diags, errorf(sub.DefRange, "Duplicate health block", "A job has at most one health block; the first is at %s.", healthBlock.DefRange))
				continue
			}
			healthBlock = sub
			h, d := l.decodeHealthBlock(sub)
			diags = append(diags, d...)
			j.Health = h
		case "run", "task":
			if prev := firstNonNil(runBlock, taskBlock); prev != nil {
				summary, detail := "Conflicting run and task", "A job has at most one of run and task; this job already has a %s block at %s."
				if prev.Type == sub.Type {
					summary, detail = "Duplicate "+sub.Type+" block", "A job has at most one %s block; the first is at %s."
				}
				diags = append(diags, errorf(sub.DefRange, summary, detail, prev.Type, prev.DefRange))
				continue
			}
			if sub.Type == "run" {
				runBlock = sub
				r, d := l.decodeRunBlock(sub)
				diags = append(diags, d...)
				j.Run = r
			} else {
				taskBlock = sub
				t, d := l.decodeTaskBlock(sub)
				diags = append(diags, d...)
				j.Task = t
			}
		default:
			if prev, ok := hooks[sub.Type]; ok {
				diags = append(diags, errorf(sub.DefRange, "Duplicate hook block",
					"This job already has an %s block at %s. Put all of its exec and webhook blocks in one %s block; they fire in the order written.", sub.Type, prev.DefRange, sub.Type))
				continue
			}
			hooks[sub.Type] = sub
			actions, d := l.decodeHookBlock(sub)
			diags = append(diags, d...)
			switch sub.Type {
			case hookElected:
				j.OnElected = actions
			case hookDemoted:
				j.OnDemoted = actions
			case hookLeaderChange:
				j.OnLeaderChange = actions
			case hookTaskFailed:
				j.OnTaskFailed = actions
			case hookTaskSucceeded:
				j.OnTaskSucceeded = actions
			}
		}
	}
	for _, t := range []string{hookTaskFailed, hookTaskSucceeded} {
		if hb := hooks[t]; hb != nil && j.Task == nil && taskBlock == nil {
			diags = append(diags, errorf(hb.DefRange, "Task hook without a task",
				"The %s block fires when a run of the job's task ends, and this job has no task block. Use on_elected or on_demoted for a job that supervises a run command.", t))
		}
	}
	if j.Mode == ModeLock && j.Task == nil {
		diags = append(diags, errorf(b.rangeOf("mode", block.DefRange), "Lock mode needs a task",
			"A job with mode = \"lock\" takes the lease for each run of a scheduled task and then releases it, so it needs a task block (and no run block)."))
	}

	j.ttlOK = ttlOK
	if ttlOK && renewOK {
		diags = append(diags, checkTiming(j.Job, b, block)...)
	}
	j.src = withoutForEach(l.blockSource(block), block)
	j.reads = l.rec.block
	j.values = l.jobValues(block)
	return j, diags
}

func firstNonNil(bs ...*hcl.Block) *hcl.Block {
	for _, b := range bs {
		if b != nil {
			return b
		}
	}
	return nil
}

// KillMargin and MinTTL are the timing rule's (internal/timing), named here
// for the packages that read a configuration.
const (
	KillMargin = timing.KillMargin
	MinTTL     = timing.MinTTL
)

// checkTiming applies the safety rule (docs/leases.md, internal/timing): the
// leader must get two renewal attempts, and then time to stop its work and
// for SIGKILL to take effect, before 99% of the ttl.
func checkTiming(j Job, b attrs, block *hcl.Block) hcl.Diagnostics {
	p := timing.CheckJob(j.TTL, j.RenewEvery, j.StopTimeout())
	switch {
	case p == nil:
		return nil
	case p.RenewNotShorter:
		return hcl.Diagnostics{errorf(b.rangeOf("renew_every", b.rangeOf("ttl", block.DefRange)), "Invalid renew_every",
			"The renew_every (%s) must be shorter than the ttl (%s): the lease would expire before it is renewed.", j.RenewEvery, j.TTL)}
	}
	detail := fmt.Sprintf("The leader must get at least two renewal attempts, and then stop its work, before 99%% of the ttl: renew_every×2 + stop_timeout + the 100ms kill margin (%s) must be less than ttl×0.99 (%s). Raise ttl to at least %s",
		p.Need, p.Budget, p.MinTTL)
	if p.MaxRenew > 0 {
		detail += fmt.Sprintf(", or lower renew_every to at most %s", p.MaxRenew)
	} else if j.StopTimeout() > 0 {
		detail += ", or lower stop_timeout"
	}
	detail += "."
	return hcl.Diagnostics{errorf(b.rangeOf("ttl", b.rangeOf("renew_every", block.DefRange)), "Unsafe lease timing", "%s", detail)}
}

// signals are the Unix signals stop_signal accepts, without "SIG".
var signals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "ILL": syscall.SIGILL,
	"TRAP": syscall.SIGTRAP, "ABRT": syscall.SIGABRT, "BUS": syscall.SIGBUS, "FPE": syscall.SIGFPE,
	"KILL": syscall.SIGKILL, "USR1": syscall.SIGUSR1, "SEGV": syscall.SIGSEGV, "USR2": syscall.SIGUSR2,
	"PIPE": syscall.SIGPIPE, "ALRM": syscall.SIGALRM, "TERM": syscall.SIGTERM, "CHLD": syscall.SIGCHLD,
	"CONT": syscall.SIGCONT, "STOP": syscall.SIGSTOP, "TSTP": syscall.SIGTSTP, "TTIN": syscall.SIGTTIN,
	"TTOU": syscall.SIGTTOU, "URG": syscall.SIGURG, "XCPU": syscall.SIGXCPU, "XFSZ": syscall.SIGXFSZ,
	"VTALRM": syscall.SIGVTALRM, "PROF": syscall.SIGPROF, "WINCH": syscall.SIGWINCH, "IO": syscall.SIGIO,
	"SYS": syscall.SIGSYS,
}

// ParseSignal accepts "SIGTERM", "TERM" or "sigterm".
func ParseSignal(name string) (syscall.Signal, bool) {
	n := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "SIG")
	s, ok := signals[n]
	return s, ok
}

func (b attrs) signal(name string) syscall.Signal {
	v, a := b.value(name, cty.String)
	if v.IsNull() || !v.IsKnown() {
		return syscall.SIGTERM
	}
	s, ok := ParseSignal(v.AsString())
	if !ok {
		var names []string
		for n := range signals {
			names = append(names, "SIG"+n)
		}
		sort.Strings(names)
		b.add(errorf(a.Expr.Range(), "Invalid stop signal",
			"The %s must name a Unix signal, such as \"SIGTERM\" or \"TERM\". Known signals: %s.", name, strings.Join(names, ", ")))
		return syscall.SIGTERM
	}
	return s
}

func (b attrs) commandBlock(block *hcl.Block) Command {
	dir, _, _ := b.eventString("dir")
	env, _ := b.eventMap("env")
	return Command{Argv: b.command(block), Env: env, Dir: dir}
}

func (l *loader) decodeRunBlock(block *hcl.Block) (*Run, hcl.Diagnostics) {
	content, diags := block.Body.Content(runSchema)
	b := l.attrs(content.Attributes, block, &diags)
	r := &Run{Command: b.commandBlock(block)}
	r.StopSignal = b.signal("stop_signal")
	r.StopTimeout, _ = b.duration("stop_timeout", DefaultStopTimeout)
	r.Restart = b.enum("restart", RestartOnFailure, RestartAlways, RestartOnFailure, RestartNever)
	r.RestartWait, _ = b.duration("restart_wait", DefaultRestartWait)
	r.MaxFailures, _ = b.integer("max_failures", DefaultMaxFailures)
	if r.MaxFailures < 1 {
		diags = append(diags, errorf(b.rangeOf("max_failures", block.DefRange), "Invalid max_failures",
			"The max_failures must be at least 1: it counts the failed runs in a row after which this node gives the job to another."))
		r.MaxFailures = DefaultMaxFailures
	}
	for _, d := range []struct {
		name string
		to   *time.Duration
		def  time.Duration
	}{{"failure_window", &r.FailureWindow, DefaultFailureWindow}, {"hold_off", &r.HoldOff, DefaultHoldOff}} {
		var ok bool
		if *d.to, ok = b.duration(d.name, d.def); ok && *d.to == 0 {
			diags = append(diags, errorf(b.rangeOf(d.name, block.DefRange), "Invalid "+d.name, "The %s must be longer than zero.", d.name))
			*d.to = d.def
		}
	}
	return r, diags
}

// cronParser takes 5-field expressions and descriptors (@hourly, @every 1m).
func cronParser() cron.Parser {
	return cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
}

// ParseSchedule parses a task schedule as `electd check` does: a 5-field
// cron expression or a descriptor, that fires at least once in the next
// five years and at most once a second. Its error is a whole sentence.
func ParseSchedule(text string) (cron.Schedule, error) {
	const forms = "The schedule must be a 5-field cron expression (minute hour day-of-month month day-of-week, such as \"30 2 * * *\") or a descriptor such as \"@hourly\" or \"@every 10m\""
	s, err := cronParser().Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %v.", forms, err)
	}
	if every, ok := everyDelay(text); ok {
		// cron rounds @every down to whole seconds, and anything under a
		// second up to one: what is written would not be what runs.
		if every < time.Second || every%time.Second != 0 {
			return nil, fmt.Errorf("The @every interval (%s) must be a whole number of seconds, at least 1s: a task runs at most once a second.", every)
		}
		return s, nil
	}
	// cron searches five years ahead and gives up with a zero time: a date
	// that does not exist, such as 30 February, never fires.
	if s.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("The schedule %q never fires: no date in the next five years matches it (a day that the month does not have, such as 30 February or 31 April?).", text)
	}
	return s, nil
}

// everyDelay is the interval of an "@every D" schedule as written.
func everyDelay(text string) (time.Duration, bool) {
	f := strings.Fields(text)
	if len(f) > 0 && (strings.HasPrefix(f[0], "CRON_TZ=") || strings.HasPrefix(f[0], "TZ=")) {
		f = f[1:]
	}
	if len(f) != 2 || f[0] != "@every" {
		return 0, false
	}
	d, err := time.ParseDuration(f[1])
	if err != nil {
		return 0, false
	}
	return d, true
}

func (l *loader) decodeHealthBlock(block *hcl.Block) (*Health, hcl.Diagnostics) {
	content, diags := block.Body.Content(healthSchema)
	b := l.attrs(content.Attributes, block, &diags)
	h := &Health{}
	switch {
	case b.has("command") && b.has("http"):
		diags = append(diags, errorf(b.rangeOf("http", block.DefRange), "Conflicting health checks",
			"A health block has either a command (exit 0 = healthy) or an http URL (2xx = healthy), not both."))
	case b.has("command"):
		c := b.commandBlock(block)
		h.Command = &c
	case b.has("http"):
		h.HTTP = b.line("http", "")
		if b.known("http") {
			u, err := url.Parse(h.HTTP)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				diags = append(diags, errorf(b.rangeOf("http", block.DefRange), "Invalid health URL",
					"The http check must be an absolute http:// or https:// URL, such as \"http://127.0.0.1:8080/healthz\"."))
			} else {
				l.secret(urlSecrets(u)...)
			}
		}
		for _, name := range []string{"env", "dir"} {
			if b.has(name) {
				diags = append(diags, errorf(b.rangeOf(name, block.DefRange), "Unexpected "+name,
					"The %s of a health block applies to its command; an http check has none.", name))
			}
		}
	default:
		diags = append(diags, errorf(block.DefRange, "Missing health check",
			"A health block needs a command (exit 0 = healthy), such as command = [\"/usr/local/bin/ready\"], or an http URL (2xx = healthy)."))
	}
	var ok bool
	if h.Interval, ok = b.duration("interval", DefaultHealthInterval); ok && h.Interval == 0 {
		diags = append(diags, errorf(b.rangeOf("interval", block.DefRange), "Invalid interval", "The interval must be longer than zero."))
		h.Interval = DefaultHealthInterval
	}
	if h.Timeout, ok = b.duration("timeout", DefaultHealthTimeout); ok {
		switch {
		case h.Timeout == 0:
			diags = append(diags, errorf(b.rangeOf("timeout", block.DefRange), "Invalid timeout", "The timeout must be longer than zero: a check that hangs counts as failed at its timeout."))
			h.Timeout = DefaultHealthTimeout
		case h.Timeout > h.Interval:
			diags = append(diags, errorf(b.rangeOf("timeout", block.DefRange), "Invalid timeout",
				"The timeout (%s) must not be longer than the interval (%s): checks run one at a time.", h.Timeout, h.Interval))
		}
	}
	for _, c := range []struct {
		name string
		to   *int
		def  int
		what string
	}{{"failures", &h.Failures, DefaultHealthFailures, "failed checks in a row after which a leader steps down"},
		{"successes", &h.Successes, DefaultHealthSuccesses, "passed checks in a row after which a node competes again"}} {
		*c.to, _ = b.integer(c.name, c.def)
		if *c.to < 1 {
			diags = append(diags, errorf(b.rangeOf(c.name, block.DefRange), "Invalid "+c.name, "The %s must be at least 1: it counts the %s.", c.name, c.what))
			*c.to = c.def
		}
	}
	return h, diags
}

func (l *loader) decodeTaskBlock(block *hcl.Block) (*Task, hcl.Diagnostics) {
	content, diags := block.Body.Content(taskSchema)
	b := l.attrs(content.Attributes, block, &diags)
	t := &Task{Command: b.commandBlock(block)}
	if v, a := b.value("schedule", cty.String); v.IsKnown() && !v.IsNull() {
		t.ScheduleText = v.AsString()
		s, err := ParseSchedule(t.ScheduleText)
		if err != nil {
			// The message quotes the expression; that is the schedule, not a secret.
			b.add(errorf(a.Expr.Range(), "Invalid schedule", "%s", err))
		} else {
			t.Schedule = s
		}
	}
	t.Timeout, _ = b.duration("timeout", 0)
	t.StopSignal = b.signal("stop_signal")
	t.StopTimeout, _ = b.duration("stop_timeout", DefaultStopTimeout)
	var delayOK bool
	if t.RandomDelay, delayOK = b.duration("random_delay", 0); delayOK && t.RandomDelay > 0 {
		// Slots are told apart by their scheduled time: a delay as long as
		// the interval would run a slot after the next one is due.
		if every, ok := t.Schedule.(cron.ConstantDelaySchedule); ok && t.RandomDelay >= every.Delay {
			diags = append(diags, errorf(b.rangeOf("random_delay", block.DefRange), "Invalid random_delay",
				"The random_delay (%s) must be shorter than the schedule's interval (%s): a run starts up to random_delay after its slot, and must start before the next slot is due.", t.RandomDelay, every.Delay))
			t.RandomDelay = 0
		}
	}
	return t, diags
}

func (l *loader) decodeHookBlock(block *hcl.Block) ([]Action, hcl.Diagnostics) {
	content, diags := block.Body.Content(hookSchema)
	var out []Action
	for _, sub := range content.Blocks {
		switch sub.Type {
		case ActionExec:
			e, d := l.decodeExecBlock(sub)
			diags = append(diags, d...)
			out = append(out, Action{Kind: ActionExec, Exec: e})
		case ActionWebhook:
			w, d := l.decodeWebhookBlock(sub)
			diags = append(diags, d...)
			out = append(out, Action{Kind: ActionWebhook, Webhook: w})
		}
	}
	return out, diags
}

func (l *loader) decodeExecBlock(block *hcl.Block) (*Exec, hcl.Diagnostics) {
	content, diags := block.Body.Content(execSchema)
	b := l.attrs(content.Attributes, block, &diags)
	e := &Exec{Command: b.commandBlock(block)}
	e.Timeout, _ = b.duration("timeout", DefaultExecTimeout)
	return e, diags
}

func (l *loader) decodeWebhookBlock(block *hcl.Block) (*Webhook, hcl.Diagnostics) {
	content, diags := block.Body.Content(webhookSchema)
	b := l.attrs(content.Attributes, block, &diags)
	w := &Webhook{}
	var u cty.Value
	var ua *hcl.Attribute
	w.URL, u, ua = b.eventString("url")
	if ua != nil && u.IsKnown() && !u.IsNull() {
		// The URL is not repeated in the detail: it may carry a token.
		pu, err := url.Parse(u.AsString())
		line := attr.NotOneLine("url", u.AsString())
		switch {
		case line != "":
			diags = append(diags, errorf(ua.Expr.Range(), "Invalid url", "%s", line))
		case err != nil:
			diags = append(diags, errorf(ua.Expr.Range(), "Invalid webhook URL", "The url is not a valid URL."))
		case pu.Scheme != "http" && pu.Scheme != "https":
			diags = append(diags, errorf(ua.Expr.Range(), "Invalid webhook URL", "The url must use http or https."))
		case pu.Host == "":
			diags = append(diags, errorf(ua.Expr.Range(), "Invalid webhook URL", "The url has no host."))
		}
		if err == nil {
			l.secret(urlSecrets(pu)...)
		}
	}
	w.Body, _, _ = b.eventString("body")
	var headers cty.Value
	w.Headers, headers = b.eventMap("headers")
	// Header values carry credentials (Authorization, X-Api-Key); those
	// known now are secrets. One that depends on the event is not known
	// until it fires: the webhook package never logs header values.
	if headers.IsKnown() && !headers.IsNull() {
		for it := headers.ElementIterator(); it.Next(); {
			if _, v := it.Element(); v.IsKnown() && !v.IsNull() {
				l.secret(v.AsString())
			}
		}
	}
	w.Secret = b.line("secret", "")
	l.secret(w.Secret)
	w.Timeout, _ = b.duration("timeout", DefaultWebhookTimeout)
	if n, set := b.integer("max_attempts", DefaultWebhookAttempts); set || n != DefaultWebhookAttempts {
		if n < 1 {
			diags = append(diags, errorf(b.rangeOf("max_attempts", block.DefRange), "Invalid max_attempts",
				"The max_attempts must be at least 1: it counts the first delivery."))
			n = DefaultWebhookAttempts
		}
		w.MaxAttempts = n
	} else {
		w.MaxAttempts = DefaultWebhookAttempts
	}
	w.CAFile = b.str("ca_file", "")
	return w, diags
}

// urlSecrets are the parts of a webhook URL that may be credentials: the
// userinfo and its password, the path (Slack-style URLs carry a token in
// it), as written and decoded, and the query. Only the scheme and host are
// not secret. The query's values are not taken one by one: "json" in
// ?format=json would mask an ordinary word everywhere.
func urlSecrets(u *url.URL) []string {
	var out []string
	if u.User != nil {
		out = append(out, u.User.String())
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw)
		}
	}
	return append(out, u.EscapedPath(), u.Path, u.RawQuery)
}

// resolveProviders sets each job's provider reference, checks it names a
// declared provider, and computes the fingerprints. declared is the number
// of provider blocks in the files (0 means the embedded default is used).
func resolveProviders(jobs []*jobDecl, provs []*providerDecl, declared int) hcl.Diagnostics {
	var diags hcl.Diagnostics
	byRef := map[string]*providerDecl{}
	var refs []string
	for _, p := range provs {
		byRef[p.Ref()] = p
		refs = append(refs, p.Ref())
	}
	for _, j := range jobs {
		var p *providerDecl
		switch {
		case j.providerExpr == nil && len(provs) == 1:
			p = provs[0]
		case len(provs) == 0:
			// Every provider block was refused, and said why.
		case j.providerExpr == nil:
			diags = append(diags, errorf(j.DeclRange, "Missing provider",
				"This configuration declares %d providers (%s), so the job must say which one it uses, such as provider = %s.", len(provs), strings.Join(refs, ", "), refs[0]))
		case j.providerRef != "":
			var ok bool
			if p, ok = byRef[j.providerRef]; !ok {
				detail := fmt.Sprintf("No provider %s is declared. The declared providers are %s.", j.providerRef, strings.Join(refs, ", "))
				if declared == 0 {
					detail = fmt.Sprintf("No provider %s is declared. Without provider blocks the only provider is the embedded default, sql.default.", j.providerRef)
				}
				diags = append(diags, errorf(j.providerExpr.Range(), "Reference to undeclared provider", "%s", detail))
			}
		}
		if p == nil {
			continue
		}
		j.Provider = p.Ref()
		j.provider = p
		j.Fingerprint = fingerprint(j, p)
	}
	return diags
}

// fingerprint is a sha256 over the job block's source text (without its
// for_each), its provider block's source text, the env() and file() values
// both read (sorted by name), and the hashed values of both blocks'
// attributes, which take in the variables, locals and each.value they use.
// Anything that can change how the job runs changes one of those; comments
// and formatting count too, which only costs an unneeded handover.
func fingerprint(j *jobDecl, p *providerDecl) string {
	h := sha256.New()
	write := func(b []byte) {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	write(j.src)
	write(p.src)
	for _, r := range []reads{j.reads, p.reads} {
		var keys []string
		for k := range r {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			write([]byte(k))
			write([]byte(r[k]))
		}
		write(nil)
	}
	for _, vs := range []attrValues{j.values, p.values} {
		for _, v := range vs {
			write([]byte(v.path))
			fmt.Fprintf(h, "%d;", v.sum)
		}
		write(nil)
	}
	return hex.EncodeToString(h.Sum(nil))
}
