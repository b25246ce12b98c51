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
	var spare int
	eventually(t, 10*time.Second, "node-2 keeps a spare", func() bool { spare = a2.opts.spares.Waiting(); return spare != 0 })
	a1.stop(t)
	eventually(t, 10*time.Second, "node-2 runs the command", func() bool { return len(lines(t, dir+"/shims")) == 2 })
	node, pid, _ := strings.Cut(lines(t, dir+"/shims")[1], " ")
	shim, _ := strconv.Atoi(pid)
	if node != "node-2" {
		t.Fatalf("the second start was on %s", node)
	}
	// The very shim that was waiting before the handover, not one started
	// for the election.
	if shim != spare {
		t.Errorf("node-2's command runs under shim %d, not under the spare %d that waited before the handover", shim, spare)
	}

	a2.stop(t)
	if left := slices.DeleteFunc(spareShims(), func(pid int) bool { return slices.Contains(before, pid) }); len(left) > 0 {
		t.Errorf("spare shims %v still running after both agents stopped", left)
	}
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
