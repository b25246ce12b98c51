package api

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/electd/electd/agent"
	"github.com/electd/electd/internal/redact"
)

// uiAgent is a fixed agent for the status page: jobs in every state, with
// a history each.
type uiAgent struct {
	mu       sync.Mutex
	jobs     []agent.JobStatus
	history  map[string][]agent.Transition
	stepped  []string
	draining bool
}

func (a *uiAgent) Jobs() []agent.JobStatus { a.mu.Lock(); defer a.mu.Unlock(); return a.jobs }
func (a *uiAgent) Ready() bool             { return true }
func (a *uiAgent) Drain(on, force bool) []agent.DrainJob {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.draining = on
	return []agent.DrainJob{{Job: "billing", Takers: []string{"web-2"}}}
}
func (a *uiAgent) Info() agent.Info {
	a.mu.Lock()
	defer a.mu.Unlock()
	return agent.Info{Node: "web-1", Tags: map[string]string{"node": "web-1", "zone": "eu-1"}, Draining: a.draining}
}
func (a *uiAgent) History(job string) ([]agent.Transition, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, j := range a.jobs {
		if j.Job == job {
			return a.history[job], nil
		}
	}
	return nil, agent.ErrNoSuchJob
}
func (a *uiAgent) StepDown(_ context.Context, job string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, j := range a.jobs {
		if j.Job == job {
			if j.State != agent.StateLeader {
				return fmt.Errorf("job %q is not led by this node", job)
			}
			a.stepped = append(a.stepped, job)
			return nil
		}
	}
	return agent.ErrNoSuchJob
}

func (a *uiAgent) steppedDown() []string { a.mu.Lock(); defer a.mu.Unlock(); return a.stepped }
func (a *uiAgent) isDraining() bool      { a.mu.Lock(); defer a.mu.Unlock(); return a.draining }

func newUIAgent() *uiAgent {
	since := now.Add(-3 * time.Minute)
	expires := now.Add(3200 * time.Millisecond)
	checked := now.Add(-2 * time.Second)
	return &uiAgent{
		jobs: []agent.JobStatus{
			{Job: "billing", Provider: "sql.main", State: agent.StateLeader, Leader: "web-1", Token: 42, Since: &since,
				LeaseExpires: &expires, TTL: 15 * time.Second, Eligible: true, Competing: true,
				Health: &agent.HealthStatus{Status: agent.HealthPassing, ConsecutiveSuccesses: 5, LastCheck: &checked}},
			{Job: "report", Provider: "sql.main", State: agent.StateFollower, Leader: "web-2", Token: 7, Since: &since,
				TTL: 15 * time.Second, Eligible: true, Competing: true, Task: reportTask()},
			{Job: "etl", Provider: "redis.r", State: agent.StateNotEligible, Leader: "web-3", Token: 3,
				Waiting: "not eligible: constraint role=batch does not match this node's tags (zone=eu-1)",
				Health:  &agent.HealthStatus{Status: agent.HealthFailing, ConsecutiveFailures: 3, LastError: "exit status 1"}},
		},
		history: map[string][]agent.Transition{
			"billing": {
				{Time: now.Add(-10 * time.Minute), Type: "leader_change", Leader: "web-2", Token: 41, Reason: agent.ReasonLeaderChange},
				{Time: now.Add(-3 * time.Minute), Type: "elected", Leader: "web-1", PreviousLeader: "web-2", Token: 42, Reason: agent.ReasonPreempted},
			},
			"report": {{Time: now.Add(-3 * time.Minute), Type: "leader_change", Leader: "web-2", Token: 7, Reason: agent.ReasonLeaderChange}},
		},
	}
}

// reportTask is a task job whose last run, on web-2, failed.
func reportTask() *agent.TaskStatus {
	started, ended, success, next := now.Add(-2*time.Hour), now.Add(-110*time.Minute), now.Add(-26*time.Hour), now.Add(22*time.Hour)
	code := 3
	return &agent.TaskStatus{Schedule: "30 2 * * *", LastSuccessAt: &success, NextRun: &next,
		LastRun: &agent.TaskRun{Slot: started, StartedAt: &started, EndedAt: &ended, ExitCode: &code, Result: agent.ResultFailed, Node: "web-2", Token: 7}}
}

