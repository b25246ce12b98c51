package api

import (
	"context"
	"net/http"
	"time"
)

// ReloadStatus is the outcome of one configuration reload (SIGHUP or
// POST /v1/reload). A rejected configuration leaves the old one running.
type ReloadStatus struct {
	Time  time.Time `json:"time"`
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
	Changes
}

// reload runs a reload and answers 200 with its summary, or 422 when the
// new configuration was rejected.
func (s *server) reload(w http.ResponseWriter, r *http.Request) {
	if s.o.Reload == nil {
		s.writeError(w, http.StatusNotImplemented, "this agent cannot reload")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Minute)
	defer cancel()
	st := s.o.Reload(ctx)
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
