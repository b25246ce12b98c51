package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/electd/electd/agent"
)

// The address and token of the agent to talk to, like CONSUL_HTTP_ADDR.
const (
	envAddr  = "ELECTD_ADDR"
	envToken = "ELECTD_API_TOKEN"
)

func defaultAddr() string {
	if a := os.Getenv(envAddr); a != "" {
		return a
	}
	return "http://127.0.0.1:8790"
}

// apiCall sends a request to a running agent and decodes its JSON answer.
func apiCall(method, addr, path, token string, out any) error {
	return apiRequest(method, addr, path, token, nil, 10*time.Second, 0, out)
}

// apiRequest sends body as JSON (nil: no body) to a running agent and
// decodes its answer into out (nil: ignored): a 2xx answer, or one with the
// status alsoOK (0: none), which carries an outcome of its own (422: a
// configuration the agent rejected). Any other answer is an error.
func apiRequest(method, addr, path, token string, body any, timeout time.Duration, alsoOK int, out any) error {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(addr, "/")+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the agent at %s: %w (is `electd run` running with agent.listen set?)", addr, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode/100 == 2 || (alsoOK != 0 && resp.StatusCode == alsoOK) {
		if out == nil {
			return nil
		}
		return json.Unmarshal(b, out)
	}
	var e struct{ Error string }
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return fmt.Errorf("agent answered %s: %s", resp.Status, e.Error)
	}
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
		return fmt.Errorf("agent answered %s: is it an older electd without %s?", resp.Status, path)
	}
	return fmt.Errorf("agent answered %s", resp.Status)
}

// writeJSON prints v as indented JSON (the -json of status, history, plan).
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// cmdStatus is `electd status`: the jobs of a running agent as a table.
func cmdStatus(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("status")
	addr := fs.stringFlag("addr")
	asJSON := fs.boolFlag("json")
	if _, exit, ok := fs.parse(args, stdout, stderr); !ok {
		return exit
	}
	var jobs []agent.JobStatus
	if err := apiCall(http.MethodGet, *addr, "/v1/jobs", "", &jobs); err != nil {
		fmt.Fprintln(stderr, "electd status:", err)
		return 1
	}
	var info agent.Info
	if !*asJSON && apiCall(http.MethodGet, *addr, "/v1/agent", "", &info) == nil && info.Draining {
		fmt.Fprintf(stdout, "agent %s is draining: it hands over every job and competes for none (electd drain -cancel)\n\n", info.Node)
	}
	if *asJSON {
		writeJSON(stdout, jobs)
		return 0
	}
	// What /healthz says, which the systemd watchdog follows: a stuck loop
	// (a restart helps), or a store that does not answer (it would not).
	var health struct {
		Status string
		Jobs   []string
		Stores []string
	}
	if apiRequest(http.MethodGet, *addr, "/healthz", "", nil, 10*time.Second, http.StatusServiceUnavailable, &health) == nil {
		switch health.Status {
		case "wedged":
			fmt.Fprintf(stdout, "loop stuck: the systemd watchdog is no longer pinged\n  %s\n\n", strings.Join(health.Jobs, "\n  "))
		case "store_unreachable":
			fmt.Fprintf(stdout, "store unreachable (the agent works; it retries every retry_every):\n  %s\n\n", strings.Join(health.Stores, "\n  "))
		}
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATE\tLEADER\tTOKEN\tSINCE\tLEASE EXPIRES\tHEALTH\tLAST RUN\tRESULT\tNEXT\tNOTE")
	now := time.Now()
	for _, j := range jobs {
		state := j.State
		if state == agent.StateNotEligible {
			state = "not eligible"
		}
		note := j.LastError
		if j.StoreUnreachableSince != nil {
			note = fmt.Sprintf("store unreachable since %s: %s", j.StoreUnreachableSince.Local().Format("15:04:05"), j.LastError)
		}
		if note == "" && !j.Competing && j.State != agent.StateLeader && j.State != agent.StateStopping {
			note = j.Waiting
		}
		if note == "" && j.State == agent.StateLeader && j.Waiting != "" {
			note = j.Waiting // a draining agent's leader: kept, or about to be handed over
		}
		if j.TokenRegressions > 0 {
			// Rare and serious: a fence downstream may refuse the leader.
			lost := fmt.Sprintf("the store reported %d token(s) below %d, the highest seen: it lost writes", j.TokenRegressions, j.TokenMark)
			note = strings.TrimPrefix(note+"; "+lost, "; ")
		}
		health := "-"
		if j.Health != nil {
			health = j.Health.Status
		}
		last, result, next := taskColumns(now, j.Task)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", j.Job, state, dash(j.Leader), j.Token,
			ago(now, j.Since), until(now, j.LeaseExpires), health, last, result, next, dash(note))
	}
	tw.Flush()
	return 0
}

// cmdStepDown is `electd step-down JOB`: the agent releases the job and
// holds off for one ttl, so another node takes over.
func cmdStepDown(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("step-down")
	addr := fs.stringFlag("addr")
	token := fs.stringFlag("token")
	pos, exit, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return exit
	}
	job := pos[0]
	if *token == "" {
		*token = os.Getenv(envToken)
	}
	if err := apiCall(http.MethodPost, *addr, "/v1/jobs/"+url.PathEscape(job)+"/step-down", *token, nil); err != nil {
		fmt.Fprintln(stderr, "electd step-down:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: stepping down; this node holds off for one ttl\n", job)
	return 0
}

// taskColumns are LAST RUN, RESULT and NEXT: when the last run started and
// on which node, its result (with the exit code of a failure), when the
// next starts; "-" for a job without a task.
func taskColumns(now time.Time, t *agent.TaskStatus) (last, result, next string) {
	last, result, next = "-", "-", "-"
	if t == nil {
		return
	}
	if r := t.LastRun; r != nil {
		at := r.Slot
		if r.StartedAt != nil {
			at = *r.StartedAt
		}
		last = ago(now, &at) + " on " + r.Node
		result = r.Result
		if r.ExitCode != nil && r.Result != agent.ResultSucceeded {
			result = fmt.Sprintf("%s (%d)", r.Result, *r.ExitCode)
		}
	}
	if t.NextRun != nil {
		next = t.NextRun.UTC().Format(time.RFC3339)
	}
	return
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ago(now time.Time, t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return now.Sub(*t).Round(time.Second).String() + " ago"
}

func until(now time.Time, t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return "in " + t.Sub(now).Round(100*time.Millisecond).String()
}
