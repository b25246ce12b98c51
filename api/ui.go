package api

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/electd/electd/agent"
)

// The status page at /ui: the agent and its jobs as an operator looks at
// them in a browser. It is rendered on the server from the same data as the
// JSON answers, passed through the same redaction, and needs no JavaScript
// and nothing from outside the agent: the style and the small script that
// refreshes the tables in place are inline, allowed by their hashes in the
// page's Content-Security-Policy.
//
// Looking needs no token. The step-down and drain buttons are plain forms
// that POST to /ui/step-down and /ui/drain, through the same guard as the
// API's POST endpoints (guard.go), at its form door: the api_token typed
// into the page, or without one a per-agent form value; and the page may
// not be framed.

//go:embed ui
var uiFiles embed.FS

// The page's parts, parsed once; the hashes are those of the inline style
// and script, for the Content-Security-Policy.
var (
	uiTemplate = template.Must(template.New("page.html").ParseFS(uiFiles, "ui/page.html"))
	uiCSS      = template.CSS(uiRead("ui/style.css"))
	uiJS       = template.JS(uiRead("ui/refresh.js"))
	uiCSP      = fmt.Sprintf("default-src 'none'; style-src '%s'; script-src '%s'; connect-src 'self'; img-src data:; "+
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'", uiHash(string(uiCSS)), uiHash(string(uiJS)))
)

func uiRead(name string) string {
	b, err := uiFiles.ReadFile(name)
	if err != nil {
		panic(err) // embedded: cannot happen in a built binary
	}
	return string(b)
}

func uiHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// uiRefresh is how often the page refreshes itself, in seconds.
const uiRefresh = 5

// uiHistory is how many transitions the page shows per job, newest first.
const uiHistory = 10

type ui struct {
	s *server
	// formKey is sent with the forms when no api_token is configured: a
	// page of another site cannot read it, so cannot make a loopback
	// browser post a form that carries it.
	formKey string
}

// registerUI adds the status page's routes; its forms go through the
// guard's form door (guard.go).
func registerUI(rt *router) {
	u := rt.ui
	rt.route("GET /ui", u.page)
	rt.route("GET /ui/{$}", u.page)
	rt.handle("POST /ui/step-down", formDoor, u.stepDown)
	rt.handle("POST /ui/drain", formDoor, u.drain)
}

// The page's data. Every string that came from the agent went through
// the redaction (view): html/template escapes it, and the escaped form of
// a secret is not one the redactor knows.
type uiPage struct {
	Node     string
	Tags     []uiTag
	Balance  bool
	Draining bool
	Leading  int
	Now      string // when the page was rendered, UTC
	Jobs     []uiJob

	// Self is the page's own URL and Sub the prefix of its forms' URLs,
	// relative to the page, so a proxy may serve it under a path prefix.
	Self, Sub string
	Refresh   int // seconds; 0 when paused (?refresh=0)

	CanAct    bool   // show the buttons
	NeedToken bool   // with a token field
	FormKey   string // without an api_token: the forms' hidden value
	ReadOnly  string // why the buttons are not shown
	Notice    string // what the last button did
	Error     string // why it was refused (the error page)

	CSS template.CSS
	JS  template.JS
}

type uiTag struct{ Key, Value string }

type uiJob struct {
	Name, Provider        string
	State, StateLabel     string
	Leader                string
	Token                 uint64
	Since, SinceTitle     string
	LeaseLeft, LeaseTitle string  // "" unless this node leads and knows the expiry
	LeaseFrac             float64 // time left as a fraction of the ttl
	Health, HealthTitle   string  // "" when the job has no check
	Competing             bool
	Waiting               string
	LastError             string
	Leads                 bool // a step-down button
	History               []uiTransition
	HistoryTotal          int
	Task                  *uiTask // nil when the job has no task
}

// uiTask is a task job's last and next run, as every node shows them.
type uiTask struct {
	Schedule                      string
	LastResult, LastTitle         string // "" when no run is known
	LastAgo, LastNode             string
	LastSuccess, LastSuccessTitle string
	Next, NextTitle               string
}

type uiTransition struct {
	Time, Title, Ago string
	Type, Reason     string
	Leader, Previous string
	Token            uint64
}

var stateLabels = map[string]string{agent.StateNotEligible: "not eligible"}

// view gathers the page's data from the agent.
func (u *ui) view(r *http.Request) uiPage {
	o := u.s.o
	red := o.Redact.String
	now := o.Now()
	info := o.Agent.Info()
	p := uiPage{Node: red(info.Node), Balance: info.Balance, Draining: info.Draining,
		Now: now.UTC().Format("2006-01-02 15:04:05 UTC"), Refresh: uiRefresh, CSS: uiCSS, JS: uiJS}
	for _, k := range slices.Sorted(maps.Keys(info.Tags)) {
		if k != "node" { // node_id is always the tag "node": shown as the title
			p.Tags = append(p.Tags, uiTag{red(k), red(info.Tags[k])})
		}
	}
	if r.URL.Query().Get("refresh") == "0" {
		p.Refresh = 0
	}
	if strings.HasSuffix(r.URL.Path, "/") {
		p.Self, p.Sub = "./", ""
	} else {
		p.Self, p.Sub = "ui", "ui/"
	}
	switch {
	case o.Token != "":
		p.CanAct, p.NeedToken = true, true
	case !loopbackRemote(r.RemoteAddr):
		p.ReadOnly = "Read-only: no api_token is configured, so only loopback clients may step down or drain."
	case !loopbackHost(r.Host):
		p.ReadOnly = "Read-only: open this page at a loopback address (127.0.0.1, [::1] or localhost) to use its buttons."
	default:
		p.CanAct, p.FormKey = true, u.formKey
	}

	for _, j := range o.Agent.Jobs() {
		v := uiJob{Name: red(j.Job), Provider: red(j.Provider), State: j.State, StateLabel: j.State,
			Leader: red(j.Leader), Token: j.Token, Competing: j.Competing, Waiting: red(j.Waiting),
			LastError: red(j.LastError), Leads: j.State == agent.StateLeader}
		if l, ok := stateLabels[j.State]; ok {
			v.StateLabel = l
		}
		if j.Since != nil && !j.Since.IsZero() {
			v.Since, v.SinceTitle = uiAgo(now, *j.Since), j.Since.UTC().Format(time.RFC3339)
		}
		if j.LeaseExpires != nil && j.State == agent.StateLeader {
			left := j.LeaseExpires.Sub(now)
			v.LeaseTitle = "expires " + j.LeaseExpires.UTC().Format(time.RFC3339Nano)
			if left > 0 {
				v.LeaseLeft = uiDuration(left)
			} else {
				v.LeaseLeft = "expired"
			}
			if j.TTL > 0 {
				v.LeaseFrac = min(max(float64(left)/float64(j.TTL), 0), 1)
			}
		}
		if h := j.Health; h != nil {
			v.Health = h.Status
			switch {
			case h.Status == agent.HealthFailing:
				v.HealthTitle = fmt.Sprintf("%d failures in a row: %s", h.ConsecutiveFailures, red(h.LastError))
			case h.LastCheck != nil:
				v.HealthTitle = fmt.Sprintf("%d successes in a row; last check %s", h.ConsecutiveSuccesses, uiAgo(now, *h.LastCheck))
			}
		}
		if t := j.Task; t != nil {
			v.Task = uiTaskOf(now, t, red)
		}
		if hist, err := o.Agent.History(j.Job); err == nil {
			v.HistoryTotal = len(hist)
			for i := len(hist) - 1; i >= 0 && len(v.History) < uiHistory; i-- {
				t := hist[i]
				v.History = append(v.History, uiTransition{
					Time: t.Time.UTC().Format("15:04:05"), Title: t.Time.UTC().Format(time.RFC3339Nano), Ago: uiAgo(now, t.Time),
					Type: strings.ReplaceAll(t.Type, "_", " "), Reason: red(t.Reason),
					Leader: red(t.Leader), Previous: red(t.PreviousLeader), Token: t.Token})
			}
		}
		if v.Leads {
			p.Leading++
		}
		p.Jobs = append(p.Jobs, v)
	}
	p.Notice = uiNotice(r.URL.Query(), p.Jobs)
	return p
}

// uiNotice says what the button the operator pressed did. The query names
// it (see uiRedirect) and only known values are shown: the page never
// repeats text from a URL someone else may have written.
func uiNotice(q url.Values, jobs []uiJob) string {
	switch q.Get("drain") {
	case "on":
		return "Drain requested."
	case "off":
		return "Drain cancelled: this agent competes for its jobs again."
	}
	if name := q.Get("stepped"); name != "" {
		for _, j := range jobs {
			if j.Name == name {
				return "Step-down of " + name + " requested: this node releases it and holds off for one ttl."
			}
		}
	}
	return ""
}

func (u *ui) page(w http.ResponseWriter, r *http.Request) {
	u.render(w, http.StatusOK, u.view(r))
}

func (u *ui) render(w http.ResponseWriter, status int, p uiPage) {
	var b bytes.Buffer
	if err := uiTemplate.Execute(&b, p); err != nil {
		u.s.o.Logger.Error("cannot render the status page", "error", err)
		http.Error(w, "cannot render the status page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", uiCSP)
	h.Set("X-Frame-Options", "DENY") // clickjacking: the buttons act for whoever looks
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// refuse answers a refused button with the page and the reason, not
// refreshing (its URL is the form's, which has no GET).
func (u *ui) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	p := u.view(r)
	p.Self, p.Sub, p.Refresh = "../ui", "", 0
	p.Notice, p.Error = "", msg
	u.render(w, status, p)
}

// uiRedirect sends the browser back to the page after a button worked (303,
// so that a reload does not post the form again). The path is relative,
// so a proxy may serve the page under a prefix.
func uiRedirect(w http.ResponseWriter, r *http.Request, query string) {
	if r.PostForm.Get("refresh") == "0" {
		query += "&refresh=0"
	}
	w.Header().Set("Location", "../ui?"+query)
	w.WriteHeader(http.StatusSeeOther)
}

func (u *ui) stepDown(w http.ResponseWriter, r *http.Request) {
	name := r.PostForm.Get("job")
	err := u.s.o.Agent.StepDown(r.Context(), name)
	switch {
	case errors.Is(err, agent.ErrNoSuchJob):
		u.refuse(w, r, http.StatusNotFound, fmt.Sprintf("Step-down refused: this agent runs no job %q.", u.s.o.Redact.String(name)))
	case err != nil:
		u.refuse(w, r, http.StatusConflict, "Step-down refused: "+u.s.o.Redact.String(err.Error()))
	default:
		u.s.o.Logger.Info("step-down requested through the status page", "job", name, "remote", r.RemoteAddr)
		uiRedirect(w, r, "stepped="+url.QueryEscape(name))
	}
}

func (u *ui) drain(w http.ResponseWriter, r *http.Request) {
	var on bool
	switch r.PostForm.Get("drain") {
	case "on":
		on = true
	case "off":
	default:
		u.refuse(w, r, http.StatusBadRequest, "Refused: drain must be on or off.")
		return
	}
	u.s.o.Agent.Drain(on, false)
	u.s.o.Logger.Info("drain requested through the status page", "draining", on, "remote", r.RemoteAddr)
	if on {
		uiRedirect(w, r, "drain=on")
	} else {
		uiRedirect(w, r, "drain=off")
	}
}

// uiAgo is how long before now t was: "just now", "4.2s ago", "3m12s ago".
func uiAgo(now, t time.Time) string {
	d := now.Sub(t)
	if d < time.Second {
		return "just now"
	}
	return uiDuration(d) + " ago"
}

// uiDuration is d in at most two units: 4.2s, 12s, 3m12s, 5h03m, 2d4h.
func uiDuration(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	case d < 48*time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
	default:
		d = d.Round(time.Hour)
		return fmt.Sprintf("%dd%dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	}
}

func uiTaskOf(now time.Time, t *agent.TaskStatus, red func(string) string) *uiTask {
	u := &uiTask{Schedule: red(t.Schedule)}
	if r := t.LastRun; r != nil {
		u.LastResult, u.LastNode = r.Result, red(r.Node)
		at := r.Slot
		if r.EndedAt != nil {
			at = *r.EndedAt
		} else if r.StartedAt != nil {
			at = *r.StartedAt
		}
		u.LastAgo = uiAgo(now, at)
		u.LastTitle = "slot " + r.Slot.UTC().Format(time.RFC3339)
		if r.ExitCode != nil {
			u.LastTitle += fmt.Sprintf(", exit code %d", *r.ExitCode)
		}
		if r.Why != "" {
			u.LastTitle += ": " + red(r.Why)
		}
	}
	if t.LastSuccessAt != nil {
		u.LastSuccess, u.LastSuccessTitle = uiAgo(now, *t.LastSuccessAt), t.LastSuccessAt.UTC().Format(time.RFC3339)
	}
	if t.NextRun != nil {
		u.Next, u.NextTitle = "in "+uiDuration(t.NextRun.Sub(now)), t.NextRun.UTC().Format(time.RFC3339)
	}
	return u
}
