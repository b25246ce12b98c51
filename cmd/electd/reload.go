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
	allowPerm bool
	agent     *agent.Agent
	log       hclog.Logger
	started   config.Agent // the agent block in force; it needs a restart to change
	secrets   *redact.Set  // masks the log and the API; grows with each configuration loaded

	mu   sync.Mutex
	last *api.ReloadStatus
}

func (r *reloader) reload(ctx context.Context) (result api.ReloadStatus) {
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
	opts := loadOptions()
	opts.AllowUnsafeFiles = r.allowPerm
	cfg, diags := config.Load(r.paths, opts)
	if diags.HasErrors() {
		return fail(diagSummary(diags))
	}
	// Before anything can log about the new configuration. The old
	// secrets stay: a line about the old DSN may still come.
	r.secrets.Add(cfg.Secrets...)
	if changed := agentBlockChanges(r.started, cfg.Agent); len(changed) > 0 {
		r.log.Warn("the agent block changed; those settings take effect at the next restart", "attributes", strings.Join(changed, ", "))
	}
	sum, err := r.agent.Reload(ctx, cfg)
	if err != nil {
		return fail(err.Error())
	}
	st.OK = true
	st.Kept, st.Restarted, st.Added, st.Removed = sum.Kept, sum.Restarted, sum.Added, sum.Removed
	r.log.Info("configuration reloaded", "kept", len(sum.Kept), "restarted", sum.Restarted,
		"added", sum.Added, "removed", sum.Removed)
	return st
}

func (r *reloader) lastReload() *api.ReloadStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// diagSummary is one line per error, without source snippets.
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
		lines = append(lines, where+diag.Summary)
	}
	return strings.Join(lines, "; ")
}

// agentBlockChanges names the agent attributes that differ. node_id is not
// compared: when it is not set, every load makes up a new one.
func agentBlockChanges(old, new config.Agent) []string {
	var out []string
	if old.Listen != new.Listen {
		out = append(out, "listen")
	}
	if old.APIToken != new.APIToken {
		out = append(out, "api_token")
	}
	if old.LogLevel != new.LogLevel {
		out = append(out, "log_level")
	}
	if old.LogFormat != new.LogFormat {
		out = append(out, "log_format")
	}
	if old.ShutdownTimeout != new.ShutdownTimeout {
		out = append(out, "shutdown_timeout")
	}
	return out
}
