package faults

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/signal"
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
			case <-tick.C:
				// A stale answer is the recorder's business: this child
				// keeps writing, so a stale leader's writes are all counted.
				if err := call("work %d", seq); err != nil {
					fmt.Fprintln(os.Stderr, "faults child: recorder:", err)
					return 3
				}
			}
		}
	}
	fmt.Fprintf(os.Stderr, "faults child: unknown mode %q\n", args[0])
	return 2
}
