package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/electd/electd/internal/teststore"
)

// timings of one job.
type timings struct {
	ttl, renew, retry, stop time.Duration
}

func (t timings) String() string {
	return fmt.Sprintf("ttl %s, renew %s, retry %s", t.ttl, t.renew, t.retry)
}

// target is one provider the failover suite runs electd on.
type target struct {
	name   string
	notify bool // wakes waiting candidates on release (SPEC §2)
	slow   bool // azure_blob: ttl of 15 s at least, so fewer crash runs
	// setup starts what the provider needs and returns its HCL block and
	// the environment the agents need.
	setup func(s *stores, suffix string) (block string, env []string, err error)
}

func randomSuffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func sqlBlock(driver, dsn, table string) string {
	return fmt.Sprintf("provider \"sql\" \"s\" {\n  driver = %q\n  dsn    = %q\n  table  = %q\n}\n", driver, dsn, table)
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// targets in the order they run: the slow one last.
func targets(dir string) []target {
	redis := func(n int) func(*stores, string) (string, []string, error) {
		return func(s *stores, suffix string) (string, []string, error) {
			addrs, err := s.redis(n)
			if err != nil {
				return "", nil, err
			}
			return fmt.Sprintf("provider \"redis\" \"r\" {\n  addresses = %s\n  prefix = %q\n}\n", quoteList(addrs), "bench-"+suffix+":"), nil, nil
		}
	}
	return []target{
		{name: "sqlite", setup: func(s *stores, suffix string) (string, []string, error) {
			return sqlBlock("sqlite", filepath.Join(dir, "sqlite-"+suffix+".db"), "electd_leases"), nil, nil
		}},
		{name: "postgres", notify: true, setup: func(s *stores, suffix string) (string, []string, error) {
			return sqlBlock("postgres", pgDSN, "electd_bench_"+suffix), nil, nil
		}},
		{name: "mysql", setup: func(s *stores, suffix string) (string, []string, error) {
			return sqlBlock("mysql", mysqlDSN, "electd_bench_"+suffix), nil, nil
		}},
		{name: "redis", notify: true, setup: redis(1)},
		{name: "redlock", notify: true, setup: redis(3)},
		{name: "etcd", notify: true, setup: func(s *stores, suffix string) (string, []string, error) {
			e, err := s.etcd()
			if err != nil {
				return "", nil, err
			}
			return fmt.Sprintf("provider \"etcd\" \"e\" {\n  endpoints = [%q]\n  prefix = %q\n}\n", e.endpoint, "/bench-"+suffix+"/"), nil, nil
		}},
		{name: "datastore", setup: func(s *stores, suffix string) (string, []string, error) {
			host, err := s.datastore()
			if err != nil {
				return "", nil, err
			}
			return fmt.Sprintf("provider \"datastore\" \"d\" {\n  project_id = \"electd-bench\"\n  namespace = %q\n}\n", "bench-"+suffix),
				[]string{"DATASTORE_EMULATOR_HOST=" + host}, nil
		}},
		{name: "mongodb", setup: func(s *stores, suffix string) (string, []string, error) {
			uri, err := s.ferretdb()
			if err != nil {
				return "", nil, err
			}
			return fmt.Sprintf("provider \"mongodb\" \"m\" {\n  uri = %q\n  database = %q\n}\n", uri, "bench_"+suffix), nil, nil
		}},
		{name: "azure_blob", slow: true, setup: func(s *stores, suffix string) (string, []string, error) {
			cs, err := s.azurite()
			if err != nil {
				return "", nil, err
			}
			return fmt.Sprintf("provider \"azure_blob\" \"a\" {\n  connection_string = %q\n  container = %q\n}\n", cs, "bench-"+suffix), nil, nil
		}},
	}
}

// electdKind runs `electd run` agents with one job, "worker", whose run
// block is the child script.
func electdKind(bin, providerBlock string, env []string, tm timings) kind {
	return kind{
		name: "electd",
		spawn: func(dir, node, childLog, script string) (*proc, error) {
			port, err := teststore.FreePort()
			if err != nil {
				return nil, err
			}
			cfg := fmt.Sprintf(`agent {
  node_id          = %q
  listen           = %q
  shutdown_timeout = "10s"
  log_level        = "warn"
}
%s
job "worker" {
  ttl         = %q
  renew_every = %q
  retry_every = %q
  run {
    command      = ["sh", %q, %q]
    stop_timeout = %q
  }
}
`, node, teststore.Addr(port), providerBlock, tm.ttl, tm.renew, tm.retry, script, childLog, tm.stop)
			path := filepath.Join(dir, node+".hcl")
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				return nil, err
			}
			p, err := startProc(node, filepath.Join(dir, node+".log"), env, bin, "run", "-config", path)
			if err != nil {
				return nil, err
			}
			p.api = "http://" + teststore.Addr(port)
			return p, nil
		},
		ready: func(ctx context.Context, dir string, p *proc) error {
			return waitHTTP(ctx, p, p.api+"/readyz")
		},
		crash: crashPid,
		term:  termPid,
	}
}

