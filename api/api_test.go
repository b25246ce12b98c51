package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/electd/electd/agent"
	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/redact"
)

// jobsAgent is a fixed set of job states: this file tests the HTTP layer; the
// API against a running agent binary is tested in systest.
type jobsAgent struct {
	mu       sync.Mutex
	jobs     []agent.JobStatus
	steppedD []string
	ready    bool
	draining bool
}

func (a *jobsAgent) Jobs() []agent.JobStatus { a.mu.Lock(); defer a.mu.Unlock(); return a.jobs }
func (a *jobsAgent) Drain(on, force bool) []agent.DrainJob {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.draining = on
	return []agent.DrainJob{{Job: "billing", Takers: []string{"web-2"}}}
}
func (a *jobsAgent) Info() agent.Info {
	a.mu.Lock()
	defer a.mu.Unlock()
	return agent.Info{Node: "web-1", Draining: a.draining}
}
func (a *jobsAgent) History(job string) ([]agent.Transition, error) {
	if job != "billing" {
		return nil, agent.ErrNoSuchJob
	}
	return []agent.Transition{{Time: now, Type: "elected", Leader: "web-1", Token: 42, Reason: agent.ReasonElected}}, nil
}
func (a *jobsAgent) Ready() bool { return a.ready }
func (a *jobsAgent) StepDown(_ context.Context, job string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, j := range a.jobs {
		if j.Job == job {
			a.steppedD = append(a.steppedD, job)
			return nil
		}
	}
	return agent.ErrNoSuchJob
}

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func newAgent() *jobsAgent {
	since := now.Add(-time.Minute)
	return &jobsAgent{ready: true, jobs: []agent.JobStatus{
		{Job: "billing", Provider: "sql.main", State: agent.StateLeader, Leader: "web-1", Token: 42, Since: &since, LastLeaseOp: now.Add(-2 * time.Second), TTL: 15 * time.Second, RetryEvery: 2 * time.Second},
		{Job: "report", Provider: "sql.main", State: agent.StateFollower, Leader: "web-2", Token: 7, LastLeaseOp: now.Add(-time.Second), TTL: 15 * time.Second, RetryEvery: 2 * time.Second},
	}}
}

func do(t *testing.T, h http.Handler, method, path, remote, auth string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	req.Host = "127.0.0.1:8790" // as the CLI addresses the default listen
	if remote != "" {
		req.RemoteAddr = remote
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, string(b)
}

func TestJobs(t *testing.T) {
	h := Handler(Options{Agent: newAgent(), Now: func() time.Time { return now }})
	code, body := do(t, h, "GET", "/v1/jobs", "", "")
	if code != 200 {
		t.Fatalf("GET /v1/jobs: %d %s", code, body)
	}
	var jobs []map[string]any
	if err := json.Unmarshal([]byte(body), &jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0]["job"] != "billing" || jobs[0]["state"] != "leader" || jobs[0]["token"] != 42.0 || jobs[0]["provider"] != "sql.main" {
		t.Errorf("unexpected jobs: %s", body)
	}
	for _, k := range []string{"job", "provider", "state", "leader", "token", "since", "lease_expires", "last_error"} {
		if _, ok := jobs[0][k]; !ok {
			t.Errorf("job has no %q field: %s", k, body)
		}
	}
	code, body = do(t, h, "GET", "/v1/jobs/report", "", "")
	if code != 200 || !strings.Contains(body, `"leader": "web-2"`) {
		t.Errorf("GET /v1/jobs/report: %d %s", code, body)
	}
	if code, _ := do(t, h, "GET", "/v1/jobs/nope", "", ""); code != 404 {
		t.Errorf("unknown job: %d, want 404", code)
	}
}

func TestStepDownAuth(t *testing.T) {
	cases := []struct {
		name, token, remote, auth, job string
		want                           int
	}{
		{"right token", "t0k", "10.1.2.3:5000", "Bearer t0k", "billing", 202},
		{"scheme in lower case", "t0k", "10.1.2.3:5000", "bearer t0k", "billing", 202},
		{"scheme in upper case", "t0k", "10.1.2.3:5000", "BEARER t0k", "billing", 202},
		{"several spaces after the scheme", "t0k", "10.1.2.3:5000", "Bearer   t0k", "billing", 202},
		{"wrong token", "t0k", "127.0.0.1:5000", "Bearer nope", "billing", 401},
		{"token with a suffix", "t0k", "127.0.0.1:5000", "Bearer t0kx", "billing", 401},
		{"prefix of the token", "t0k", "127.0.0.1:5000", "Bearer t0", "billing", 401},
		{"no space after the scheme", "t0k", "127.0.0.1:5000", "Bearert0k", "billing", 401},
		{"scheme only", "t0k", "127.0.0.1:5000", "Bearer ", "billing", 401},
		{"token without a scheme", "t0k", "127.0.0.1:5000", "t0k", "billing", 401},
		{"other scheme", "t0k", "127.0.0.1:5000", "Basic t0k", "billing", 401},
		{"no token sent", "t0k", "127.0.0.1:5000", "", "billing", 401},
		{"no token configured, loopback client", "", "127.0.0.1:5000", "", "billing", 202},
		{"no token configured, remote client", "", "10.1.2.3:5000", "", "billing", 403},
		{"unknown job", "t0k", "127.0.0.1:5000", "Bearer t0k", "nope", 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAgent()
			h := Handler(Options{Agent: a, Token: tc.token})
			code, body := do(t, h, "POST", "/v1/jobs/"+tc.job+"/step-down", tc.remote, tc.auth)
			if code != tc.want {
				t.Fatalf("status %d (%s), want %d", code, body, tc.want)
			}
			if stepped := len(a.steppedD) == 1; stepped != (tc.want == 202) {
				t.Errorf("step-down reached the agent: %v, want %v", stepped, tc.want == 202)
			}
			if strings.Contains(body, tc.token) && tc.token != "" {
				t.Errorf("response echoes the token: %s", body)
			}
		})
	}
	if code, _ := do(t, Handler(Options{Agent: newAgent()}), "GET", "/v1/jobs/billing/step-down", "127.0.0.1:1", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET on step-down: %d, want 405", code)
	}
}