// uiDo sends a request to h: form (when not nil) as a POST body, headers
// as given (Host sets the request's Host).
func uiDo(t *testing.T, h http.Handler, method, target, remote string, form url.Values, headers map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, target, body)
	req.Host = "127.0.0.1:8790"
	req.RemoteAddr = remote
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// row is the HTML of the job table's row for job.
func row(t *testing.T, page, job string) string {
	t.Helper()
	start := strings.Index(page, `<tr class="job" data-job="`+job+`"`)
	if start < 0 {
		t.Fatalf("no row for job %s in:\n%s", job, page)
	}
	end := strings.Index(page[start:], "</tr>")
	return page[start : start+end]
}

func TestUIShowsTheAgentAndEveryJob(t *testing.T) {
	h := Handler(Options{Agent: newUIAgent(), Token: "t0k", Now: func() time.Time { return now }})
	for _, path := range []string{"/ui", "/ui/"} {
		rec := uiDo(t, h, "GET", path, "10.1.2.3:5000", nil, nil)
		page := rec.Body.String()
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
			t.Fatalf("GET %s: %d %s\n%s", path, rec.Code, rec.Header().Get("Content-Type"), page)
		}
		for _, want := range []string{"<title>electd · web-1</title>", `<span class="tag">zone=eu-1</span>`} {
			if !strings.Contains(page, want) {
				t.Errorf("GET %s: no %q", path, want)
			}
		}
		for _, c := range []struct {
			job  string
			want []string
		}{
			{"billing", []string{"sql.main", `<span class="state leader">leader</span>`, "web-1", ">42<", "3m00s ago",
				`<span class="left">3.2s</span>`, `<span class="health passing"`, ">yes<", `name="job" value="billing"`}},
			{"report", []string{`<span class="state follower">follower</span>`, "web-2", ">7<", ">yes<"}},
			{"etl", []string{"redis.r", `<span class="state not_eligible">not eligible</span>`, "web-3",
				`<span class="health failing" title="3 failures in a row: exit status 1">`,
				"not eligible: constraint role=batch does not match this node&#39;s tags (zone=eu-1)"}},
		} {
			r := row(t, page, c.job)
			for _, w := range c.want {
				if !strings.Contains(r, w) {
					t.Errorf("GET %s: the row of %s has no %q:\n%s", path, c.job, w, r)
				}
			}
			if c.job != "billing" && strings.Contains(r, "<button") {
				t.Errorf("GET %s: a step-down button on %s, which this node does not lead:\n%s", path, c.job, r)
			}
			if c.job != "billing" && strings.Contains(r, `class="left"`) {
				t.Errorf("GET %s: time left on the lease of %s, which this node does not lead:\n%s", path, c.job, r)
			}
		}
		// History: a <details> per job, newest first, with the reasons.
		for _, want := range []string{
			`<details data-job="billing">`, "last: elected (preempted) 3m00s ago", "2 transitions",
			"<td>elected</td><td><span class=\"reason\">preempted</span></td><td>web-1</td><td>web-2</td>",
			"<td>leader change</td><td><span class=\"reason\">observed</span></td>",
			`<details data-job="etl">`, "No transition seen yet.",
		} {
			if !strings.Contains(page, want) {
				t.Errorf("GET %s: no %q in the history", path, want)
			}
		}
		// A task job's line: its last run, last success and next run.
		task := page[strings.Index(page, `<tr class="task">`):]
		task = task[:strings.Index(task, "</tr>")]
		for _, want := range []string{"<code>30 2 * * *</code>", `<span class="result failed" title="slot 2026-11-22T10:00:00Z, exit code 3">failed</span> on web-2 1h50m ago`,
			"last success <span", "26h00m ago", "next <span", "in 22h00m"} {
			if !strings.Contains(task, want) {
				t.Errorf("GET %s: the task line has no %q:\n%s", path, want, task)
			}
		}
		if strings.Count(page, `<tr class="task">`) != 1 {
			t.Errorf("GET %s: a task line for a job without a task", path)
		}
		if strings.Index(page, "<td>elected</td>") > strings.Index(page, "<td>leader change</td>") {
			t.Errorf("GET %s: history not newest first", path)
		}
	}
}

