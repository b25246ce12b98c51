package proc

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A stop sent the moment Start returns reaches the command: it ends by the
// stop signal, never by the SIGKILL at the end of the grace.
func TestStopRightAfterStart(t *testing.T) {
	t.Run("fresh shim", func(t *testing.T) { stopRightAfterStart(t, nil) })
	t.Run("spare shim", func(t *testing.T) {
		s := NewSpares(self(t))
		t.Cleanup(s.Close)
		stopRightAfterStart(t, s)
	})
}

// stopRightAfterStart is TestStopRightAfterStart, each command started
// under a spare from s when s is not nil.
func stopRightAfterStart(t *testing.T, s *Spares) {
	cycles := 200
	if testing.Short() {
		cycles = 20 // make test runs all 200
	}
	marker := filepath.Join(t.TempDir(), "stopped")
	shim := self(t)
	deadline := time.Now().Add(30 * time.Second)
	var n, trapped, killed, shimDied, other int
	for ; n < cycles && time.Now().Before(deadline); n++ {
		os.Remove(marker)
		var spare int
		if s != nil {
			spare = ready(t, s)
		}
		p, err := Start(Spec{
			Argv: []string{"sh", "-c", `trap 'echo stopped > "$0"; exit 0' TERM; sleep 600 & wait`, marker},
			// Under -race the shim (this binary) would sleep 1s as it exits.
			Env:    []string{"GORACE=atexit_sleep_ms=0"},
			Shim:   shim,
			Spares: s,
		})
		if err != nil {
			t.Fatal(err)
		}
		if spare != 0 && p.Pid() != spare {
			t.Fatalf("cycle %d: the command ran under shim %d, not the spare %d", n, p.Pid(), spare)
		}
		// Stops spread over the first 3 ms: with the shim, the command
		// exists from the first; the later ones find its trap set.
		if d := time.Duration(n%8) * 400 * time.Microsecond; d > 0 {
			time.Sleep(d)
		}
		wasKilled := p.Stop(syscall.SIGTERM, 2*time.Second)
		_, noMarker := os.Stat(marker)
		// The shim's own status: it exits with 128+N when its command died of
		// signal N, and must not die of the stop signal itself.
		var ws syscall.WaitStatus
		if ee := (*exec.ExitError)(nil); errors.As(p.Err(), &ee) {
			ws = ee.Sys().(syscall.WaitStatus)
		}
		switch {
		case wasKilled:
			killed++
		case ws.Signaled():
			shimDied++
		case p.Err() == nil && noMarker == nil:
			trapped++
		case ws.Exited() && ws.ExitStatus() == 128+int(syscall.SIGTERM) && noMarker != nil:
			// The command died of SIGTERM before the shell had set its trap:
			// the default action, still the stop signal doing its work.
		default:
			other++
			t.Logf("cycle %d: exit code %d, marker: %v", n, p.ExitCode(), noMarker)
		}
	}
	t.Logf("%d cycles: %d ran the trap, %d died of SIGTERM before the shell had set it", n, trapped, n-trapped-killed-shimDied-other)
	if n < cycles {
		t.Errorf("only %d of %d cycles within 30s", n, cycles)
	}
	if killed > 0 {
		t.Errorf("%d cycles: the command never got SIGTERM and was SIGKILLed after the grace", killed)
	}
	if shimDied > 0 {
		t.Errorf("%d cycles: the shim died of SIGTERM before it had started the command", shimDied)
	}
	if other > 0 {
		t.Errorf("%d cycles ended otherwise (logged): want exit 0 with the marker, or 143 without (SIGTERM before the trap)", other)
	}
	if trapped == 0 {
		t.Error("no cycle ran the trap: the test no longer shows that a trapped stop signal arrives")
	}
}