// A loop that ends no lease operation, answered or not, for 3 ttl + 3
// retry_every (51s here) is stuck: /healthz fails, naming it.
func TestHealthzFailsWhenALoopIsWedged(t *testing.T) {
	a := newAgent()
	clock := now
	h := Handler(Options{Agent: a, Now: func() time.Time { return clock }})
	if code, body := do(t, h, "GET", "/healthz", "", ""); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("healthy agent: %d %s", code, body)
	}
	clock = now.Add(49500 * time.Millisecond) // billing's last op is 51.5s old now, report's 50.5s
	code, body := do(t, h, "GET", "/healthz", "", "")
	if code != 503 || !strings.Contains(body, "billing: loop stuck") || strings.Contains(body, "report") {
		t.Errorf("wedged billing: %d %s, want 503 naming billing only", code, body)
	}
}

// A store that does not answer is not a stuck loop: its operations end in
// errors (LastAttempt moves), /healthz answers 200 and says since when the
// store is unreachable, so that the systemd watchdog and a liveness probe
// do not restart an agent that a restart would not help.
func TestHealthzTellsAStoreOutageFromAStuckLoop(t *testing.T) {
	a := newAgent()
	down := now.Add(-5 * time.Minute)
	for i := range a.jobs {
		a.jobs[i].LastLeaseOp = down
		a.jobs[i].LastAttempt = now.Add(-time.Second)
		a.jobs[i].StoreUnreachableSince = &down
		a.jobs[i].LastError = "dial tcp 10.0.0.5:5432: connection refused"
	}
	h := Handler(Options{Agent: a, Now: func() time.Time { return now }})
	code, body := do(t, h, "GET", "/healthz", "", "")
	if code != 200 || !strings.Contains(body, `"store_unreachable"`) ||
		!strings.Contains(body, "sql.main: store unreachable since 2026-11-22T11:55:00Z (5m0s ago, 2 job(s)): dial tcp 10.0.0.5:5432: connection refused") {
		t.Errorf("store down 5 minutes, loops turning: %d %s, want 200 store_unreachable naming sql.main once", code, body)
	}
}

func TestReadyz(t *testing.T) {
	a := newAgent()
	a.ready = false
	h := Handler(Options{Agent: a})
	if code, _ := do(t, h, "GET", "/readyz", "", ""); code != 503 {
		t.Errorf("not ready: %d, want 503", code)
	}
	a.ready = true
	if code, _ := do(t, h, "GET", "/readyz", "", ""); code != 200 {
		t.Errorf("ready: %d, want 200", code)
	}
}