// waitHTTP polls url until it answers 200 or p exits.
func waitHTTP(ctx context.Context, p *proc, url string) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p.exited() {
			return fmt.Errorf("%s exited before it was ready: %v", p.node, p.err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w", p.node, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// failoverResult is one provider's row.
type failoverResult struct {
	target target
	tm     timings
	s      series
	err    error
}

func runFailover(ctx context.Context, o *options, st *stores, logf func(string, ...any)) []failoverResult {
	var out []failoverResult
	want := map[string]bool{}
	for _, n := range strings.Split(o.providers, ",") {
		want[strings.TrimSpace(n)] = true
	}
	for _, tg := range targets(o.work) {
		if !want[tg.name] || ctx.Err() != nil {
			continue
		}
		tm := o.tm
		crashRuns := o.runs
		if tg.slow {
			tm.ttl = o.azureTTL
			crashRuns = o.slowRuns
		}
		r := failoverResult{target: tg, tm: tm}
		suffix := randomSuffix()
		block, env, err := tg.setup(st, suffix)
		if err != nil {
			r.err = err
			logf("%s: %v", tg.name, err)
			out = append(out, r)
			continue
		}
		logf("failover: %s (%s), %d crash and %d handover runs", tg.name, tm, crashRuns, o.runs)
		k := electdKind(o.electd, block, env, tm)
		k.name = "electd/" + tg.name
		r.s = runSeries(ctx, k, filepath.Join(o.work, "failover-"+tg.name), crashRuns, o.runs,
			tm.ttl*3+10*time.Second, tm.ttl+tm.retry*3+10*time.Second, logf)
		out = append(out, r)
	}
	return out
}

func writeFailover(w io.Writer, rs []failoverResult) {
	t := &table{head: []string{"provider", "timings", "crash runs", "crash p50", "crash p99", "crash max",
		"crash p50 − ttl", "handover runs", "handover p50", "handover p99", "handover max", "notes"}}
	for _, r := range rs {
		if r.err != nil {
			t.add(r.target.name, r.tm.String(), "0", "—", "—", "—", "—", "0", "—", "—", "—", "not run: "+oneLine(r.err.Error()))
			continue
		}
		c, h := pcts(r.s.crash), pcts(r.s.handover)
		over := "—"
		if len(r.s.crash) > 0 {
			over = cell(r.s.crash.pct(50) - r.tm.ttl)
		}
		notify := "polls (retry_every)"
		if r.target.notify {
			notify = "notifies on release"
		}
		t.add(r.target.name, r.tm.String(),
			fmt.Sprintf("%d/%d", len(r.s.crash), r.s.crashWant), c[0], c[1], c[2], over,
			fmt.Sprintf("%d/%d", len(r.s.handover), r.s.termWant), h[0], h[1], h[2],
			notes(notify, r.s))
	}
	t.write(w)
}

// notes summarises what went wrong in a series, besides the figures.
func notes(first string, s series) string {
	ns := []string{}
	if first != "" {
		ns = append(ns, first)
	}
	if s.oldAlive > 0 {
		ns = append(ns, fmt.Sprintf("**old command still running at takeover in %d runs**", s.oldAlive))
	}
	if s.extra > 0 {
		ns = append(ns, fmt.Sprintf("%d unplanned leader changes", s.extra))
	}
	if n := len(s.failures); n > 0 {
		ns = append(ns, fmt.Sprintf("%d failed runs (first: %s)", n, oneLine(s.failures[0])))
	}
	return strings.Join(ns, "; ")
}

func oneLine(s string) string {
	s = firstLine(s)
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}
