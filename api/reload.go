package api

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/electd/electd/config"
)

// ReloadStatus is the outcome of one configuration reload (SIGHUP or
// POST /v1/reload). A rejected configuration leaves the old one running.
type ReloadStatus struct {
	Time  time.Time `json:"time"`
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
	Changes
}

// ReloadRequest is the body of POST /v1/reload; an empty body reloads
// with the variables used before.
type ReloadRequest struct {
	// Vars are -var and -var-file, in order, over those the agent was
	// started with; they replace those of earlier reloads and stay for
	// later ones. Each file is an absolute path on the agent's machine.
	Vars []config.Var `json:"vars,omitempty"`
}

// reload runs a reload and answers 200 with its summary, 422 when the new
// configuration was rejected, and 400 for a request it cannot take.
func (s *server) reload(w http.ResponseWriter, r *http.Request) {
	if s.o.Reload == nil {
		s.writeError(w, http.StatusNotImplemented, "this agent cannot reload")
		return
	}
	req, err := readReloadRequest(r.Body)
	if err != nil {
		s.writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Minute)
	defer cancel()
	st := s.o.Reload(ctx, req.Vars)
	s.o.Logger.Info("reload requested through the API", "ok", st.OK, "remote", r.RemoteAddr)
	if !st.OK {
		s.writeJSON(w, http.StatusUnprocessableEntity, st)
		return
	}
	s.writeJSON(w, http.StatusOK, st)
}

// lastReload shows the outcome of the last reload, however it was asked for.
func (s *server) lastReload(w http.ResponseWriter, r *http.Request) {
	var st *ReloadStatus
	if s.o.LastReload != nil {
		st = s.o.LastReload()
	}
	if st == nil {
		s.writeError(w, http.StatusNotFound, "no reload since the agent started")
		return
	}
	s.writeJSON(w, http.StatusOK, st)
}

func readReloadRequest(body io.Reader) (ReloadRequest, error) {
	var req ReloadRequest
	if err := readBody(body, &req, `{"vars": [{"name": "shards", "value": "8"}]}`); err != nil {
		return req, err
	}
	return req, checkVars(req.Vars)
}