// The page refreshes itself: with JavaScript in place, without it by a
// <meta> refresh, which ?refresh=0 pauses (to type the token).
func TestUIRefresh(t *testing.T) {
	h := Handler(Options{Agent: newUIAgent(), Now: func() time.Time { return now }})
	page := uiDo(t, h, "GET", "/ui", "127.0.0.1:5000", nil, nil).Body.String()
	if !strings.Contains(page, `<noscript><meta http-equiv="refresh" content="5; url=ui"></noscript>`) ||
		!strings.Contains(page, `<body data-refresh="5">`) || !strings.Contains(page, `href="ui?refresh=0">pause</a>`) {
		t.Errorf("GET /ui: no refresh:\n%s", page)
	}
	page = uiDo(t, h, "GET", "/ui/", "127.0.0.1:5000", nil, nil).Body.String()
	if !strings.Contains(page, `content="5; url=./"`) {
		t.Errorf("GET /ui/: the refresh does not reload the page itself:\n%s", page)
	}
	page = uiDo(t, h, "GET", "/ui?refresh=0", "127.0.0.1:5000", nil, nil).Body.String()
	if strings.Contains(page, `http-equiv="refresh"`) || !strings.Contains(page, `<body data-refresh="0">`) ||
		!strings.Contains(page, `<input type="hidden" name="refresh" value="0">`) {
		t.Errorf("GET /ui?refresh=0 still refreshes:\n%s", page)
	}
}

// Job names and errors are the configuration's and the stores' text:
// html/template escapes them in every context.
func TestUIEscapes(t *testing.T) {
	const name = `x"><script>alert(1)</script>`
	a := newUIAgent()
	a.jobs[0].Job = name
	a.jobs[0].LastError = `sql: <img src=x onerror=alert(2)> & "quoted"`
	a.jobs[1].Leader = `<b>web-2</b>`
	a.history[name] = a.history["billing"]
	h := Handler(Options{Agent: a, Token: "t0k", Now: func() time.Time { return now }})
	page := uiDo(t, h, "GET", "/ui", "10.1.2.3:5000", nil, nil).Body.String()
	for _, bad := range []string{"<script>alert", "<img src=x", "<b>web-2", `x">`} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q unescaped:\n%s", bad, page)
		}
	}
	for _, want := range []string{
		`data-job="x&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`,
		`value="x&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`,
		`<code>sql: &lt;img src=x onerror=alert(2)&gt; &amp; &#34;quoted&#34;</code>`,
		`&lt;b&gt;web-2&lt;/b&gt;`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("no %q in:\n%s", want, page)
		}
	}
	// The hostile name posted back works as a name, nothing more.
	rec := uiDo(t, h, "POST", "/ui/step-down", "10.1.2.3:5000", url.Values{"token": {"t0k"}, "job": {name}}, nil)
	if rec.Code != http.StatusSeeOther || len(a.steppedDown()) != 1 || a.steppedDown()[0] != name {
		t.Errorf("step-down of %q: %d, stepped %q", name, rec.Code, a.steppedDown())
	}
	// The notice names a job only when the agent runs it: a link cannot
	// make the page say something of its author's.
	page = uiDo(t, h, "GET", "/ui?stepped="+url.QueryEscape(name), "10.1.2.3:5000", nil, nil).Body.String()
	if !strings.Contains(page, `Step-down of x&#34;&gt;&lt;script&gt;`) {
		t.Errorf("no notice after the step-down:\n%s", page)
	}
	page = uiDo(t, h, "GET", "/ui?stepped=Your+agent+is+compromised", "10.1.2.3:5000", nil, nil).Body.String()
	if strings.Contains(page, "compromised") || strings.Contains(page, `class="banner notice"`) {
		t.Errorf("the page repeats a notice from its URL:\n%s", page)
	}
}

