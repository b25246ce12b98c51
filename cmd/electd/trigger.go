package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/electd/electd/agent"
	"github.com/electd/electd/api"
)

// cmdTrigger is `electd trigger JOB`: one run of JOB's task now, on
// whichever node leads it, at most once across the cluster.
func cmdTrigger(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("trigger")
	addr := fs.stringFlag("addr")
	token := fs.stringFlag("token")
	wait := fs.boolFlag("wait")
	timeout := fs.durationFlag("timeout")
	pos, exit, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return exit
	}
	job := pos[0]
	if *token == "" {
		*token = os.Getenv(envToken)
	}
	var res api.TriggerResult
	if err := apiRequest(http.MethodPost, *addr, "/v1/jobs/"+url.PathEscape(job)+"/trigger", *token, nil, 15*time.Second, 0, &res); err != nil {
		fmt.Fprintln(stderr, "electd trigger:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: run requested (request %d)\n", job, res.Request)
	if !*wait {
		return 0
	}
	deadline := time.Now().Add(*timeout)
	for {
		var st agent.JobStatus
		if err := apiCall(http.MethodGet, *addr, "/v1/jobs/"+url.PathEscape(job), "", &st); err != nil {
			fmt.Fprintln(stderr, "electd trigger:", err)
			return 1
		}
		if st.Task != nil {
			if r := st.Task.LastRun; r != nil && r.Trigger >= res.Request && r.Result != agent.ResultRunning {
				return printRun(stdout, job, r)
			}
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "electd trigger: request %d has not run to its end after %s\n", res.Request, *timeout)
			return 1
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// printRun prints a run's outcome and returns the exit code to exit with.
func printRun(w io.Writer, job string, r *agent.TaskRun) int {
	code := 1
	detail := ""
	if r.ExitCode != nil {
		code = *r.ExitCode
		detail = fmt.Sprintf(", exit code %d", code)
	}
	if r.Why != "" {
		detail += ": " + r.Why
	}
	took := ""
	if d := r.Duration(); d > 0 {
		took = " in " + d.Round(time.Millisecond).String()
	}
	fmt.Fprintf(w, "%s: %s on %s%s (token %d%s)\n", job, r.Result, r.Node, took, r.Token, detail)
	if r.Result == agent.ResultSucceeded {
		return 0
	}
	if code == 0 {
		code = 1 // killed or timed out after a clean exit cannot be; be safe
	}
	return code
}
