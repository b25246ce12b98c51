package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"text/tabwriter"
	"time"

	"github.com/electd/electd/agent"
	"github.com/electd/electd/api"
)

// cmdDrain is `electd drain`: the agent hands over every job gracefully and
// competes for none until `electd drain -cancel` or a restart.
func cmdDrain(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("drain")
	addr := fs.stringFlag("addr")
	token := fs.stringFlag("token")
	cancel := fs.boolFlag("cancel")
	wait := fs.durationFlag("wait")
	if _, exit, ok := fs.parse(args, stdout, stderr); !ok {
		return exit
	}
	if *token == "" {
		*token = os.Getenv(envToken)
	}
	path := "/v1/drain"
	if *cancel {
		path += "?cancel=true"
	}
	var res api.DrainResult
	if err := apiCall(http.MethodPost, *addr, path, *token, &res); err != nil {
		fmt.Fprintln(stderr, "electd drain:", err)
		return 1
	}
	if *cancel {
		fmt.Fprintln(stdout, "drain cancelled: the agent competes again")
		return 0
	}
	fmt.Fprintf(stdout, "draining: handing over %d job(s)\n", res.Leading)
	if *wait <= 0 {
		return 0
	}
	deadline := time.Now().Add(*wait)
	for {
		var jobs []agent.JobStatus
		if err := apiCall(http.MethodGet, *addr, "/v1/jobs", "", &jobs); err != nil {
			fmt.Fprintln(stderr, "electd drain:", err)
			return 1
		}
		busy := 0
		for _, j := range jobs {
			if j.State == agent.StateLeader || j.State == agent.StateStopping {
				busy++
			}
		}
		if busy == 0 {
			fmt.Fprintln(stdout, "drained: this agent leads no job")
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "electd drain: %d job(s) still leading or stopping after %s\n", busy, *wait)
			return 1
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cmdHistory is `electd history JOB`: the last leadership changes of JOB as
// the agent saw them, with the reason of each.
func cmdHistory(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("history")
	addr := fs.stringFlag("addr")
	asJSON := fs.boolFlag("json")
	pos, exit, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return exit
	}
	var hist []agent.Transition
	if err := apiCall(http.MethodGet, *addr, "/v1/jobs/"+url.PathEscape(pos[0])+"/history", "", &hist); err != nil {
		fmt.Fprintln(stderr, "electd history:", err)
		return 1
	}
	if *asJSON {
		writeJSON(stdout, hist)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tEVENT\tLEADER\tPREVIOUS\tTOKEN\tREASON")
	for _, h := range hist {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", h.Time.UTC().Format(time.RFC3339Nano), h.Type,
			dash(h.Leader), dash(h.PreviousLeader), h.Token, h.Reason)
	}
	tw.Flush()
	return 0
}