// Nobody needs a token to look, so the page passes every string through
// the redaction the JSON answers get, before HTML escaping changes how a
// secret is written.
func TestUIRedactsSecrets(t *testing.T) {
	const password = `pa&ss<c4n4ry>`
	const sas = "sv=2022-11-02&sig=c4n4ry%2Bsig"
	a := newUIAgent()
	a.jobs[0].LastError = "sql: connect: password " + password + " rejected"
	a.jobs[1].LastError = `azureblob: Put "http://h/c/report?comp=lease&` + sas + `": refused`
	a.jobs[2].Health.LastError = "GET http://u:" + password + "@h/ready: refused"
	a.jobs[2].Waiting = "health check failing: " + password
	a.history["billing"][0].Reason = "lost: " + password
	h := Handler(Options{Agent: a, Token: "t0k", Now: func() time.Time { return now }, Redact: redact.New(password, sas)})
	for _, req := range []struct {
		method string
		form   url.Values
		path   string
	}{
		{"GET", nil, "/ui"},
		// A refused button shows the page too.
		{"POST", url.Values{"token": {"nope"}, "job": {"billing"}}, "/ui/step-down"},
	} {
		rec := uiDo(t, h, req.method, req.path, "10.1.2.3:5000", req.form, nil)
		page := rec.Body.String()
		if strings.Contains(page, "c4n4ry") || strings.Count(page, redact.Mask) < 5 {
			t.Errorf("%s %s: %d, want every secret masked (5 of them):\n%s", req.method, req.path, rec.Code, page)
		}
	}
}

