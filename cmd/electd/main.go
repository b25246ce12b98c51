// Command electd is the leader-election agent: `electd run` elects one node
// per job and supervises its work; the other subcommands check, format and
// inspect configurations and running agents.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/electd/electd/actions/proc"
)

func main() {
	proc.MaybeShim() // without electd-shim beside it, electd re-executes itself to supervise each command
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `Usage: electd <command> [flags] [arguments]

Commands:
  run        run the agent (one election loop per job)
  check      parse and validate configuration files
  fmt        rewrite configuration files in canonical format
  plan       show what a reload would do to a running agent, before doing it
  reload     make a running agent reload its configuration, and show what it did
  status     show the jobs of a running agent
  step-down  ask a running agent to hand a job over to another node
  drain      ask a running agent to hand over every job and compete for none
  history    show the last leadership changes and task runs of a job, as an agent saw them
  trigger    run a job's task now, once, on whichever node leads it
  leases     ask the stores directly who holds each job (no agent needed)
  lock       run one command under a lease, with no configuration file
  version    print the release number

Run 'electd <command> -h' for the flags of a command.
`

// subcommands maps a command name to its entry point. Each returns the exit code.
var subcommands = map[string]func(args []string, stdout, stderr io.Writer) int{
	"run":       cmdRun,
	"check":     cmdCheck,
	"fmt":       cmdFmt,
	"plan":      cmdPlan,
	"reload":    cmdReload,
	"version":   cmdVersion,
	"status":    cmdStatus,
	"step-down": cmdStepDown,
	"drain":     cmdDrain,
	"history":   cmdHistory,
	"trigger":   cmdTrigger,
	"leases":    cmdLeases,
	"lock":      cmdLock,
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "-v", "-version", "--version":
		return cmdVersion(args[1:], stdout, stderr) // extra arguments are refused as for `version`
	}
	cmd, ok := subcommands[args[0]]
	if !ok {
		cmd, ok = hiddenCommands[args[0]]
	}
	if !ok {
		fmt.Fprintf(stderr, "electd: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	return cmd(args[1:], stdout, stderr)
}
