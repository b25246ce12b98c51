package main

import (
	"fmt"

	"github.com/electd/electd/api"
	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/rlimit"
)

// fileLimit is this process's open-files limit and the estimate of what
// cfg's agent needs (internal/rlimit.Need, in docs/operations.md); short
// when the limit is below it.
func fileLimit(cfg *config.Config) (limit, need uint64, short bool) {
	conns := 0
	if cfg.Agent.Listen != "" {
		conns = api.MaxConns
	}
	need = rlimit.Need(len(cfg.Jobs), len(cfg.Providers), conns)
	_, limit, err := rlimit.OpenFiles()
	return limit, need, err == nil && limit < need
}

// fileLimitWarning is what `electd check` says of a short limit; "" when
// the limit is enough.
func fileLimitWarning(cfg *config.Config) string {
	limit, need, short := fileLimit(cfg)
	if !short {
		return ""
	}
	return fmt.Sprintf("Warning: the open-files limit here (RLIMIT_NOFILE) is %d, below the %d that %s and %s need "+
		"(docs/operations.md#open-files): an agent with this limit would fail to start commands and to open store "+
		"connections with \"too many open files\". The service's own limit is its unit's LimitNOFILE=; in a shell, ulimit -n.",
		limit, need, plural(len(cfg.Jobs), "job"), plural(len(cfg.Providers), "provider"))
}

// logFileLimit logs an ERROR at start when the agent's limit is short.
func logFileLimit(cfg *config.Config, log interface{ Error(string, ...any) }) {
	if limit, need, short := fileLimit(cfg); short {
		log.Error("the open-files limit is below what the jobs need: commands and store connections will fail with too many open files; raise LimitNOFILE= in the unit (or ulimit -n)",
			"limit", limit, "need", need, "jobs", len(cfg.Jobs), "providers", len(cfg.Providers))
	}
}
