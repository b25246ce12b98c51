package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/electd/electd/internal/cluster"
)

// electdKind runs `electd run` agents with one job, "worker", whose run
// block is the child script, each serving its API (its /readyz says when it
// campaigns) in a process group of its own.
func electdKind(bin string, p cluster.Provider, tm cluster.Timing) kind {
	return kind{
		name: "electd/" + p.Name,
		cluster: func(dir string) (*cluster.Cluster, error) {
			return cluster.New(dir, cluster.Options{Binary: bin, Provider: p, Timing: tm, API: true, Group: true,
				Agent: []string{cluster.Str("log_level", "warn")}})
		},
		ready: func(ctx context.Context, _ *cluster.Cluster, a *cluster.Agent) error { return a.WaitReady(ctx) },
		crash: crashPid,
		term:  termPid,
	}
}

// crashSeries is crash runs alone at another retry_every.
type crashSeries struct {
	tm cluster.Timing
	s  series
}

// failoverResult is one provider's row.
type failoverResult struct {
	name  string
	tm    cluster.Timing
	s     series
	retry []crashSeries // -crash-retry
	err   error
}

// slow is azure_blob: ttl of 15 s at least, so fewer crash runs.
func slow(name string) bool { return name == "azure_blob" }

func runFailover(ctx context.Context, o *options, st *cluster.Stores, logf func(string, ...any)) []failoverResult {
	var out []failoverResult
	want := map[string]bool{}
	for _, n := range strings.Split(o.providers, ",") {
		want[strings.TrimSpace(n)] = true
	}
	for _, name := range cluster.ProviderNames {
		if !want[name] || ctx.Err() != nil {
			continue
		}
		tm := o.tm
		crashRuns := o.runs
		if slow(name) {
			tm.TTL = o.azureTTL
			crashRuns = o.slowRuns
		}
		r := failoverResult{name: name, tm: tm}
		p, err := st.Provider(name, cluster.RandomSuffix())
		if err != nil {
			r.err = err
			logf("%s: %v", name, err)
			out = append(out, r)
			continue
		}
		logf("failover: %s (%s), %d crash and %d handover runs", name, tm, crashRuns, o.runs)
		r.s = runSeries(ctx, electdKind(o.electd, p, tm), filepath.Join(o.work, "failover-"+name), crashRuns, o.runs,
			crashWithin(tm), tm.TTL+tm.Retry*3+10*time.Second, o.settle, logf)
		for _, retry := range o.crashRetry {
			if ctx.Err() != nil || retry == tm.Retry {
				continue
			}
			rtm := tm
			rtm.Retry = retry
			logf("failover: %s (%s), %d crash runs", name, rtm, crashRuns)
			s := runSeries(ctx, electdKind(o.electd, p, rtm), filepath.Join(o.work, fmt.Sprintf("failover-%s-retry-%s", name, retry)),
				crashRuns, 0, crashWithin(rtm), 0, o.settle, logf)
			r.retry = append(r.retry, crashSeries{rtm, s})
		}
		out = append(out, r)
	}
	return out
}

func crashWithin(tm cluster.Timing) time.Duration { return tm.TTL*3 + tm.Retry*2 + 10*time.Second }

// overTTL is "p50 − ttl" and "p99 − ttl" of crash runs.
func overTTL(s sample, ttl time.Duration) (string, string) {
	if len(s) == 0 {
		return "—", "—"
	}
	return cell(s.pct(50) - ttl), cell(s.pct(99) - ttl)
}

func writeFailover(w io.Writer, rs []failoverResult) {
	t := &table{head: []string{"provider", "timings", "crash runs", "crash p50", "crash p99", "crash max",
		"crash p50 − ttl", "crash p99 − ttl", "handover runs", "handover p50", "handover p99", "handover max", "notes"}}
	for _, r := range rs {
		if r.err != nil {
			t.add(r.name, r.tm.String(), "0", "—", "—", "—", "—", "—", "0", "—", "—", "—", "not run: "+oneLine(r.err.Error()))
			continue
		}
		c, h := pcts(r.s.crash), pcts(r.s.handover)
		o50, o99 := overTTL(r.s.crash, r.tm.TTL)
		notify := "polls (retry_every)"
		if cluster.Notifies(r.name) {
			notify = "notifies on release"
			if r.name == "sqlite" {
				notify += " (file watch)"
			}
		}
		t.add(r.name, r.tm.String(),
			fmt.Sprintf("%d/%d", len(r.s.crash), r.s.crashWant), c[0], c[1], c[2], o50, o99,
			fmt.Sprintf("%d/%d", len(r.s.handover), r.s.termWant), h[0], h[1], h[2],
			notes(notify, r.s))
	}
	t.write(w)
}

// writeCrashRetry is the crash runs at the other retry_every values, beside
// the main table's, per provider.
func writeCrashRetry(w io.Writer, rs []failoverResult) {
	t := &table{head: []string{"provider", "timings", "crash runs", "crash p50", "crash p99", "crash max",
		"crash p50 − ttl", "crash p99 − ttl", "notes"}}
	rows := 0
	for _, r := range rs {
		if r.err != nil || len(r.retry) == 0 {
			continue
		}
		all := append([]crashSeries{{r.tm, r.s}}, r.retry...)
		for _, cs := range all {
			c := pcts(cs.s.crash)
			o50, o99 := overTTL(cs.s.crash, cs.tm.TTL)
			t.add(r.name, cs.tm.String(), fmt.Sprintf("%d/%d", len(cs.s.crash), cs.s.crashWant), c[0], c[1], c[2], o50, o99,
				notes("", cs.s))
			rows++
		}
	}
	if rows == 0 {
		fmt.Fprintln(w, "No crash runs at another retry_every (`-crash-retry` empty, or no provider ran).")
		fmt.Fprintln(w)
		return
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
