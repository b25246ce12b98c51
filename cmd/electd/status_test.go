package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/electd/electd/agent"
)

// TestStatusShowsTokenRegressions: a job whose store reported tokens below
// the highest the agent had seen (writes lost in a failover) says so in
// the NOTE column, beside its last error; a job without says nothing.
func TestStatusShowsTokenRegressions(t *testing.T) {
	jobs := []agent.JobStatus{
		{Job: "billing", State: agent.StateLeader, Leader: "n1", Token: 8, TokenMark: 8, TokenRegressions: 2, Competing: true, LastError: "renewal failed"},
		{Job: "quiet", State: agent.StateFollower, Leader: "n2", Token: 3, TokenMark: 3, Competing: true},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/jobs" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(jobs)
	}))
	defer srv.Close()
	var out, errb strings.Builder
	if code := cmdStatus([]string{"-addr", srv.URL}, &out, &errb); code != 0 {
		t.Fatalf("status exited %d: %s", code, errb.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "billing"):
			if !strings.Contains(line, "renewal failed; the store reported 2 token(s) below 8, the highest seen: it lost writes") {
				t.Errorf("billing's row does not report the regressions: %q", line)
			}
		case strings.HasPrefix(line, "quiet"):
			if strings.Contains(line, "lost writes") {
				t.Errorf("quiet's row reports regressions it does not have: %q", line)
			}
		}
	}
}