// The page loads nothing from outside the agent: no URL with a scheme or
// a host in any attribute or style, and a Content-Security-Policy that
// allows only its own inline style and script, by their hashes.
func TestUIHasNoExternalAssets(t *testing.T) {
	h := Handler(Options{Agent: newUIAgent(), Token: "t0k", Now: func() time.Time { return now }})
	rec := uiDo(t, h, "GET", "/ui", "10.1.2.3:5000", nil, nil)
	page := rec.Body.String()
	if m := regexp.MustCompile(`(?i)https?://|(src|href|action|formaction)\s*=\s*["']?//|url\(|@import`).FindAllString(page, -1); len(m) > 0 {
		t.Errorf("external references %q in:\n%s", m, page)
	}
	for _, m := range regexp.MustCompile(`(?i)\s(src|href|action|formaction)="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if u, err := url.Parse(m[2]); err != nil || (u.Scheme != "" && u.Scheme != "data") || u.Host != "" {
			t.Errorf("%s=%q is not a relative URL", m[1], m[2])
		}
	}
	csp := rec.Header().Get("Content-Security-Policy")
	for _, el := range []struct{ tag, directive string }{{"style", "style-src"}, {"script", "script-src"}} {
		m := regexp.MustCompile(`(?s)<`+el.tag+`>(.*?)</`+el.tag+`>`).FindAllStringSubmatch(page, -1)
		if len(m) != 1 {
			t.Fatalf("want one <%s>, found %d", el.tag, len(m))
		}
		sum := sha256.Sum256([]byte(m[0][1]))
		if want := el.directive + " 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q does not allow the page's <%s> (%s)", csp, el.tag, want)
		}
	}
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "form-action 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q has no %q", csp, want)
		}
	}
	if rec.Header().Get("X-Frame-Options") != "DENY" {
		t.Errorf("the page may be framed (clickjacking its buttons): X-Frame-Options %q", rec.Header().Get("X-Frame-Options"))
	}
	if strings.Contains(page, " style=") {
		t.Error("a style attribute: the Content-Security-Policy blocks it")
	}
}

// The buttons act only with the token (or, without one configured, from a
// loopback page of this agent), and never for another site.
func TestUIButtons(t *testing.T) {
	const tok = "t0k-secret"
	type post struct {
		name, token, remote, path string
		form                      url.Values
		headers                   map[string]string
		want                      int
		stepped, draining         bool
	}
	sameOrigin := map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:8790"}
	withToken := func(v url.Values) url.Values { v.Set("token", tok); return v }
	cases := []post{
		{name: "step-down with the token", token: tok, remote: "10.1.2.3:5000", path: "/ui/step-down",
			form: withToken(url.Values{"job": {"billing"}}), headers: sameOrigin, want: 303, stepped: true},
		{name: "step-down from a client that sends no Sec-Fetch-Site nor Origin", token: tok, remote: "10.1.2.3:5000", path: "/ui/step-down",
			form: withToken(url.Values{"job": {"billing"}}), want: 303, stepped: true},
		{name: "wrong token", token: tok, remote: "127.0.0.1:5000", path: "/ui/step-down",
			form: url.Values{"token": {"t0k"}, "job": {"billing"}}, headers: sameOrigin, want: 401},
		{name: "no token", token: tok, remote: "127.0.0.1:5000", path: "/ui/step-down",
			form: url.Values{"job": {"billing"}}, headers: sameOrigin, want: 401},
		{name: "token as a bearer header, not in the form", token: tok, remote: "127.0.0.1:5000", path: "/ui/step-down",
			form: url.Values{"job": {"billing"}}, headers: map[string]string{"Authorization": "Bearer " + tok}, want: 401},
		{name: "token in the URL, not in the form", token: tok, remote: "127.0.0.1:5000", path: "/ui/step-down?token=" + tok,
			form: url.Values{"job": {"billing"}}, want: 401},
		{name: "the right token from another site", token: tok, remote: "127.0.0.1:5000", path: "/ui/step-down",
			form: withToken(url.Values{"job": {"billing"}}), headers: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}, want: 403},
		{name: "the right token from another origin of an old browser", token: tok, remote: "127.0.0.1:5000", path: "/ui/step-down",
			form: withToken(url.Values{"job": {"billing"}}), headers: map[string]string{"Origin": "http://evil.example"}, want: 403},
		{name: "step-down of a job this node does not lead", token: tok, remote: "10.1.2.3:5000", path: "/ui/step-down",
			form: withToken(url.Values{"job": {"report"}}), headers: sameOrigin, want: 409},
		{name: "step-down of an unknown job", token: tok, remote: "10.1.2.3:5000", path: "/ui/step-down",
			form: withToken(url.Values{"job": {"nope"}}), headers: sameOrigin, want: 404},
		{name: "drain with the token", token: tok, remote: "10.1.2.3:5000", path: "/ui/drain",
			form: withToken(url.Values{"drain": {"on"}}), headers: sameOrigin, want: 303, draining: true},
		{name: "drain without the token", token: tok, remote: "10.1.2.3:5000", path: "/ui/drain",
			form: url.Values{"drain": {"on"}}, headers: sameOrigin, want: 401},
		{name: "drain maybe", token: tok, remote: "10.1.2.3:5000", path: "/ui/drain",
			form: withToken(url.Values{"drain": {"maybe"}}), headers: sameOrigin, want: 400},
		{name: "no token configured, loopback page", remote: "127.0.0.1:5000", path: "/ui/step-down",
			form: url.Values{"job": {"billing"}, "form_key": {"KEY"}}, headers: sameOrigin, want: 303, stepped: true},
		{name: "no token configured, drain from the loopback page", remote: "[::1]:5000", path: "/ui/drain",
			form: url.Values{"drain": {"on"}, "form_key": {"KEY"}}, headers: map[string]string{"Host": "localhost:8790"}, want: 303, draining: true},
		{name: "no token configured, no form key", remote: "127.0.0.1:5000", path: "/ui/step-down",
			form: url.Values{"job": {"billing"}}, want: 403},
		{name: "no token configured, a wrong form key", remote: "127.0.0.1:5000", path: "/ui/drain",
			form: url.Values{"drain": {"on"}, "form_key": {"guess"}}, headers: sameOrigin, want: 403},
		{name: "no token configured, another site", remote: "127.0.0.1:5000", path: "/ui/drain",
			form: url.Values{"drain": {"on"}, "form_key": {"KEY"}}, headers: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: 403},
		{name: "no token configured, a name rebound to loopback", remote: "127.0.0.1:5000", path: "/ui/drain",
			form: url.Values{"drain": {"on"}, "form_key": {"KEY"}}, headers: map[string]string{"Host": "rebind.evil.example:8790", "Sec-Fetch-Site": "same-origin"}, want: 403},
		{name: "no token configured, remote client", remote: "10.1.2.3:5000", path: "/ui/step-down",
			form: url.Values{"job": {"billing"}, "form_key": {"KEY"}}, headers: sameOrigin, want: 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newUIAgent()
			h := Handler(Options{Agent: a, Token: tc.token, Now: func() time.Time { return now }})
			if tc.form.Get("form_key") == "KEY" {
				// The key the agent's own page carries.
				page := uiDo(t, h, "GET", "/ui", "127.0.0.1:5000", nil, nil).Body.String()
				m := regexp.MustCompile(`name="form_key" value="([^"]+)"`).FindStringSubmatch(page)
				if m == nil {
					t.Fatalf("no form key on the loopback page:\n%s", page)
				}
				tc.form.Set("form_key", m[1])
			}
			rec := uiDo(t, h, "POST", tc.path, tc.remote, tc.form, tc.headers)
			body := rec.Body.String()
			if rec.Code != tc.want {
				t.Fatalf("%d, want %d:\n%s", rec.Code, tc.want, body)
			}
			if got := len(a.steppedDown()) == 1; got != tc.stepped {
				t.Errorf("stepped down: %v, want %v", got, tc.stepped)
			}
			if a.isDraining() != tc.draining {
				t.Errorf("draining: %v, want %v", a.isDraining(), tc.draining)
			}
			if tc.token != "" && strings.Contains(body, tc.token) {
				t.Errorf("the answer repeats the token:\n%s", body)
			}
			switch {
			case rec.Code == http.StatusSeeOther:
				if loc := rec.Header().Get("Location"); !strings.HasPrefix(loc, "../ui?") {
					t.Errorf("Location %q, want back to the page", loc)
				}
			case !strings.Contains(body, `<p class="banner error" role="alert">`):
				t.Errorf("a refusal without its reason on the page:\n%s", body)
			case strings.Contains(body, `http-equiv="refresh"`):
				t.Errorf("the refusal page refreshes (its URL has no GET):\n%s", body)
			}
		})
	}
	if rec := uiDo(t, Handler(Options{Agent: newUIAgent()}), "GET", "/ui/step-down", "127.0.0.1:1", nil, nil); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET /ui/step-down: %d, want 405", rec.Code)
	}
}

