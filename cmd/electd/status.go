package main

import (
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
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(addr, "/")+path, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the agent at %s: %w (is `electd run` running with agent.listen set?)", addr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode/100 != 2 {
		var e struct{ Error string }
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return fmt.Errorf("agent answered %s: %s", resp.Status, e.Error)
		}
		return fmt.Errorf("agent answered %s", resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(body, out)
}

// cmdStatus is `electd status`: the jobs of a running agent as a table.
func cmdStatus(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("status", "", 0, 0,
		"Show the jobs of a running agent: state, leader, fencing token, since when, and when the lease expires.")
	addr := fs.String("addr", defaultAddr(), "talk to the agent's API at `URL`; a bare host:port means http://host:port (env "+envAddr+")")
	asJSON := fs.Bool("json", false, "print the jobs as JSON, as GET /v1/jobs returns them")
	if _, exit, ok := fs.parse(args, stdout, stderr); !ok {
		return exit
	}
	var jobs []agent.JobStatus
	if err := apiCall(http.MethodGet, *addr, "/v1/jobs", "", &jobs); err != nil {
		fmt.Fprintln(stderr, "electd status:", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(jobs)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATE\tLEADER\tTOKEN\tSINCE\tLEASE EXPIRES\tLAST ERROR")
	now := time.Now()
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", j.Job, j.State, dash(j.Leader), j.Token,
			ago(now, j.Since), until(now, j.LeaseExpires), dash(j.LastError))
	}
	tw.Flush()
	return 0
}

// cmdStepDown is `electd step-down JOB`: the agent releases the job and
// holds off for one ttl, so another node takes over.
func cmdStepDown(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("step-down", "JOB", 1, 1,
		"Ask a running agent to release JOB and hold off re-acquiring it for one ttl, so that another node takes over.")
	addr := fs.String("addr", defaultAddr(), "talk to the agent's API at `URL`; a bare host:port means http://host:port (env "+envAddr+")")
	token := fs.String("token", "", "send `TOKEN` as the bearer token, needed when the agent sets agent.api_token (default: env "+envToken+")")
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
