package agent

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/actions/proc"
)

// A candidate keeps a spare shim: once elected, its command runs under a
// shim that was already waiting, not one started after the election. No
// spare outlives the agent that kept it.
func TestNewLeaderRunsUnderSpare(t *testing.T) {
	before := spareShims()
	db, dir := sqliteDB(t), t.TempDir()
	job := func(node string) string {
		return agentConfig(node, db, fmt.Sprintf(`
job "w" {
%s
  run {
    command = ["sh", "-c", "echo \"$ELECTD_NODE $PPID\" >> %s/shims; exec sleep 600"]
    stop_timeout = "1s"
  }
}`, quick, dir))
	}
	a1 := startAgent(t, loadConfig(t, job("node-1")))
	eventually(t, 10*time.Second, "node-1 runs the command", func() bool { return len(lines(t, dir+"/shims")) == 1 })
	a2 := startAgent(t, loadConfig(t, job("node-2")))
	eventually(t, 10*time.Second, "node-2 follows", func() bool { return a2.job("w").state == StateFollower })
	eventually(t, 10*time.Second, "node-2 keeps a spare", a2.opts.spares.Ready)
	stopped := uptimeTicks(t)
	a1.stop(t)
	eventually(t, 10*time.Second, "node-2 runs the command", func() bool { return len(lines(t, dir+"/shims")) == 2 })
	node, pid, _ := strings.Cut(lines(t, dir+"/shims")[1], " ")
	shim, _ := strconv.Atoi(pid)
	if node != "node-2" {
		t.Fatalf("the second start was on %s", node)
	}
	// Clock ticks (1/100 s): a shim started for the election would start at
	// or after the stop.
	if started := startTicks(t, shim); started > stopped-10 {
		t.Errorf("node-2's command runs under shim %d, started at tick %d: not a spare waiting before the handover (tick %d)", shim, started, stopped)
	}

	a2.stop(t)
	if left := slices.DeleteFunc(spareShims(), func(pid int) bool { return slices.Contains(before, pid) }); len(left) > 0 {
		t.Errorf("spare shims %v still running after both agents stopped", left)
	}
}

// uptimeTicks is the time since boot in clock ticks (USER_HZ, 100 a
// second), as /proc/PID/stat gives a process's start.
func uptimeTicks(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	secs, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	return int64(secs * 100)
}

// startTicks is when process pid started, in clock ticks since boot.
func startTicks(t *testing.T, pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	n, err := strconv.ParseInt(f[19], 10, 64) // field 22, starttime
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// spareShims lists the running spare shims started by this process: its
// children whose environment, as they were started, marks them spares.
func spareShims() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !proc.Alive(pid) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		if slices.Contains(strings.Split(string(env), "\x00"), "ELECTD_SHIM_SPARE=1") {
			pids = append(pids, pid)
		}
	}
	return pids
}
