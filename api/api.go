package api

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/agent"
	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/redact"
)

// Agent is what the API needs of a running agent (agent.Agent).
type Agent interface {
	Jobs() []agent.JobStatus
	StepDown(ctx context.Context, job string) error
	Ready() bool // every job loop started
	Drain(on, force bool) []agent.DrainJob
	Info() agent.Info
	History(job string) ([]agent.Transition, error)
}

// Triggerer is an Agent that can run a task now (agent.Agent): POST
// /v1/jobs/{job}/trigger answers 501 without it.
type Triggerer interface {
	Trigger(ctx context.Context, job string) (uint64, error)
}

// TriggerResult is the answer of POST /v1/jobs/{job}/trigger: the request's
// number. The run for it is the job's task.last_run once its trigger is at
// least Request (requests made while a run is in progress share one run).
type TriggerResult struct {
	Job     string `json:"job"`
	Request uint64 `json:"request"`
}

// Options configure the handler.
type Options struct {
	Agent   Agent
	Token   string       // bearer token for POST endpoints; "" = POST only from loopback, same-origin (guard.go)
	Metrics http.Handler // served at /metrics when set
	Logger  hclog.Logger
	Now     func() time.Time
	// Reload reloads the configuration files (POST /v1/reload), with the
	// request's -var and -var-file when it has any; LastReload reports the
	// last outcome (GET /v1/reload).
	Reload     func(context.Context, []config.Var) ReloadStatus
	LastReload func() *ReloadStatus
	// Plan says what a reload from the configuration at paths (nil: the
	// agent's own), with vars over the agent's, would do, changing nothing
	// (POST /v1/plan).
	Plan func(ctx context.Context, paths []string, vars []config.Var) PlanStatus
	// Redact masks the configuration's secrets in every JSON answer: a
	// job's last_error and a reload's error quote what the store or the
	// loader said, and GET needs no authorization. Nil masks nothing.
	Redact *redact.Set
}

// Handler returns the API's routes.
func Handler(o Options) http.Handler {
	mux, _ := newRouter(o)
	return mux
}

// newRouter builds the API's mux, and says what it serves (the guard's
// tests send every state-changing route the requests it must refuse).
func newRouter(o Options) (*http.ServeMux, []route) {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &server{o}
	g := &guard{token: o.Token, formKey: rand.Text(), cop: http.NewCrossOriginProtection()}
	rt := &router{mux: http.NewServeMux(), g: g, s: s, ui: &ui{s: s, formKey: g.formKey}}
	rt.route("GET /v1/jobs", s.jobs)
	rt.route("GET /v1/jobs/{job}", s.job)
	rt.route("GET /v1/jobs/{job}/history", s.history)
	rt.route("GET /v1/jobs/{job}/leader", s.role(true))
	rt.route("GET /v1/jobs/{job}/follower", s.role(false))
	rt.route("POST /v1/jobs/{job}/step-down", s.stepDown)
	rt.route("POST /v1/jobs/{job}/trigger", s.trigger)
	rt.route("GET /v1/agent", s.agent)
	rt.route("POST /v1/drain", s.drain)
	rt.route("POST /v1/reload", s.reload)
	rt.route("GET /v1/reload", s.lastReload)
	rt.route("POST /v1/plan", s.plan)
	rt.route("GET /healthz", s.healthz)
	rt.route("GET /readyz", s.readyz)
	registerUI(rt) // the status page, /ui (ui.go)
	// A browser pointed at the agent's address lands on the status page.
	// Relative, so that it still works behind a proxy's path prefix.
	rt.route("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "ui")
		w.WriteHeader(http.StatusFound)
	})
	if o.Metrics != nil {
		rt.route("GET /metrics", o.Metrics.ServeHTTP)
	}
	return rt.mux, rt.routes
}

type server struct{ o Options }

func (s *server) jobs(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, http.StatusOK, s.o.Agent.Jobs())
}

func (s *server) job(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("job")
	for _, j := range s.o.Agent.Jobs() {
		if j.Job == name {
			s.writeJSON(w, http.StatusOK, j)
			return
		}
	}
	s.writeError(w, http.StatusNotFound, fmt.Sprintf("no job %q", name))
}

func (s *server) stepDown(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("job")
	err := s.o.Agent.StepDown(r.Context(), name)
	switch {
	case errors.Is(err, agent.ErrNoSuchJob):
		s.writeError(w, http.StatusNotFound, fmt.Sprintf("no job %q", name))
	case err != nil:
		s.writeError(w, http.StatusConflict, err.Error())
	default:
		s.o.Logger.Info("step-down requested through the API", "job", name, "remote", r.RemoteAddr)
		s.writeJSON(w, http.StatusAccepted, map[string]string{"job": name, "result": "stepping down"})
	}
}

