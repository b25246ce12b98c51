package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/electd/electd/agent"
	"github.com/electd/electd/api"
	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/redact"
)

// reloader re-reads the configuration files for SIGHUP and POST /v1/reload,
// one reload at a time. A configuration that fails `check` is rejected and
// the running one stays.
type reloader struct {
	paths     []string
	vars      []config.Var // -var and -var-file of electd run
	allowPerm bool
	agent     *agent.Agent
	log       hclog.Logger
	secrets   *redact.Set // masks the log and the API; grows with each configuration loaded

	mu   sync.Mutex
	last *api.ReloadStatus
	// reloadVars are the -var and -var-file of the last accepted `electd
	// reload` that gave any: over run's, until another replaces them. They
	// have a lock of their own: a plan does not wait for a reload.
	varsMu     sync.Mutex
	reloadVars []config.Var
}

// varsFor are the variables of a reload or plan given vars (nil: none
// given, those used before).
func (r *reloader) varsFor(vars []config.Var) (all, given []config.Var) {
	r.varsMu.Lock()
	defer r.varsMu.Unlock()
	if vars == nil {
		vars = r.reloadVars
	}
	return append(append([]config.Var(nil), r.vars...), vars...), vars
}

// reload reloads the configuration, with vars over run's when given (the
// API's `electd reload -var`), or else with those used before (SIGHUP).
func (r *reloader) reload(ctx context.Context, vars []config.Var) (result api.ReloadStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sdNotify(r.log, reloadingState())
	defer sdNotify(r.log, daemon.SdNotifyReady)

	st := api.ReloadStatus{Time: time.Now()}
	defer func() { r.last = &st }()
	fail := func(err string) api.ReloadStatus {
		st.Error = err
		r.log.Error("reload rejected: the running configuration stays", "error", err)
		return st
	}
	// Whatever goes wrong in reading the new configuration, the agent and
	// the configuration it runs stay.
	defer func() {
		if p := recover(); p != nil {
			result = fail(fmt.Sprintf("internal error while reloading: %v", p))
		}
	}()
	opts := loadOptions(r.paths)
	opts.AllowUnsafeFiles = r.allowPerm
	opts.Vars, vars = r.varsFor(vars)
	cfg, diags := loadLean(r.paths, opts)
	if diags.HasErrors() {
		return fail(diagSummary(diags))
	}
	// Before anything can log about the new configuration. The old
	// secrets stay: a line about the old DSN may still come.
	r.secrets.Add(cfg.Secrets...)
	plan, err := r.agent.Reload(ctx, cfg)
	if err != nil {
		return fail(err.Error())
	}
	if len(plan.Agent) > 0 {
		r.log.Warn("the agent block changed; those settings take effect at the next restart", "attributes", strings.Join(plan.Agent, ", "))
	}
	st.OK = true
	r.varsMu.Lock()
	r.reloadVars = vars
	r.varsMu.Unlock()
	st.Changes = api.ChangesOf(plan)
	r.log.Info("configuration reloaded", "kept", len(st.Kept), "restarted", st.Restarted,
		"added", st.Added, "removed", st.Removed)
	return st
}

// plan loads the configuration at paths (nil: the agent's own) as a reload
// would, with the agent's environment, and says what a reload would do. It
// changes nothing, and does not wait for a reload under way: the plan is
// against the jobs running when it is made.
func (r *reloader) plan(_ context.Context, paths []string, vars []config.Var) (result api.PlanStatus) {
	if len(paths) == 0 {
		paths = r.paths
	}
	st := api.PlanStatus{Paths: paths}
	defer func() {
		if p := recover(); p != nil {
			st.Error = fmt.Sprintf("internal error while planning: %v", p)
			result = st
		}
	}()
	opts := loadOptions(r.paths) // the agent's own default, whatever paths are planned
	opts.AllowUnsafeFiles = r.allowPerm
	opts.Vars, _ = r.varsFor(vars)
	cfg, diags := config.Load(paths, opts)
	if diags.HasErrors() {
		st.Error = diagSummary(diags)
		return st
	}
	st.OK = true
	st.Changes = api.ChangesOf(r.agent.Plan(cfg))
	return st
}

func (r *reloader) lastReload() *api.ReloadStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// diagSummary is the errors on one line, each with its file and line,
// summary and detail (what to change: which type a variable wants, the
// error_message of a validation), without source snippets. The detail is
// masked as every diagnostic is.
func diagSummary(d *config.Diagnostics) string {
	var lines []string
	for _, diag := range d.All() {
		if diag.Severity != hcl.DiagError {
			continue
		}
		where := ""
		if diag.Subject != nil {
			where = fmt.Sprintf("%s:%d: ", diag.Subject.Filename, diag.Subject.Start.Line)
		}
		line := where + diag.Summary
		if detail := strings.Join(strings.Fields(diag.Detail), " "); detail != "" {
			line += ": " + detail
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "; ")
}
