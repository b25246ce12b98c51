package main

import (
	"io"
	"time"

	"github.com/electd/electd/config"
)

// commands is electd's command line: every command with its usage, what it
// does and its flags, in the order `electd -h` lists them. `electd -h`,
// each command's -h, the man page and the bash and zsh completions are all
// written from this table, and each command parses its arguments through
// it (newCommand), so none of them can drift from another. A flag is one
// line; its handler reads it with c.boolFlag("name") and its siblings.
//
// It is a function rather than a variable because the entry points it
// names look their own entry up in it.
func commands() []cmdSpec {
	return []cmdSpec{
		{name: "run", run: cmdRun, operands: "[PATH...]", max: anyNumber, complete: completePaths,
			summary: "run the agent (one election loop per job)",
			about:   "Run the agent on the configuration at each PATH and -config: one election loop per job until SIGTERM or SIGINT; SIGHUP reloads the configuration.",
			flags: []flagSpec{
				{"config", pathsFlag, nil, "read the configuration from `PATH`, a file or a directory of *.hcl files (repeatable; default /etc/electd)"},
				{"allow-unsafe-config", boolFlag, false, "run a configuration that is world-writable or owned by another user"},
				varFlag, varFileFlag,
				{"pprof", stringFlag, "", "serve Go's runtime profiles (/debug/pprof/) on `ADDR`, a loopback address such as 127.0.0.1:6060; off by default"},
			}},
		{name: "check", run: cmdCheck, operands: "[PATH...]", max: anyNumber, complete: completePaths,
			summary: "parse and validate configuration files",
			about:   "Parse and validate the configuration at each PATH and -config, print every problem with its source line, and exit 1 on errors (warnings pass).",
			flags: []flagSpec{
				{"config", pathsFlag, nil, "read the configuration from `PATH`, a file or a directory of *.hcl files (repeatable; default /etc/electd)"},
				{"json", boolFlag, false, "print the result as JSON on stdout, in the shape of terraform validate -json"},
				{"no-env", boolFlag, false, "validate without the environment (for CI): env(NAME) without a default is an unknown string, env(NAME, DEFAULT) is DEFAULT, ELECTD_VAR_* is not read, and a variable without a value is unknown"},
				{"allow-unsafe-config", boolFlag, false, "accept configuration files that are world-writable or owned by another user, as run -allow-unsafe-config does"},
				varFlag, varFileFlag,
			}},
		{name: "fmt", run: cmdFmt, operands: "[PATH...]", max: anyNumber, complete: completePaths,
			summary: "rewrite configuration files in canonical format",
			about:   "Rewrite the *.hcl and *.electdvars files at each PATH (a file or a directory; default the current directory; \"-\" reads stdin and writes stdout) in canonical format, and list the files it changed.",
			flags: []flagSpec{
				{"check", boolFlag, false, "write nothing; list the files that are not formatted and exit 1 if any"},
				{"diff", boolFlag, false, "print the changes as a unified diff"},
				{"write", boolFlag, true, "write the result back to the file (-write=false only lists the files)"},
			}},
		{name: "plan", run: cmdPlan, operands: "[PATH...]", max: anyNumber, complete: completePaths,
			summary: "show what a reload would do to a running agent, before doing it",
			about: "Show what a reload of the configuration at each PATH and -config would do to a running agent, changing nothing: " +
				"+ jobs added, - jobs removed, ~ jobs restarted with the attributes that changed, and how many are kept with their leadership, token and child. " +
				"Without a PATH the agent plans the files it runs. " +
				"Exit status: 0 when nothing would change, 2 when something would, 1 on any error (bad usage included).",
			flags: []flagSpec{
				{"config", pathsFlag, nil, "plan the configuration at `PATH`, a file or a directory of *.hcl files on the agent's machine (repeatable; default: the agent's own)"},
				addrFlag, tokenFlag,
				{"json", boolFlag, false, "print the plan as JSON, as POST /v1/plan returns it"},
				varFlag, varFileFlag,
			}},
		{name: "reload", run: cmdReload,
			summary: "make a running agent reload its configuration, and show what it did",
			about: "Ask a running agent to re-read its configuration files, as SIGHUP does (POST /v1/reload), and show what it did: " +
				"+ jobs added, - jobs removed, ~ jobs restarted with the attributes that changed, and how many were kept. " +
				"A configuration the agent rejects leaves the previous one running, and exits 1.",
			flags: []flagSpec{
				addrFlag, tokenFlag,
				{"json", boolFlag, false, "print the outcome as JSON, as POST /v1/reload returns it"},
				varFlag, varFileFlag,
			}},
		{name: "status", run: cmdStatus,
			summary: "show the jobs of a running agent",
			about:   "Show the jobs of a running agent: state, leader, fencing token, since when, and when the lease expires.",
			flags: []flagSpec{
				addrFlag,
				{"json", boolFlag, false, "print the jobs as JSON, as GET /v1/jobs returns them"},
			}},
		{name: "step-down", run: cmdStepDown, operands: "JOB", min: 1, max: 1,
			summary: "ask a running agent to hand a job over to another node",
			about:   "Ask a running agent to release JOB and hold off re-acquiring it for one ttl, so that another node takes over.",
			flags:   []flagSpec{addrFlag, tokenFlag}},
		{name: "drain", run: cmdDrain,
			summary: "ask a running agent to hand over every job and compete for none",
			about:   "Ask a running agent to hand over every job it leads (stop its work, release the lease) to another agent that can lead it now, and compete for none, until `electd drain -cancel` or the agent restarts. A job that no other agent can lead now is kept, said so, and handed over once one can; the command then exits 1 unless -force gives such jobs up. Waits until another agent leads each job.",
			flags: []flagSpec{
				addrFlag, tokenFlag,
				{"cancel", boolFlag, false, "end the drain: the agent competes again"},
				{"force", boolFlag, false, "hand over the jobs that no other agent can lead now too, leaving them without a leader"},
				{"wait", durationFlag, 2 * time.Minute, "wait at most `D` for every job to be handed over (0: do not wait)"},
			}},
		{name: "history", run: cmdHistory, operands: "JOB", min: 1, max: 1,
			summary: "show the last leadership changes and task runs of a job, as an agent saw them",
			about:   "Show the last leadership changes of JOB that a running agent saw: when, what (elected, demoted, leader_change), the leader and the previous one, the fencing token, and why (elected, lost, released, unhealthy, preempted, balanced, drained, ...); and, for a task job, its last runs (task_run: when it ended, the node that ran it as LEADER, the result as REASON), on whichever node they ran.",
			flags: []flagSpec{
				addrFlag,
				{"json", boolFlag, false, "print the history as JSON, as GET /v1/jobs/JOB/history returns it"},
			}},
		{name: "trigger", run: cmdTrigger, operands: "JOB", min: 1, max: 1,
			summary: "run a job's task now, once, on whichever node leads it",
			about:   "Ask for one run of JOB's task now, on whichever node leads it (the request goes through the lease store, so any agent can take it). The request runs at most once across the cluster, even when the lease moves; a request made while a run is in progress runs once after it. A job in lock mode, which no node leads between slots, runs it on the agent asked. With -wait, print the run's result and exit with the task's exit code (1 when it did not exit by itself: not started, skipped).",
			flags: []flagSpec{
				addrFlag, tokenFlag,
				{"wait", boolFlag, false, "wait for the run to end, print its result and exit with its exit code"},
				{"timeout", durationFlag, time.Hour, "with -wait, give up after `D` (exit 1)"},
			}},
		{name: "leases", run: cmdLeases, operands: "[PATH...]", max: anyNumber, complete: completePaths,
			summary: "ask the stores directly who holds each job (no agent needed)",
			about:   "Ask the lease stores of the configuration at each PATH and -config who holds each job; no agent needs to run.",
			flags: []flagSpec{
				{"config", pathsFlag, nil, "read the configuration from `PATH`, a file or a directory of *.hcl files (repeatable; default /etc/electd)"},
				{"json", boolFlag, false, "print the leases as JSON"},
				{"timeout", durationFlag, 10 * time.Second, "how long to wait for the stores, in all"},
				{"allow-unsafe-config", boolFlag, false, "read configuration files that are world-writable or owned by another user"},
				varFlag, varFileFlag,
			}},
		// lock splits its arguments at the first "--" itself: what follows
		// is the command, untouched.
		{name: "lock", run: cmdLock, operands: "NAME -- COMMAND [ARG...]", max: anyNumber, complete: completeCommand,
			summary: "run one command under a lease, with no configuration file",
			about:   lockAbout(),
			flags: []flagSpec{
				{"provider", stringFlag, "", "the lease store, as a `URL` (default $" + envLockProvider + ")"},
				{"ttl", durationFlag, config.DefaultTTL, "the lease's time to live: how long the lease outlives an electd lock that was killed"},
				{"timeout", optDurationFlag, nil, "give up with status 75 when the lease is not free within `D` (default: wait until it is; 0: try once); each attempt is cut to what remains of D"},
				{"store-timeout", durationFlag, defaultLockStoreTimeout, "give up with status 69 when the store has answered nothing for `D` while waiting for the lease (0: wait as -timeout says)"},
				{"quiet", boolFlag, false, "print only the command's own output and errors: nothing when another holds the lease (status 75), no warnings"},
				{"stop-timeout", optDurationFlag, nil, "after SIGTERM, how long (`D`) the command has to exit before SIGKILL, when the lease is lost or electd lock is stopped (default: ttl/3, at most 5s)"},
				{"log-level", stringFlag, "warn", "the `level` of electd lock's own log on stderr: trace, debug, info, warn or error"},
			}},
		{name: "version", run: cmdVersion,
			summary: "print the release number",
			about:   "Print the release number of electd, the commit it was built from, and the Go version and platform."},

		// For the build and packagers (`make install`, `make deb`), not the
		// operator at work: listed nowhere.
		{name: "man", run: cmdMan, hidden: true,
			about: "Print the manual page electd(1), in roff, written from the help of every command.",
			flags: []flagSpec{
				{"docdir", stringFlag, "/usr/share/doc/electd", "where the documentation is installed, named in the page (`DIR`)"},
			}},
		{name: "completion", run: cmdCompletion, hidden: true, operands: "SHELL", min: 1, max: 1,
			about: "Print the completion script of SHELL, bash or zsh, written from the help of every command."},
	}
}

