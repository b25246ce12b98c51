package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// TestStatusTellsAStoreOutageFromAStuckLoop: `electd status` says what
// /healthz says: a store that does not answer (with since when, per job),
// or a stuck loop.
func TestStatusTellsAStoreOutageFromAStuckLoop(t *testing.T) {
	down := time.Date(2026, 11, 27, 20, 1, 2, 0, time.Local)
	jobs := []agent.JobStatus{
		{Job: "billing", State: agent.StateCandidate, Competing: true, StoreUnreachableSince: &down, LastError: "connection refused"},
	}
	health := map[string]any{"status": "store_unreachable", "stores": []string{"sql.main: store unreachable since 2026-11-27T20:01:02Z (5m0s ago, 1 job(s)): connection refused"}}
	code := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/jobs":
			json.NewEncoder(w).Encode(jobs)
		case "/healthz":
			w.WriteHeader(code)
			json.NewEncoder(w).Encode(health)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	var out, errb strings.Builder
	if exit := cmdStatus([]string{"-addr", srv.URL}, &out, &errb); exit != 0 {
		t.Fatalf("status exited %d: %s", exit, errb.String())
	}
	if !strings.Contains(out.String(), "store unreachable (the agent works") || !strings.Contains(out.String(), "sql.main: store unreachable since") ||
		!strings.Contains(out.String(), "store unreachable since 20:01:02: connection refused") || strings.Contains(out.String(), "loop stuck") {
		t.Errorf("store outage:\n%s", out.String())
	}

	code, health = http.StatusServiceUnavailable, map[string]any{"status": "wedged", "jobs": []string{"billing: loop stuck: no lease operation ended for 1m0s (limit 51s)"}}
	out.Reset()
	if exit := cmdStatus([]string{"-addr", srv.URL}, &out, &errb); exit != 0 {
		t.Fatalf("status exited %d: %s", exit, errb.String())
	}
	if !strings.Contains(out.String(), "loop stuck: the systemd watchdog is no longer pinged\n  billing: loop stuck") {
		t.Errorf("stuck loop:\n%s", out.String())
	}
}
