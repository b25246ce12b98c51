package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/electd/electd/agent"
	"github.com/electd/electd/api"
)

// cmdDrain is `electd drain`: the agent hands over every job gracefully and
// competes for none until `electd drain -cancel` or a restart. A job that
// no other agent can lead now stays where it is, and the command says so
// and exits 1, unless -force gives it up.
func cmdDrain(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("drain")
	addr := fs.stringFlag("addr")
	token := fs.stringFlag("token")
	cancel := fs.boolFlag("cancel")
	force := fs.boolFlag("force")
	wait := fs.durationFlag("wait")
	if _, exit, ok := fs.parse(args, stdout, stderr); !ok {
		return exit
	}
	if *token == "" {
		*token = os.Getenv(envToken)
	}
	path := "/v1/drain"
	switch {
	case *cancel:
		path += "?cancel=true"
	case *force:
		path += "?force=true"
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
	kept := 0
	for _, j := range res.Jobs {
		switch {
		case j.Kept:
			kept++
			fmt.Fprintf(stdout, "  %s: kept: no other agent can lead it now (none has it, or each is draining, unhealthy, holding it off or excluded by its constraint)\n", j.Job)
		case j.Forced:
			fmt.Fprintf(stdout, "  %s: given up (-force) although no other agent can lead it now\n", j.Job)
		case len(j.Takers) > 0:
			fmt.Fprintf(stdout, "  %s: handing over (can lead it: %s)\n", j.Job, strings.Join(j.Takers, ", "))
		default:
			fmt.Fprintf(stdout, "  %s: handing over\n", j.Job)
		}
	}
	if *wait <= 0 {
		if kept > 0 {
			fmt.Fprintf(stderr, "electd drain: %d job(s) kept: no other agent can lead them now; the agent hands them over once one can (electd drain -force gives them up)\n", kept)
			return 1
		}
		return 0
	}
	var info agent.Info
	if err := apiCall(http.MethodGet, *addr, "/v1/agent", "", &info); err != nil {
		fmt.Fprintln(stderr, "electd drain:", err)
		return 1
	}
	deadline := time.Now().Add(*wait)
	done := map[string]bool{}
	for {
		var jobs []agent.JobStatus
		if err := apiCall(http.MethodGet, *addr, "/v1/jobs", "", &jobs); err != nil {
			fmt.Fprintln(stderr, "electd drain:", err)
			return 1
		}
		state := map[string]agent.JobStatus{}
		busy := 0
		for _, j := range jobs {
			state[j.Job] = j
			if j.State == agent.StateLeader || j.State == agent.StateStopping {
				busy++
			}
		}
		var pending []string
		for _, d := range res.Jobs {
			if done[d.Job] {
				continue
			}
			j, ok := state[d.Job]
			switch {
			case !ok:
				done[d.Job] = true // removed by a reload meanwhile
			case j.State == agent.StateLeader || j.State == agent.StateStopping:
				pending = append(pending, d.Job+": still led here")
			case j.Leader != "" && j.Leader != info.Node:
				done[d.Job] = true
				fmt.Fprintf(stdout, "  %s: handed over to %s\n", d.Job, j.Leader)
			case d.Forced:
				done[d.Job] = true
				fmt.Fprintf(stdout, "  %s: released; no other agent leads it\n", d.Job)
			default:
				pending = append(pending, d.Job+": released, no other agent leads it yet")
			}
		}
		if len(pending) == 0 && busy == 0 {
			fmt.Fprintln(stdout, "drained: this agent leads no job")
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "electd drain: after %s, %d job(s) still led here or not yet led elsewhere:\n", *wait, max(busy, len(pending)))
			for _, p := range pending {
				fmt.Fprintln(stderr, "  "+p)
			}
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
