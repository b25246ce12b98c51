package proc

import (
	"os"
	"strings"
	"unsafe"
)

// shimTitle is the shim's argv[0], what ps shows for it: electd-shim and
// the job whose command it runs (its path, often /proc/self/fd/N, says
// nothing). The shim reads only the arguments after it.
func shimTitle(name string) string {
	if name == "" {
		return "electd-shim"
	}
	return "electd-shim " + name
}

// titleRoom is the room a spare keeps in its arguments for the name of the
// job it will run a command for: a spare starts before that is known, and a
// process gets new arguments only from an exec, which would cost the time
// the spare is there to save. Longer names are cut.
const titleRoom = 64

// spareArg is a spare's one argument, its placeholder until setTitle.
var spareArg = "(spare)" + strings.Repeat(" ", titleRoom-len("(spare)"))

// setTitle writes name over arg, the spare's placeholder, in place: Go's
// os.Args point into the memory the kernel laid the arguments in, which is
// what /proc/PID/cmdline, and so ps, reads. The rest is cleared with NULs
// (ps shows them as spaces at the end). It also names the process (comm,
// what top and ps -e show) electd-shim.
func setTitle(arg, name string) {
	// /proc/self/comm is the main thread's name; prctl would name only the
	// thread this goroutine runs on.
	os.WriteFile("/proc/self/comm", []byte("electd-shim"), 0)
	if len(arg) != titleRoom {
		return // not started as a spare
	}
	b := unsafe.Slice(unsafe.StringData(arg), len(arg))
	n := copy(b, name)
	clear(b[n:])
}
