// Command electd-shim supervises one command for electd: it leads the
// command's process group, is its child subreaper and kills every
// descendant when the command ends or the agent dies (package
// actions/proc). electd starts it; it is not meant to be run by hand.
//
// It is a binary of its own, beside electd or in ../lib/electd/, because it
// starts for every command: with a few packages to initialise it has a
// command running in about 2 ms, where the whole electd binary, with every
// store's SDK, takes about 10 (bench/NOTES.md). Without it electd
// re-executes itself as the shim, which works the same, only slower. The
// agent also keeps one started ahead of the next command (proc.Spares), so
// that a handover does not wait for it at all.
package main

import (
	"fmt"
	"os"

	"github.com/electd/electd/actions/proc"
)

func main() {
	proc.MaybeShim()
	fmt.Fprintln(os.Stderr, "electd-shim: started by electd to supervise a command; it is not run by hand")
	os.Exit(2)
}