// A grandchild that leaves the process group (setsid, setpgid, a double
// fork) is still stopped and killed: it gets the stop signal, is SIGKILLed
// with the rest when the stop needs it, dies when the command exits, and
// when the agent dies.
func TestNoOrphans(t *testing.T) {
	// Each spawn starts, in the background, a grandchild that writes its pid
	// to "$0", writes "$0.term" when it gets SIGTERM (or ignores it, when
	// IGNORE_TERM is set), and otherwise runs until killed. "$1" is the test
	// binary (for setpgid).
	const gc = `sh -c 'trap "echo > \"$0.term\"; exit" TERM; [ "$IGNORE_TERM" ] && trap "" TERM; ` +
		`echo $$ > "$0"; while :; do sleep 0.05; done' "$0"`
	spawns := []struct{ name, spawn string }{
		{"setsid", `setsid ` + gc + ` &`},
		{"double fork", `(` + gc + ` &)`},
		{"double fork and setsid", `(setsid ` + gc + ` &)`},
		{"setpgid", `ELECTD_PROC_TEST_SETPGID=1 "$1" ` + gc + ` &`},
	}
	const (
		ready = "\nwhile [ ! -s \"$0\" ]; do sleep 0.01; done\n"
		// On SIGTERM the command waits for the grandchild to have got it too.
		waitTerm  = `trap 'while [ ! -e "$0.term" ]; do sleep 0.01; done; exit 0' TERM` + "\n"
		ignore    = `trap '' TERM; export IGNORE_TERM=1` + "\n"
		keepGoing = "sleep 600 & wait"
	)
	for _, s := range spawns {
		t.Run(s.name+"/stop", func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			p := start(t, waitTerm+s.spawn+ready+keepGoing, pidFile)
			gc := leftover(t, pidFile)
			if p.Stop(syscall.SIGTERM, 5*time.Second) {
				t.Error("Stop needed SIGKILL: the grandchild never got SIGTERM")
			}
			if _, err := os.Stat(pidFile + ".term"); err != nil {
				t.Error("the grandchild did not get SIGTERM")
			}
			if Alive(gc) {
				t.Errorf("grandchild %d outlived Stop", gc)
			}
		})
		t.Run(s.name+"/stop ignored", func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			p := start(t, ignore+s.spawn+ready+keepGoing, pidFile)
			gc := leftover(t, pidFile)
			if !p.Stop(syscall.SIGTERM, 300*time.Millisecond) {
				t.Error("Stop did not need SIGKILL, though everything ignores SIGTERM")
			}
			if Alive(gc) {
				t.Errorf("grandchild %d outlived Stop's SIGKILL", gc)
			}
		})
		t.Run(s.name+"/exit", func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			p := start(t, s.spawn+ready, pidFile)
			<-p.Done()
			gc := leftover(t, pidFile)
			if Alive(gc) {
				t.Errorf("grandchild %d outlived the command (Done was closed)", gc)
			}
			if p.ExitCode() != 0 {
				t.Errorf("exit code %d, want 0", p.ExitCode())
			}
		})
		t.Run(s.name+"/agent dies", func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			agent := exec.Command(self(t))
			agent.Env = append(os.Environ(), "ELECTD_PROC_TEST_AGENT="+pidFile,
				"ELECTD_PROC_TEST_SCRIPT="+ignore+s.spawn+ready+keepGoing)
			if err := agent.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
			gc := leftover(t, pidFile)
			agent.Process.Signal(syscall.SIGKILL)
			agent.Wait()
			waitFor(t, 10*time.Second, func() bool { return !Alive(gc) }, "the grandchild dies with the agent")
		})
	}
}

// start runs `sh -c script pidFile self` under the shim.
func start(t *testing.T, script, pidFile string) *Process {
	t.Helper()
	p, err := Start(Spec{Argv: []string{"sh", "-c", script, pidFile, self(t)}, Shim: self(t)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// leftover reads the grandchild's pid from pidFile, and kills it when the
// test ends if a failed test left it running.
func leftover(t *testing.T, pidFile string) int {
	t.Helper()
	pid := readPid(t, pidFile)
	t.Cleanup(func() {
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if Alive(pid) && bytes.Contains(cmdline, []byte(pidFile)) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

// below, the walk a stop's forward takes, finds what a read of every
// process finds: the command, what it started in and out of its group, and
// the orphans re-parented to the shim.
func TestBelowFindsWhatAScanFinds(t *testing.T) {
	if !childrenListed() {
		t.Skip("this kernel does not list children (/proc/PID/task/TID/children): below is descendants")
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	const spawn = `sh -c 'echo $$ >> "$0"; sleep 600' "$0" `
	p := start(t, `setsid `+spawn+`&
(`+spawn+`&)
(setsid `+spawn+`&)
`+spawn+`&
while [ "$(wc -l < "$0")" -lt 4 ]; do sleep 0.01; done
sleep 600 & wait`, pidFile)
	t.Cleanup(func() { p.Kill() })
	waitFor(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(pidFile)
		return bytes.Count(b, []byte("\n")) == 4
	}, "four grandchildren started")
	pids := func(sts []procStat) map[int]bool {
		m := map[int]bool{}
		for _, st := range sts {
			m[st.pid] = true
		}
		return m
	}
	// The tree is still once each grandchild waits on its sleep and the
	// command on its own: the command starts its sleep after it has seen
	// the four lines, which may be after the test has. Wait for two scans
	// in a row to agree.
	var want map[int]bool
	waitFor(t, 10*time.Second, func() bool {
		before := pids(descendants(p.Pid()))
		time.Sleep(100 * time.Millisecond)
		want = pids(descendants(p.Pid()))
		return maps.Equal(before, want)
	}, "the tree below the shim still")
	got := pids(below(p.Pid()))
	if len(want) < 9 { // the command, four grandchildren with a sleep each
		t.Fatalf("a scan found %d processes below the shim, want at least 9", len(want))
	}
	if len(got) != len(want) {
		t.Errorf("below found %d processes, a scan %d", len(got), len(want))
	}
	for pid := range want {
		if !got[pid] {
			t.Errorf("below missed process %d", pid)
		}
	}
}
