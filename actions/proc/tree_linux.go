package proc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// procStat is what /proc/PID/stat says about a process.
type procStat struct {
	pid, ppid, pgrp int
	running         bool // neither a zombie nor dead
}

func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return procStat{}, false
	}
	st := procStat{pid: pid, running: f[0] != "Z" && f[0] != "X"}
	st.ppid, _ = strconv.Atoi(f[1])
	st.pgrp, _ = strconv.Atoi(f[2])
	return st, true
}

// scan reads every process on the machine.
func scan() []procStat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	sts := make([]procStat, 0, len(entries))
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if st, ok := readStat(pid); ok {
				sts = append(sts, st)
			}
		}
	}
	return sts
}

// descendants lists the running processes whose chain of parents leads to
// root. Under the shim, a subreaper, that is everything the command started
// and has not yet died, whatever group or session it moved to.
func descendants(root int) []procStat {
	children := map[int][]procStat{}
	for _, st := range scan() {
		children[st.ppid] = append(children[st.ppid], st)
	}
	return walk(root, func(pid int) []procStat { return children[pid] })
}

// walk lists the running processes below root, breadth first, given each
// process's children.
func walk(root int, children func(pid int) []procStat) []procStat {
	var found []procStat
	for queue := children(root); len(queue) > 0; queue = queue[1:] {
		st := queue[0]
		if st.running {
			found = append(found, st)
		}
		queue = append(queue, children(st.pid)...)
	}
	return found
}

// below lists the running descendants of root as descendants does, but
// walks only the tree below root: each process's children are read from
// /proc/PID/task/TID/children (Linux 3.5 and later, CONFIG_PROC_CHILDREN).
// A stop signal's forward uses it: reading every process on the machine
// took the shim milliseconds of a core (2.5 ms and more in a perf trace,
// with about 90 processes), at the moment the command's own stop and a new
// leader's start need it. The kernel lists a child only while it is
// its parent's, so a process being re-parented can be missed: killTree,
// which must find them all, keeps to descendants. Without the children
// files it is descendants.
func below(root int) []procStat {
	if !childrenListed() {
		return descendants(root)
	}
	return walk(root, childrenOf)
}

// childrenOf reads the children of pid, whichever of its threads started them.
func childrenOf(pid int) []procStat {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var kids []procStat
	for _, t := range tasks {
		b, err := os.ReadFile(dir + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				if st, ok := readStat(n); ok {
					kids = append(kids, st)
				}
			}
		}
	}
	return kids
}

// childrenListed reports whether this kernel lists a process's children.
var childrenListed = sync.OnceValue(func() bool {
	pid := strconv.Itoa(os.Getpid())
	_, err := os.Stat("/proc/" + pid + "/task/" + pid + "/children")
	return err == nil
})

// killTree SIGKILLs every running descendant of root and returns once none
// is left, or within has passed (a process stuck in the kernel dies when it
// leaves it). A process may fork between a scan and its kill, and a scan
// can miss one whose parent exited meanwhile (it is re-parented to root, the
// subreaper, by the next scan): so only two empty scans in a row end it.
func killTree(root int, within time.Duration) {
	deadline := time.Now().Add(within)
	for empty := 0; empty < 2 && time.Now().Before(deadline); {
		found := descendants(root)
		if len(found) == 0 {
			empty++
			continue
		}
		empty = 0
		for _, st := range found {
			syscall.Kill(st.pid, syscall.SIGKILL)
		}
		time.Sleep(time.Millisecond)
	}
}