// Which buttons a viewer sees: with a token, a token field and the buttons
// for everyone; without one, buttons on a loopback page only.
func TestUIButtonsShown(t *testing.T) {
	cases := []struct {
		name, token, remote, host string
		buttons, tokenField       bool
	}{
		{"token configured, remote viewer", "t0k", "10.1.2.3:5000", "agent.example:8790", true, true},
		{"token configured, loopback viewer", "t0k", "127.0.0.1:5000", "127.0.0.1:8790", true, true},
		{"no token, loopback viewer", "", "127.0.0.1:5000", "127.0.0.1:8790", true, false},
		{"no token, remote viewer", "", "10.1.2.3:5000", "agent.example:8790", false, false},
		{"no token, loopback viewer through another name", "", "127.0.0.1:5000", "rebind.evil.example:8790", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newUIAgent()
			h := Handler(Options{Agent: a, Token: tc.token, Now: func() time.Time { return now }})
			page := uiDo(t, h, "GET", "/ui", tc.remote, nil, map[string]string{"Host": tc.host}).Body.String()
			if got := strings.Contains(page, `value="billing"`) && strings.Contains(page, `Drain this agent</button>`); got != tc.buttons {
				t.Errorf("buttons shown: %v, want %v:\n%s", got, tc.buttons, page)
			}
			if got := strings.Contains(page, `name="token" type="password"`); got != tc.tokenField {
				t.Errorf("token field: %v, want %v", got, tc.tokenField)
			}
			if strings.Contains(page, "form_key") && tc.tokenField {
				t.Errorf("a form key beside the token field")
			}
			if !tc.buttons && !strings.Contains(page, "Read-only") {
				t.Errorf("no word on why the page is read-only:\n%s", page)
			}
			if tc.token != "" && strings.Contains(page, tc.token) {
				t.Errorf("the page shows the token")
			}
		})
	}
	// While draining, the button cancels, and a banner says so.
	a := newUIAgent()
	a.draining = true
	page := uiDo(t, Handler(Options{Agent: a, Now: func() time.Time { return now }}), "GET", "/ui", "127.0.0.1:5000", nil, nil).Body.String()
	if !strings.Contains(page, `name="drain" value="off"`) || !strings.Contains(page, "<strong>Draining.</strong>") {
		t.Errorf("draining agent:\n%s", page)
	}
}

func TestUIDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{3249 * time.Millisecond, "3.2s"}, {12400 * time.Millisecond, "12s"}, {192 * time.Second, "3m12s"},
		{5*time.Hour + 3*time.Minute + 20*time.Second, "5h03m"}, {52 * time.Hour, "2d4h"},
	} {
		if got := uiDuration(c.d); got != c.want {
			t.Errorf("uiDuration(%s) = %q, want %q", c.d, got, c.want)
		}
	}
}
