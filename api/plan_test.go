package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/electd/electd/agent"
	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/redact"
)

func post(h http.Handler, path, auth, body string) (int, string) {
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.RemoteAddr = "10.1.2.3:5000"
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// POST /v1/plan is guarded like the other POSTs, takes absolute paths only
// (or none: the agent's own), answers 200 with the plan or 422 with why the
// configuration cannot be loaded, masked.
func TestPlanEndpoint(t *testing.T) {
	const secret = "c4n4ry-dsn-password"
	var got [][]string
	plan := func(_ context.Context, paths []string, _ []config.Var) PlanStatus {
		got = append(got, paths)
		if len(paths) > 0 && paths[0] == "/broken" {
			return PlanStatus{Paths: paths, Error: "/broken/a.hcl:3: Invalid DSN " + secret}
		}
		if paths == nil {
			paths = []string{"/etc/electd"}
		}
		return PlanStatus{Paths: paths, OK: true, Changes: ChangesOf(agent.Plan{
			Added: []string{"audit"}, Kept: []string{"steady"},
			Restarted: []agent.Change{{Job: "billing", Attributes: []string{"run.command"}}, {Job: "report"}},
		})}
	}
	h := Handler(Options{Agent: newAgent(), Token: "t0k", Plan: plan, Redact: redact.New(secret)})

	if code, _ := post(h, "/v1/plan", "", ""); code != http.StatusUnauthorized || len(got) != 0 {
		t.Fatalf("plan without the token: %d, %d calls; want 401 and none", code, len(got))
	}
	code, body := post(h, "/v1/plan", "Bearer t0k", "")
	var st PlanStatus
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != http.StatusOK {
		t.Fatalf("plan: %d %s (%v)", code, body, err)
	}
	if got[0] != nil || !st.OK || strings.Join(st.Restarted, ",") != "billing,report" || !st.Any() {
		t.Errorf("plan of the agent's own files: asked %q, answered %+v", got[0], st)
	}
	// Every list is a list, never null; a job restarted for its text alone
	// has an empty list of attributes.
	for _, field := range []string{`"removed": []`, `"agent_changes": []`, `"report": []`, `"billing": [`} {
		if !strings.Contains(body, field) {
			t.Errorf("answer lacks %s:\n%s", field, body)
		}
	}

	code, _ = post(h, "/v1/plan", "Bearer t0k", `{"paths": ["/srv/next", "/srv/more.hcl"]}`)
	if code != http.StatusOK || strings.Join(got[len(got)-1], " ") != "/srv/next /srv/more.hcl" {
		t.Errorf("plan of given paths: %d, asked %q", code, got[len(got)-1])
	}
	code, body = post(h, "/v1/plan", "Bearer t0k", `{"paths": ["/broken"]}`)
	if code != http.StatusUnprocessableEntity || strings.Contains(body, "c4n4ry") || !strings.Contains(body, `"ok": false`) {
		t.Errorf("plan of a broken configuration: %d %s; want 422, masked", code, body)
	}

	calls := len(got)
	for _, bad := range []string{`{"paths": ["etc/electd"]}`, `{"paths": [""]}`, `{"path": "/etc"}`, `[`, `{"paths": []} {}`,
		`{"paths": [` + strings.Repeat(`"/a",`, 64) + `"/a"]}`, `{"paths": ["/` + strings.Repeat("a", 70<<10) + `"]}`} {
		if code, body := post(h, "/v1/plan", "Bearer t0k", bad); code != http.StatusBadRequest {
			t.Errorf("plan %.40s: %d %s, want 400", bad, code, body)
		}
	}
	if len(got) != calls {
		t.Errorf("a bad request reached the agent")
	}
	if code, _ := post(Handler(Options{Agent: newAgent()}), "/v1/plan", "", ""); code != http.StatusForbidden {
		t.Errorf("plan from beyond loopback without a configured token: %d, want 403", code)
	}
}

// POST /v1/reload and /v1/plan pass -var and -var-file on to the agent in
// order, files as absolute paths only; a body without vars is nil (the
// variables used before), and a bad one never reaches the agent.
func TestReloadAndPlanVars(t *testing.T) {
	var reloads, plans [][]config.Var
	h := Handler(Options{Agent: newAgent(), Token: "t0k",
		Reload: func(_ context.Context, vars []config.Var) ReloadStatus {
			reloads = append(reloads, vars)
			return ReloadStatus{OK: true}
		},
		Plan: func(_ context.Context, paths []string, vars []config.Var) PlanStatus {
			plans = append(plans, vars)
			return PlanStatus{OK: true}
		}})
	if code, body := post(h, "/v1/reload", "Bearer t0k", ""); code != http.StatusOK || len(reloads) != 1 || reloads[0] != nil {
		t.Fatalf("reload without a body: %d %s, vars %v", code, body, reloads)
	}
	vars := `{"vars": [{"name": "shards", "value": "32"}, {"file": "/etc/electd/prod.electdvars"}, {"name": "shards", "value": "8"}]}`
	want := "[{shards 32 } {  /etc/electd/prod.electdvars} {shards 8 }]"
	if code, body := post(h, "/v1/reload", "Bearer t0k", vars); code != http.StatusOK || fmt.Sprint(reloads[1]) != want {
		t.Errorf("reload with vars: %d %s, vars %v, want %s", code, body, reloads[1:], want)
	}
	if code, body := post(h, "/v1/plan", "Bearer t0k", vars); code != http.StatusOK || len(plans) != 1 || fmt.Sprint(plans[0]) != want {
		t.Errorf("plan with vars: %d %s, vars %v, want %s", code, body, plans, want)
	}
	for _, bad := range []string{`{"vars": [{"file": "prod.electdvars"}]}`, `{"vars": [{"name": "1x", "value": "1"}]}`,
		`{"vars": [{"name": "a", "file": "/x"}]}`, `{"vars": [{"nom": "a"}]}`, `{"vars": [` + strings.Repeat(`{"name": "a"},`, 256) + `{"name": "a"}]}`} {
		for _, path := range []string{"/v1/reload", "/v1/plan"} {
			if code, body := post(h, path, "Bearer t0k", bad); code != http.StatusBadRequest {
				t.Errorf("%s %.50s: %d %s, want 400", path, bad, code, body)
			}
		}
	}
	if len(reloads) != 2 || len(plans) != 1 {
		t.Errorf("a bad request reached the agent: %d reloads, %d plans", len(reloads), len(plans))
	}
}
