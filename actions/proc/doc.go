// Package proc starts the commands of run, task and exec blocks in their own
// process group and stops them as a group: stop signal, grace, then SIGKILL
// (consul #2022: a `sh -c` grandchild must not survive its parent).
//
// When the agent itself dies (kill -9, OOM kill) nothing in the agent can
// act, so each command is started under a small supervisor: the electd
// binary re-executed in shim mode (see MaybeShim). The shim leads the
// process group and asks the kernel for SIGTERM when its parent dies
// (PR_SET_PDEATHSIG); on that signal it kills the whole group. A crashed
// agent therefore never leaves work running beside the next leader.
package proc