// GET needs no authorization, so every answer is masked: a store's error in
// last_error and a rejected reload's error quote credentials as the store
// or the loader wrote them, JSON-escaped in the body.
func TestAnswersMaskSecrets(t *testing.T) {
	const sasToken = "sv=2022-11-02&sig=c4n4ry%2Bsig%3D"
	const password = `pa"ss<c4n4ry>`
	a := newAgent()
	a.jobs[0].LastError = `azureblob: acquire "billing": Put "http://h/c/billing?comp=lease&` + sasToken + `": connection refused`
	a.jobs[1].LastError = "sql: connect: password " + password + " rejected"
	rejected := ReloadStatus{Time: now, Error: "sql.main: cannot open: " + password}
	h := Handler(Options{Agent: a, Now: func() time.Time { return now },
		Reload:     func(context.Context, []config.Var) ReloadStatus { return rejected },
		LastReload: func() *ReloadStatus { return &rejected },
		Redact:     redact.New(sasToken, password)})
	for _, req := range []struct{ method, path string }{
		{"GET", "/v1/jobs"}, {"GET", "/v1/jobs/billing"}, {"GET", "/v1/jobs/report"},
		{"POST", "/v1/reload"}, {"GET", "/v1/reload"},
	} {
		code, body := do(t, h, req.method, req.path, "127.0.0.1:1", "")
		if strings.Contains(body, "c4n4ry") || !strings.Contains(body, redact.Mask) {
			t.Errorf("%s %s: %d %s\nwant the secrets masked", req.method, req.path, code, body)
		}
		var v any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Errorf("%s %s: the masked answer is not JSON: %v", req.method, req.path, err)
		}
	}
}

// Drain is guarded like step-down, reaches the agent, can be cancelled, and
// shows in GET /v1/agent; the history is readable without a token.
func TestDrainAgentHistory(t *testing.T) {
	a := newAgent()
	h := Handler(Options{Agent: a, Token: "t0k"})
	if code, body := do(t, h, "POST", "/v1/drain", "10.1.2.3:5000", ""); code != http.StatusUnauthorized || a.Info().Draining {
		t.Fatalf("drain without the token: %d %s, draining %v; want 401 and no drain", code, body, a.Info().Draining)
	}
	code, body := do(t, h, "POST", "/v1/drain", "10.1.2.3:5000", "Bearer t0k")
	if code != http.StatusOK || !strings.Contains(body, `"draining": true`) || !a.Info().Draining {
		t.Fatalf("drain: %d %s, draining %v", code, body, a.Info().Draining)
	}
	if code, body := do(t, h, "GET", "/v1/agent", "10.1.2.3:5000", ""); code != http.StatusOK || !strings.Contains(body, `"draining": true`) {
		t.Errorf("GET /v1/agent while draining: %d %s", code, body)
	}
	if code, body := do(t, h, "POST", "/v1/drain?cancel=maybe", "10.1.2.3:5000", "Bearer t0k"); code != http.StatusBadRequest || !a.Info().Draining {
		t.Errorf("drain?cancel=maybe: %d %s; want 400 and the drain kept", code, body)
	}
	if code, body := do(t, h, "POST", "/v1/drain?cancel=true", "10.1.2.3:5000", "Bearer t0k"); code != http.StatusOK || a.Info().Draining {
		t.Errorf("drain cancel: %d %s, draining %v", code, body, a.Info().Draining)
	}
	code, body = do(t, h, "GET", "/v1/jobs/billing/history", "10.1.2.3:5000", "")
	if code != http.StatusOK || !strings.Contains(body, `"reason": "elected"`) || !strings.Contains(body, `"token": 42`) {
		t.Errorf("history: %d %s", code, body)
	}
	if code, _ := do(t, h, "GET", "/v1/jobs/nope/history", "10.1.2.3:5000", ""); code != http.StatusNotFound {
		t.Errorf("history of an unknown job: %d, want 404", code)
	}
}

// triggerAgent is a jobsAgent that can run tasks now: report is a task job,
// billing is not, and nightly is a lock-mode task job this agent cannot run.
type triggerAgent struct {
	*jobsAgent
	asked []string
}

func (a *triggerAgent) Trigger(_ context.Context, job string) (uint64, error) {
	switch job {
	case "report":
		a.asked = append(a.asked, job)
		return 12, nil
	case "billing":
		return 0, fmt.Errorf("%w: job %q supervises a run command", agent.ErrNotTask, job)
	case "nightly":
		return 0, fmt.Errorf("%w: job %q runs in lock mode (the agent is draining)", agent.ErrCannotLead, job)
	}
	return 0, agent.ErrNoSuchJob
}

