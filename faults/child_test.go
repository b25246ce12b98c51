package faults

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// envChild holds the recorder's address. When it is set, the test binary
// acts as a job's child instead of running tests (TestMain). Agents run it
// through their configs: command = [<test binary>, "run"] or ["task"].
const envChild = "FAULTS_CHILD"

// workEvery is how often a run child writes to the fenced resource.
const workEvery = 50 * time.Millisecond

// childMain is a job's command:
//
//	run   announces "run NODE TOKEN PID", then writes "work SEQ" every
//	      workEvery until SIGTERM, when it says "stop" and exits 0. The
//	      recorder sees its end when the connection closes, however it died.
//	      SIGUSR1 from the test is a crash (exit 1, no "stop"). SIGUSR2
//	      makes it start a grandchild ("sub") in a new session (setsid) and
//	      go on; SIGWINCH the same through an intermediate process that
//	      exits at once (a double fork, as a daemon does), which leaves the
//	      grandchild an orphan.
//	daemon PPID: the intermediate of the double fork: starts "sub PPID"
//	      and exits.
//	sub   PPID: the grandchild. Announces "sub NODE TOKEN PID PPID" and
//	      writes "work SEQ" like its parent, under the same token. A stop
//	      signal it reports ("stop") and ignores: only SIGKILL ends it, so
//	      it is gone only if the agent's supervisor found it.
//	task  reports "slot JOB NODE TOKEN SLOT PID" once and exits 0.
//
// NODE, TOKEN and SLOT come from ELECTD_NODE, ELECTD_TOKEN and ELECTD_SLOT,
// as the agent sets them.
func childMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "faults child: want run or task")
		return 2
	}
	// Catch SIGTERM before announcing, so a stop is never missed.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	// SIGUSR1 from the test is a crash: exit 1 at once, no "stop".
	crash := make(chan os.Signal, 1)
	signal.Notify(crash, syscall.SIGUSR1)
	spawn := make(chan os.Signal, 2)
	signal.Notify(spawn, syscall.SIGUSR2, syscall.SIGWINCH)
	if args[0] == "daemon" && len(args) == 2 {
		if err := startGrandchild("sub", args[1]); err != nil {
			fmt.Fprintln(os.Stderr, "faults child: grandchild:", err)
			return 4
		}
		return 0
	}
	c, err := net.DialTimeout("tcp", os.Getenv(envChild), 5*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults child: recorder:", err)
		return 3
	}
	defer c.Close()
	in := bufio.NewReader(c)
	call := func(format string, a ...any) error {
		if _, err := fmt.Fprintf(c, format+"\n", a...); err != nil {
			return err
		}
		_, err := in.ReadString('\n')
		return err
	}
	node, token := os.Getenv("ELECTD_NODE"), os.Getenv("ELECTD_TOKEN")
	switch args[0] {
	case "task":
		job := os.Getenv("ELECTD_JOB")
		if err := call("slot %s %s %s %s %d", job, node, token, os.Getenv("ELECTD_SLOT"), os.Getpid()); err != nil {
			fmt.Fprintln(os.Stderr, "faults child: recorder:", err)
			return 3
		}
		return 0
	case "run":
		if err := call("run %s %s %d", node, token, os.Getpid()); err != nil {
			fmt.Fprintln(os.Stderr, "faults child: recorder:", err)
			return 3
		}
		tick := time.NewTicker(workEvery)
		defer tick.Stop()
		for seq := 1; ; seq++ {
			select {
			case <-crash:
				return 1
			case <-sigs:
				call("stop")
				return 0
			case sig := <-spawn:
				mode := "sub" // the grandchild itself
				if sig == syscall.SIGWINCH {
					mode = "daemon" // which starts it and exits
				}
				if err := startGrandchild(mode, strconv.Itoa(os.Getpid())); err != nil {
					fmt.Fprintln(os.Stderr, "faults child: grandchild:", err)
					return 4
				}
			case <-tick.C:
				// A stale answer is the recorder's business: this child
				// keeps writing, so a stale leader's writes are all counted.
				if err := call("work %d", seq); err != nil {
					fmt.Fprintln(os.Stderr, "faults child: recorder:", err)
					return 3
				}
			}
		}
	case "sub":
		if len(args) != 2 {
			fmt.Fprintln(os.Stderr, "faults child: sub wants the parent's pid")
			return 2
		}
		if err := call("sub %s %s %d %s", node, token, os.Getpid(), args[1]); err != nil {
			fmt.Fprintln(os.Stderr, "faults child: recorder:", err)
			return 3
		}
		tick := time.NewTicker(workEvery)
		defer tick.Stop()
		for seq := 1; ; seq++ {
			select {
			case <-sigs:
				call("stop") // and keep working
			case <-tick.C:
				if err := call("work %d", seq); err != nil {
					return 3 // the recorder is gone: the test is over
				}
			}
		}
	}
	fmt.Fprintf(os.Stderr, "faults child: unknown mode %q\n", args[0])
	return 2
}

// startGrandchild starts this binary in mode (sub or daemon) in a session
// of its own: out of the run child's process group, where a signal to the
// group does not reach it. ppid is the run child's pid, which the grandchild
// reports. It is not waited for here.
func startGrandchild(mode, ppid string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, mode, ppid)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait()
	return nil
}
