package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/agent"
	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/redact"
	"github.com/electd/electd/providers"
)

// cmdLeases is `electd leases`: ask the providers directly who holds each
// job. It needs no running agent, only the configuration and the stores.
func cmdLeases(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("leases")
	configs := fs.pathsFlag("config")
	asJSON := fs.boolFlag("json")
	timeout := fs.durationFlag("timeout")
	unsafeConfig := fs.boolFlag("allow-unsafe-config")
	vars := fs.inputVars()
	pos, exit, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return exit
	}
	paths := append(*configs, pos...)
	defaulted := len(paths) == 0
	if defaulted {
		paths = stringList{defaultConfigDir}
		if _, err := os.Stat(defaultConfigDir); errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(stderr, "electd leases: there is no configuration at %s, where the package puts it: give the files the agents run with, electd leases -config PATH\n", defaultConfigDir)
			return 1
		}
	}
	opts := loadOptions(paths)
	opts.AllowUnsafeFiles, opts.Vars = *unsafeConfig, *vars
	cfg, diags := config.Load(paths, opts)
	if diags.HasErrors() {
		diags.WriteText(stderr)
		if hint := serviceEnvHint(diags, defaultEnvFile); hint != "" {
			fmt.Fprintln(stderr, hint)
		}
		return 1
	}
	// A store's error may quote its credentials; the table and JSON show
	// them masked, as the agent's log and API do.
	secrets := redact.New(cfg.Secrets...)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	type row struct {
		Job      string     `json:"job"`
		Provider string     `json:"provider"`
		Holder   string     `json:"holder"`            // the node_id
		Process  string     `json:"process,omitempty"` // the holding agent process's incarnation
		Token    uint64     `json:"token"`
		Expires  *time.Time `json:"expires"`
		Error    string     `json:"error,omitempty"`
	}
	opened := map[string]providers.Provider{}
	defer func() {
		for _, p := range opened {
			p.Close()
		}
	}()
	var rows []row
	failed := false
	for _, job := range cfg.Jobs {
		r := row{Job: job.Name, Provider: job.Provider}
		p, ok := opened[job.Provider]
		if !ok {
			spec, _ := cfg.Provider(job.Provider)
			var err error
			if p, err = openToObserve(ctx, spec.Settings); err != nil {
				r.Error = secrets.String(err.Error())
				rows, failed = append(rows, r), true
				continue
			}
			opened[job.Provider] = p
		}
		l, err := p.Observe(ctx, job.Name)
		if err != nil {
			r.Error, failed = secrets.String(err.Error()), true
		} else {
			r.Holder, r.Process = agent.SplitHolder(l.Holder)
			r.Token = l.Token
			if l.Holder != "" && !l.Expires.IsZero() {
				e := l.Expires
				r.Expires = &e
			}
		}
		rows = append(rows, r)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rows)
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "JOB\tPROVIDER\tHOLDER\tTOKEN\tEXPIRES")
		now := time.Now()
		for _, r := range rows {
			if r.Error != "" {
				fmt.Fprintf(tw, "%s\t%s\terror: %s\t\t\n", r.Job, r.Provider, r.Error)
				continue
			}
			holder := r.Holder
			if holder == "" {
				holder = "(free)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", r.Job, r.Provider, holder, r.Token, until(now, r.Expires))
		}
		tw.Flush()
	}
	if failed {
		return 1
	}
	return 0
}

// openToObserve opens a store to read its leases: read-only where the
// store can (a SQLite file is never created, nor a table), as an agent
// opens it otherwise.
func openToObserve(ctx context.Context, s providers.Settings) (providers.Provider, error) {
	if ro, ok := s.(providers.ReadOnlyOpener); ok {
		return ro.OpenReadOnly(ctx, hclog.NewNullLogger())
	}
	return s.Open(ctx, hclog.NewNullLogger())
}

// Where the package and `make install` put the configuration, and the
// service's environment (the unit's EnvironmentFile).
const (
	defaultConfigDir = "/etc/electd"
	defaultEnvFile   = "/etc/default/electd"
)

// serviceEnvHint tells the operator how to run a command with the
// service's environment when the configuration reads a variable that is
// set only there (a DSN in /etc/default/electd); "" when that is not the
// problem or there is no such file.
func serviceEnvHint(diags *config.Diagnostics, envFile string) string {
	unset := false
	for _, d := range diags.All() {
		unset = unset || d.Summary == "Environment variable not set"
	}
	if _, err := os.Stat(envFile); !unset || err != nil {
		return ""
	}
	return fmt.Sprintf("The service reads its environment from %s; to run this command with it (as root):\n  sudo sh -c 'set -a; . %s; exec electd leases'", envFile, envFile)
}
