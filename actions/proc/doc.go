// Package proc starts the commands of run, task and exec blocks in their own
// process group and stops them as a group: stop signal, grace, then SIGKILL
// (consul #2022: a `sh -c` grandchild must not survive its parent).
//
// Each command runs under a small supervisor, the shim: the electd-shim
// binary (cmd/electd-shim), or the electd binary re-executed in shim mode,
// both through MaybeShim. It leads the process group,
// is a child subreaper (PR_SET_CHILD_SUBREAPER) and gets SIGTERM when the
// agent dies (PR_SET_PDEATHSIG). With the shim, which electd always uses:
//
//   - Start returns once the command runs in the group, so a stop sent at
//     once reaches it; a command that cannot start (missing program or Dir,
//     no x bit) is an error from Start that wraps ErrCannotStart; one that
//     could not start for lack of a resource (EMFILE, ENFILE, ENOMEM,
//     EAGAIN, ENOBUFS, in the agent or in the shim) wraps
//     rlimit.ErrShortOfResources instead, and the errno.
//   - Every descendant of the command dies when it is stopped, when it exits
//     and when the agent dies (even by kill -9), including those that left
//     the group by setsid, setpgid or a double fork: orphans are re-parented
//     to the shim, not to init, so the shim and the agent find them all
//     through /proc. The stop signal reaches them too (the shim passes it
//     on, walking the tree below it through each process's list of
//     children, so a stop costs the same on a host of thousands of
//     processes), then SIGKILL after the grace, which reads every process
//     until two reads in a row find none. Done means they are all gone.
//
// A shim takes about 1.5 ms to start before it can start its command, on
// every handover. Spares keeps one started ahead: a spare shim waits, with
// no command, until Start sends it one over a pipe; Start starts the next
// one a moment later (refillAfter).
// The agent keeps one when a job has a command; it is a child of the agent
// like any shim, dies with it, and is discarded when the agent stops.
//
// Linux lets no process leave the subreaper's tree of its own accord. What
// another service starts at the command's request (systemd-run, at, a D-Bus
// activated service) is that service's child, in its cgroup: out of electd's
// reach. The shim itself must not be SIGKILLed alone (kill -9 of its pid,
// the OOM killer): what left its group is then re-parented to init. Under
// systemd, KillMode (control-group, the default, or mixed, as the shipped
// unit has) SIGKILLs whatever is still in electd's own cgroup when the
// service stops, whoever its parent.
//
// Without a shim (Spec.Shim empty) only the group is stopped, and only the
// command gets SIGKILL when the agent dies.
//
// The package works on Linux only (the *_linux.go files). Elsewhere
// (proc_other.go) Start refuses with an error that wraps ErrCannotStart and
// says so, and the rest does nothing, so that the agent, the API and the
// command line still build there, to be read, vetted and tested.
package proc