// trigger asks for one run of a task job now, on whichever node leads it.
func (s *server) trigger(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("job")
	t, ok := s.o.Agent.(Triggerer)
	if !ok {
		s.writeError(w, http.StatusNotImplemented, "this agent cannot trigger tasks")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	n, err := t.Trigger(ctx, name)
	switch {
	case errors.Is(err, agent.ErrNoSuchJob):
		s.writeError(w, http.StatusNotFound, fmt.Sprintf("no job %q", name))
	case errors.Is(err, agent.ErrNotTask), errors.Is(err, agent.ErrCannotLead):
		s.writeError(w, http.StatusConflict, err.Error())
	case err != nil:
		s.writeError(w, http.StatusServiceUnavailable, err.Error())
	default:
		s.o.Logger.Info("task run requested through the API", "job", name, "request", n, "remote", r.RemoteAddr)
		s.writeJSON(w, http.StatusAccepted, TriggerResult{Job: name, Request: n})
	}
}

func (s *server) history(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("job")
	h, err := s.o.Agent.History(name)
	if err != nil {
		s.writeError(w, http.StatusNotFound, fmt.Sprintf("no job %q", name))
		return
	}
	s.writeJSON(w, http.StatusOK, h)
}

// role answers a load balancer's health check, as Patroni's /leader and
// /replica do: 200 on the agent that leads the job (leader) or on one that
// runs the job without leading it (follower, candidate), 503 otherwise
// (stopping counts as neither: the work is being stopped). Like every GET it
// needs no token, and the body says only the job and this agent's state.
func (s *server) role(leader bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("job")
		for _, j := range s.o.Agent.Jobs() {
			if j.Job != name {
				continue
			}
			ok := j.State == agent.StateLeader
			if !leader {
				ok = j.State == agent.StateFollower || j.State == agent.StateCandidate
			}
			code := http.StatusOK
			if !ok {
				code = http.StatusServiceUnavailable
			}
			s.writeJSON(w, code, map[string]string{"job": j.Job, "state": j.State})
			return
		}
		s.writeError(w, http.StatusNotFound, fmt.Sprintf("no job %q", name))
	}
}

func (s *server) agent(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, http.StatusOK, s.o.Agent.Info())
}

// DrainResult is the answer of POST /v1/drain.
type DrainResult struct {
	Draining bool `json:"draining"`
	// Leading is how many jobs this node led when asked; Jobs says what the
	// drain does with each: handed over to one of the agents that can lead
	// it now, or kept while none can (given up anyway with ?force=true).
	// GET /v1/jobs shows when another agent leads them.
	Leading int              `json:"leading"`
	Jobs    []agent.DrainJob `json:"jobs"`
}

// drain starts a drain, or cancels it with ?cancel=true; ?force=true gives
// up the jobs no other agent can lead.
func (s *server) drain(w http.ResponseWriter, r *http.Request) {
	on, force := true, false
	for _, q := range []struct {
		name string
		v    *bool
		set  bool
	}{{"cancel", &on, false}, {"force", &force, true}} {
		switch r.URL.Query().Get(q.name) {
		case "", "false", "0":
		case "true", "1":
			*q.v = q.set
		default:
			s.writeError(w, http.StatusBadRequest, q.name+" must be true or false")
			return
		}
	}
	jobs := s.o.Agent.Drain(on, force && on)
	s.o.Logger.Info("drain requested through the API", "draining", on, "force", force && on, "remote", r.RemoteAddr)
	s.writeJSON(w, http.StatusOK, DrainResult{Draining: on, Leading: len(jobs), Jobs: jobs})
}

// healthz fails when any job's loop is stuck (agent.Wedged): only then would
// a restart help. A store that does not answer is shown, with a 200: the
// agent works, and restarting it would not bring the store back.
func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	jobs, now := s.o.Agent.Jobs(), s.o.Now()
	if wedged := agent.Wedged(jobs, now); len(wedged) > 0 {
		s.writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "wedged", "jobs": wedged})
		return
	}
	if down := agent.StoreUnreachable(jobs, now); len(down) > 0 {
		s.writeJSON(w, http.StatusOK, map[string]any{"status": "store_unreachable", "stores": down})
		return
	}
	s.writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	if !s.o.Agent.Ready() {
		s.writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting"})
		return
	}
	s.writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// writeJSON is the only way an answer leaves the API, so every answer is
// masked: the encoded body as a whole, whatever field the text is in (the
// redactor knows a secret's JSON-escaped forms too).
func (s *server) writeJSON(w http.ResponseWriter, status int, v any) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.Encode(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, s.o.Redact.String(b.String()))
}

func (s *server) writeError(w http.ResponseWriter, status int, msg string) {
	s.writeJSON(w, status, map[string]string{"error": msg})
}