func TestTrigger(t *testing.T) {
	for _, tc := range []struct {
		name, job, remote, auth string
		want                    int
		body                    string
	}{
		{"a task job", "report", "10.1.2.3:5000", "Bearer t0k", 202, `"request": 12`},
		{"no token", "report", "127.0.0.1:5000", "", 401, "bearer token"},
		{"not a task job", "billing", "10.1.2.3:5000", "Bearer t0k", 409, "supervises a run command"},
		{"lock mode on an agent that does not compete", "nightly", "10.1.2.3:5000", "Bearer t0k", 409, "the agent is draining"},
		{"unknown job", "nope", "10.1.2.3:5000", "Bearer t0k", 404, `no job \"nope\"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &triggerAgent{jobsAgent: newAgent()}
			code, body := do(t, Handler(Options{Agent: a, Token: "t0k"}), "POST", "/v1/jobs/"+tc.job+"/trigger", tc.remote, tc.auth)
			if code != tc.want || !strings.Contains(body, tc.body) {
				t.Errorf("status %d %s, want %d with %s", code, body, tc.want, tc.body)
			}
			if asked := len(a.asked) == 1; asked != (tc.want == 202) {
				t.Errorf("the request reached the agent: %v, want %v", asked, tc.want == 202)
			}
		})
	}
	// An agent that cannot trigger (an embedding without the capability).
	if code, _ := do(t, Handler(Options{Agent: newAgent()}), "POST", "/v1/jobs/report/trigger", "127.0.0.1:1", ""); code != http.StatusNotImplemented {
		t.Errorf("trigger without the capability: %d, want 501", code)
	}
}

// A load balancer's health checks: /leader answers 200 only on the agent
// leading the job, /follower only on one that runs it without leading; no
// token is asked for, even from beyond loopback with a token configured,
// and the body carries nothing but the job and the state.
func TestLeaderFollowerChecks(t *testing.T) {
	a := newAgent()
	a.jobs = append(a.jobs,
		agent.JobStatus{Job: "audit", Provider: "sql.main", State: agent.StateCandidate, LastError: "dial tcp: connection refused"},
		agent.JobStatus{Job: "sync", Provider: "sql.main", State: agent.StateStopping, Leader: "web-1", Token: 9})
	h := Handler(Options{Agent: a, Token: "s3cret", Now: func() time.Time { return now }})
	for _, tc := range []struct {
		job              string
		leader, follower int
	}{
		{"billing", 200, 503}, // leads
		{"report", 503, 200},  // web-2 leads
		{"audit", 503, 200},   // no known leader: trying
		{"sync", 503, 503},    // stepping down: the work is being stopped
		{"nope", 404, 404},
	} {
		for _, c := range []struct {
			role string
			want int
		}{{"leader", tc.leader}, {"follower", tc.follower}} {
			for _, method := range []string{"GET", "HEAD"} {
				code, body := do(t, h, method, "/v1/jobs/"+tc.job+"/"+c.role, "192.0.2.7:4000", "")
				if code != c.want {
					t.Errorf("%s /v1/jobs/%s/%s from beyond loopback, no token: %d %s, want %d", method, tc.job, c.role, code, body, c.want)
				}
				if method == "HEAD" || code == 404 {
					continue
				}
				var got map[string]string
				if err := json.Unmarshal([]byte(body), &got); err != nil || len(got) != 2 || got["job"] != tc.job || got["state"] == "" {
					t.Errorf("GET /v1/jobs/%s/%s: body %s, want only job and state", tc.job, c.role, body)
				}
			}
		}
	}
	if code, body := do(t, h, "POST", "/v1/jobs/billing/leader", "", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /v1/jobs/billing/leader: %d %s, want 405", code, body)
	}
}

// GET / sends a browser to the status page; other unknown paths stay 404.
func TestRootRedirectsToUI(t *testing.T) {
	h := Handler(Options{Agent: newAgent(), Now: func() time.Time { return now }})
	req := httptest.NewRequest("GET", "/", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusFound || rec.Header().Get("Location") != "ui" {
		t.Errorf("GET /: %d Location %q, want 302 to ui", rec.Code, rec.Header().Get("Location"))
	}
	if loc, err := req.URL.Parse(rec.Header().Get("Location")); err != nil || loc.Path != "/ui" {
		t.Errorf("GET /: Location resolves to %v (%v), want /ui", loc, err)
	}
	if code, _ := do(t, h, "GET", "/nope", "", ""); code != 404 {
		t.Errorf("GET /nope: %d, want 404", code)
	}
}