// The flags several commands share.
var (
	addrFlag    = flagSpec{"addr", stringFlag, defaultAddr, "talk to the agent's API at `URL`; a bare host:port means http://host:port (env " + envAddr + ")"}
	tokenFlag   = flagSpec{"token", stringFlag, "", "send `TOKEN` as the bearer token, needed when the agent sets agent.api_token (default: env " + envToken + ")"}
	varFlag     = flagSpec{"var", inputVarFlag, nil, "set an input variable: `NAME=VALUE` (repeatable; a later -var or -var-file wins)"}
	varFileFlag = flagSpec{"var-file", inputVarFileFlag, nil, "set input variables from `FILE`, NAME = VALUE lines in HCL, or JSON when it ends in .json (repeatable)"}
)

// cmdSpec is one command of the table.
type cmdSpec struct {
	name     string
	summary  string // its line in `electd -h`
	operands string // the positionals in the usage line: "JOB", "[PATH...]"
	min, max int    // how many positionals it takes; max anyNumber: no limit
	complete operandKind
	hidden   bool   // not in `electd -h`, the man page or the completions
	about    string // what -h says the command does, in sentences
	flags    []flagSpec
	run      func(args []string, stdout, stderr io.Writer) int // returns the exit status
}

const anyNumber = -1

// line is the usage line, without "Usage: ".
func (s *cmdSpec) line() string {
	line := "electd " + s.name
	if len(s.flags) > 0 {
		line += " [flags]"
	}
	if s.operands != "" {
		line += " " + s.operands
	}
	return line
}

// operandKind says what a command's positionals complete to.
type operandKind int

const (
	completeNothing operandKind = iota // a job name, a shell: nothing to offer
	completePaths                      // files and directories
	completeCommand                    // a command line after --
)

// flagSpec is one flag: its name, the kind of value it takes, its default
// and its help, which names the value in `backquotes` ("-addr URL") as the
// flag package reads it.
type flagSpec struct {
	name  string
	kind  flagKind
	def   any // bool, string, func() string (read when the command runs) or time.Duration, by kind; nil for none
	usage string
}

type flagKind int

const (
	boolFlag         flagKind = iota
	stringFlag                // def: string or func() string
	durationFlag              // def: time.Duration
	optDurationFlag           // a duration that knows whether it was given
	pathsFlag                 // a repeatable file or directory
	inputVarFlag              // -var NAME=VALUE, into the command's input variables
	inputVarFileFlag          // -var-file FILE, into the same list
)

// lookupCommand returns the command named name, hidden ones included.
func lookupCommand(name string) (cmdSpec, bool) {
	for _, s := range commands() {
		if s.name == name {
			return s, true
		}
	}
	return cmdSpec{}, false
}
