// Command electd is the leader-election agent: `electd run` elects one node
// per job and supervises its work; the other subcommands check, format and
// inspect configurations and running agents.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/electd/electd/actions/proc"
)

func main() {
	proc.MaybeShim() // without electd-shim beside it, electd re-executes itself to supervise each command
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// synopsis is the first line of `electd -h` and of the man page's SYNOPSIS.
const synopsis = "electd <command> [flags] [arguments]"

// moreHelp ends `electd -h`.
const moreHelp = "Run 'electd <command> -h' for the flags of a command."

// usage is `electd -h`: the commands of the table, but the hidden ones.
func usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s\n\nCommands:\n", synopsis)
	for _, s := range commands() {
		if !s.hidden {
			fmt.Fprintf(&b, "  %-10s %s\n", s.name, s.summary)
		}
	}
	fmt.Fprintf(&b, "\n%s\n", moreHelp)
	return b.String()
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage())
		return 0
	case "-v", "-version", "--version":
		return cmdVersion(args[1:], stdout, stderr) // extra arguments are refused as for `version`
	}
	cmd, ok := lookupCommand(args[0])
	if !ok {
		fmt.Fprintf(stderr, "electd: unknown command %q\n\n%s", args[0], usage())
		return 2
	}
	return cmd.run(args[1:], stdout, stderr)
}
