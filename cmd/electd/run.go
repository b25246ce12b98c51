package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/go-sql-driver/mysql"
	"github.com/hashicorp/go-hclog"
	goredis "github.com/redis/go-redis/v9"

	"github.com/electd/electd/actions/webhook"
	"github.com/electd/electd/agent"
	"github.com/electd/electd/api"
	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/redact"
	"github.com/electd/electd/metrics"
	"github.com/electd/electd/providers"
)

// cmdRun is `electd run`: load the configuration, run one election loop per
// job until SIGTERM or SIGINT, then stop children, release leases and exit 0.
// A second signal kills the children and exits at once.
func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("run")
	configs := fs.pathsFlag("config")
	unsafeConfig := fs.boolFlag("allow-unsafe-config")
	vars := fs.inputVars()
	pprofAddr := fs.stringFlag("pprof")
	pos, exit, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return exit
	}
	// A closed stdout or stderr (`electd run | tee log` and Ctrl-C, a
	// restarted journald) must not kill the agent with SIGPIPE before it
	// has released its leases: with a handler in place, writes fail with
	// EPIPE instead, and the logger drops them. A handler, unlike ignoring
	// the signal, is not inherited by the commands the agent starts.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	paths := append(*configs, pos...)
	if len(paths) == 0 {
		paths = stringList{"/etc/electd"}
	}
	if *pprofAddr != "" {
		// Before the configuration is read, so that its parsing shows in
		// the profiles too.
		if _, err := servePprof(*pprofAddr, stderr); err != nil {
			fmt.Fprintf(stderr, "electd run: -pprof: %v\n", err)
			return 2
		}
	}
	// -var-file paths are read again at each reload, from wherever the
	// agent's working directory is then.
	for i, v := range *vars {
		if v.File != "" {
			if abs, err := filepath.Abs(v.File); err == nil {
				(*vars)[i].File = abs
			}
		}
	}
	opts := loadOptions(paths)
	opts.AllowUnsafeFiles, opts.Vars = *unsafeConfig, *vars
	cfg, diags := loadLean(paths, opts)
	if diags.HasErrors() {
		diags.WriteText(stderr)
		fmt.Fprintln(stderr, "electd run: the configuration is invalid; nothing started")
		return 1
	}
	diags.WriteText(stderr) // warnings, if any

	// Every line the agent logs and every API answer is masked with the
	// configuration's secrets; a reload adds the new configuration's.
	secrets := redact.New(cfg.Secrets...)
	log := newLogger(cfg.Agent, secrets.Writer(stderr))
	// go-redis logs failed dials through a logger of its own; route it
	// into ours so log_format = "json" holds for every line.
	goredis.SetLogger(redisLog{log.Named("provider.redis")})
	// Go's log package and the MySQL driver write to stderr on their own;
	// their lines pass through the same masking, in their own format.
	stdlog.SetOutput(secrets.Writer(stderr))
	mysql.SetLogger(stdlog.New(secrets.Writer(stderr), "[mysql] ", stdlog.LstdFlags))
	logFileLimit(cfg, log)
	m := metrics.New(releaseVersion(), buildCommit())
	shim, shimWhat := locateShim()
	if shim == "" {
		log.Warn("no /proc: commands run without the parent-death supervisor")
	} else {
		log.Debug("commands run under the shim", "shim", shimWhat)
	}
	hooks := webhook.New(webhook.Options{
		Logger:   log.Named("webhook"),
		Version:  releaseVersion(),
		OnResult: func(job, event, result string) { m.ActionRuns.WithLabelValues(job, event, "webhook", result).Inc() },
	})
	a, err := agent.New(cfg, agent.Options{
		Logger:   log.Named("agent"),
		Webhooks: hooks,
		Metrics:  m,
		Shim:     shim,
		Redact:   secrets,
		Open: func(ctx context.Context, p config.Provider) (providers.Provider, error) {
			prov, err := p.Settings.Open(ctx, log.Named("provider").With("provider", p.Ref()))
			if err != nil {
				return nil, err
			}
			return m.Instrument(p.Ref(), prov), nil
		},
	})
	if err != nil {
		log.Error("cannot start", "error", err)
		return 1
	}

	rl := &reloader{paths: paths, vars: *vars, allowPerm: *unsafeConfig, agent: a, log: log.Named("reload"), secrets: secrets}

	// The API listens before READY=1, so a unit ordered after electd finds it.
	var srv *http.Server
	if cfg.Agent.Listen != "" {
		ln, err := net.Listen("tcp", cfg.Agent.Listen)
		if err != nil {
			log.Error("cannot listen for the API", "listen", cfg.Agent.Listen, "error", err)
			return 1
		}
		srv = api.Server(api.Handler(api.Options{Agent: a, Token: cfg.Agent.APIToken,
			Metrics: m.Handler(), Logger: log.Named("api"), Reload: rl.reload, LastReload: rl.lastReload, Plan: rl.plan, Redact: secrets}),
			api.DefaultLimits)
		go func() {
			if err := srv.Serve(api.Listener(ln, api.DefaultLimits)); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("api server stopped", "error", err)
			}
		}()
		log.Info("api listening", "address", ln.Addr().String())
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	stopAt := make(chan time.Time, 1) // when the graceful stop began
	go func() {
		stopping := false
		for sig := range sigs {
			switch {
			case sig == syscall.SIGHUP && stopping:
				log.Info("received SIGHUP while stopping: ignored")
			case sig == syscall.SIGHUP:
				log.Info("received SIGHUP: reloading the configuration")
				go rl.reload(ctx, nil)
			case !stopping:
				stopping = true
				stopAt <- time.Now()
				log.Info("stopping: stopping children and releasing leases", "signal", sig.String())
				sdNotify(log, daemon.SdNotifyStopping)
				stop()
			default:
				log.Warn("second signal: killing children and exiting now", "signal", sig.String())
				a.Kill()
				os.Exit(1)
			}
		}
	}()

	go func() {
		for !a.Ready() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		sdNotify(log, daemon.SdNotifyReady)
		watchdog(ctx, log, func() bool { return len(agent.Wedged(a.Jobs(), time.Now())) == 0 })
	}()

	go limitMemory(ctx, log.Named("memory"))
	log.Info("electd started", "node", cfg.Agent.NodeID, "jobs", len(cfg.Jobs), "version", releaseVersion())
	runErr := a.Run(ctx)

	// shutdown_timeout bounds the whole stop, webhooks included: they get
	// what the jobs left of it (at least a second).
	began := time.Now()
	select {
	case began = <-stopAt:
	default:
	}
	deadline := began.Add(cfg.Agent.ShutdownTimeout)
	if time.Until(deadline) < time.Second {
		deadline = time.Now().Add(time.Second)
	}
	shutdownCtx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := hooks.Close(shutdownCtx); err != nil {
		log.Warn("webhooks left undelivered at shutdown", "error", err)
	}
	if srv != nil {
		srv.Shutdown(shutdownCtx)
	}
	if runErr != nil {
		log.Error("agent stopped with an error", "error", runErr)
		return 1
	}
	log.Info("electd stopped cleanly")
	return 0
}

// newLogger is the agent's one root logger. w must mask secrets (a
// redact.Set's Writer): hclog writes each line with one Write, at every
// level, whichever subsystem logs it, so masking there covers them all.
func newLogger(ac config.Agent, w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "electd",
		Level:      hclog.LevelFromString(ac.LogLevel),
		JSONFormat: ac.LogFormat == "json",
		Output:     w,
	})
}

// redisLog adapts go-redis's package logger to hclog.
type redisLog struct{ log hclog.Logger }

func (r redisLog) Printf(_ context.Context, format string, v ...any) {
	r.log.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
