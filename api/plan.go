package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/electd/electd/agent"
	"github.com/electd/electd/config"
)

// Changes is what a reload does, or would do, to the running jobs, by job
// name: the answer of POST /v1/plan and POST /v1/reload alike.
type Changes struct {
	Kept      []string `json:"kept"`
	Restarted []string `json:"restarted"`
	// Updated jobs keep running (leader, token, command, history): their
	// changes apply in place.
	Updated []string `json:"updated"`
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	// Attributes are, for each restarted or updated job, the attributes
	// whose values differ ("run.command", "sql.main.dsn"); an empty list
	// when only the text of its block changed. Never the values.
	Attributes map[string][]string `json:"changed_attributes"`
	// Agent names the agent block's attributes that differ from those the
	// agent started with: they need a restart of the agent.
	Agent []string `json:"agent_changes"`
}

// ChangesOf is a plan as the API shows it. Every list is non-nil, so that
// JSON shows [] rather than null.
func ChangesOf(p agent.Plan) Changes {
	c := Changes{Kept: nonNil(p.Kept), Added: nonNil(p.Added), Removed: nonNil(p.Removed),
		Restarted: []string{}, Updated: []string{}, Attributes: map[string][]string{}, Agent: nonNil(p.Agent)}
	for _, r := range p.Restarted {
		c.Restarted = append(c.Restarted, r.Job)
		c.Attributes[r.Job] = nonNil(r.Attributes)
	}
	for _, r := range p.Updated {
		c.Updated = append(c.Updated, r.Job)
		c.Attributes[r.Job] = nonNil(r.Attributes)
	}
	return c
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Any reports whether a job would start, stop or change.
func (c Changes) Any() bool { return len(c.Restarted)+len(c.Updated)+len(c.Added)+len(c.Removed) > 0 }

// PlanStatus is the answer of POST /v1/plan: what a reload of the
// configuration at Paths would do now. The agent reads and evaluates the
// files itself, with its own environment, as a reload would.
type PlanStatus struct {
	Paths []string `json:"paths"`
	OK    bool     `json:"ok"`
	// Error is why the configuration cannot be loaded: a line per problem,
	// without source snippets (`electd check` shows them).
	Error string `json:"error,omitempty"`
	Changes
}

// PlanRequest is the body of POST /v1/plan; an empty body is the agent's
// own configuration paths.
type PlanRequest struct {
	// Paths are absolute paths on the agent's machine, of files or
	// directories, as electd run -config takes them.
	Paths []string `json:"paths,omitempty"`
	// Vars are -var and -var-file, in order, over those the agent was
	// given; each file an absolute path on the agent's machine.
	Vars []config.Var `json:"vars,omitempty"`
}

// Bounds of a plan or reload request: what a configuration's paths and
// variables need, and no more.
const (
	maxPlanBody  = 64 << 10
	maxPlanPaths = 64
	maxVars      = 256
)

// plan answers 200 with what a reload would do, 422 when the configuration
// cannot be loaded, and 400 for a request it cannot take.
func (s *server) plan(w http.ResponseWriter, r *http.Request) {
	if s.o.Plan == nil {
		s.writeError(w, http.StatusNotImplemented, "this agent cannot plan a reload")
		return
	}
	req, err := readPlanRequest(r.Body)
	if err != nil {
		s.writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	st := s.o.Plan(ctx, req.Paths, req.Vars)
	s.o.Logger.Debug("plan requested through the API", "ok", st.OK, "remote", r.RemoteAddr)
	if !st.OK {
		s.writeJSON(w, http.StatusUnprocessableEntity, st)
		return
	}
	s.writeJSON(w, http.StatusOK, st)
}

func readPlanRequest(body io.Reader) (PlanRequest, error) {
	var req PlanRequest
	if err := readBody(body, &req, `{"paths": ["/etc/electd"]}`); err != nil {
		return req, err
	}
	if len(req.Paths) > maxPlanPaths {
		return req, fmt.Errorf("at most %d paths", maxPlanPaths)
	}
	if err := checkVars(req.Vars); err != nil {
		return req, err
	}
	for _, p := range req.Paths {
		if !filepath.IsAbs(p) || strings.ContainsRune(p, 0) {
			// The agent's working directory means nothing to the client.
			return req, fmt.Errorf("%q is not an absolute path on the agent's machine", p)
		}
	}
	return req, nil
}

// checkVars checks the variables of a plan or reload request. Errors do not
// quote a value: it may be a secret.
func checkVars(vars []config.Var) error {
	if len(vars) > maxVars {
		return fmt.Errorf("at most %d vars", maxVars)
	}
	for _, v := range vars {
		switch {
		case v.File != "" && (v.Name != "" || v.Value != ""):
			return errors.New("a var is either a file or a name and a value")
		case v.File != "" && (!filepath.IsAbs(v.File) || strings.ContainsRune(v.File, 0)):
			return fmt.Errorf("the var file %q is not an absolute path on the agent's machine", v.File)
		case v.File == "":
			if _, err := config.ParseVar(v.Name + "=" + v.Value); err != nil {
				return fmt.Errorf("var: %v", err)
			}
		}
	}
	return nil
}

// readBody decodes the JSON body of a plan or reload request into req; an
// empty body leaves req as it is. example is a body of the right shape, for
// the error.
func readBody(body io.Reader, req any, example string) error {
	b, err := io.ReadAll(io.LimitReader(body, maxPlanBody+1))
	switch {
	case err != nil:
		return fmt.Errorf("cannot read the request: %v", err)
	case len(b) > maxPlanBody:
		return fmt.Errorf("the request is larger than %d bytes", maxPlanBody)
	case len(strings.TrimSpace(string(b))) == 0:
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		return fmt.Errorf("the request must be JSON such as %s: %v", example, err)
	}
	if dec.More() {
		return errors.New("the request holds more than one JSON value")
	}
	return nil
}
