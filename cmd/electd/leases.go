package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
)

// cmdLeases is `electd leases`: ask the providers directly who holds each
// job. It needs no running agent, only the configuration and the stores.
func cmdLeases(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("leases", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var paths stringList
	fs.Var(&paths, "config", "configuration file or directory (repeatable; default /etc/electd)")
	asJSON := fs.Bool("json", false, "print the leases as JSON")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the stores")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	paths = append(paths, fs.Args()...)
	if len(paths) == 0 {
		paths = stringList{"/etc/electd"}
	}
	cfg, diags := config.Load(paths)
	if diags.HasErrors() {
		diags.WriteText(stderr)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	type row struct {
		Job      string     `json:"job"`
		Provider string     `json:"provider"`
		Holder   string     `json:"holder"`
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
			if p, err = openProvider(ctx, spec, hclog.NewNullLogger()); err != nil {
				r.Error = err.Error()
				rows, failed = append(rows, r), true
				continue
			}
			opened[job.Provider] = p
		}
		l, err := p.Observe(ctx, job.Name)
		if err != nil {
			r.Error, failed = err.Error(), true
		} else {
			r.Holder, r.Token = l.Holder, l.Token
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
