package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/electd/electd/internal/cluster"
)

// contenderCluster is a cluster whose members start as argv(c, node), each
// in a process group of its own.
func contenderCluster(env func(node string) []string, argv func(c *cluster.Cluster, node string) []string) func(dir string) (*cluster.Cluster, error) {
	return func(dir string) (*cluster.Cluster, error) {
		return cluster.NewWith(dir, func(c *cluster.Cluster, node string) (*cluster.Agent, error) {
			return cluster.StartProcess(cluster.Spec{Name: node, Argv: argv(c, node), Env: env(node),
				LogPath: cluster.LogPath(c.Dir, node), Group: true})
		})
	}
}

// selfKind runs this binary as `contender -kind NAME` (see contender.go).
func selfKind(name, kindArg, store string, extra ...string) kind {
	self, _ := os.Executable()
	return kind{
		name: name,
		cluster: contenderCluster(func(string) []string { return nil }, func(c *cluster.Cluster, node string) []string {
			return append([]string{self, "contender", "-kind", kindArg, "-node", node, "-dir", c.Dir,
				"-log", c.Children.Path, "-script", c.Script, "-store", store}, extra...)
		}),
		ready: readyFile,
		crash: crashPid,
		term:  termPid,
	}
}

// etcdctlKind runs `etcdctl lock --ttl N NAME sh child.sh LOG`. A crash is
// kill -9 of etcdctl alone (its command is left running: that is the
// measured weakness); the graceful stop is SIGTERM to the process group, as
// Ctrl-C or systemd would send: the command exits, then etcdctl unlocks.
func etcdctlKind(endpoint string, ttl time.Duration) kind {
	secs := int((ttl + time.Second - 1) / time.Second)
	return kind{
		name: "etcdctl lock",
		cluster: contenderCluster(func(node string) []string { return []string{"ELECTD_NODE=" + node, "ETCDCTL_API=3"} },
			func(c *cluster.Cluster, node string) []string {
				return []string{"etcdctl", "--endpoints", endpoint, "lock", "--ttl", strconv.Itoa(secs), "anchor-etcdctl",
					"sh", c.Script, c.Children.Path}
			}),
		// etcdctl says nothing when it starts waiting; it is connected
		// well within this on loopback.
		ready: func(ctx context.Context, _ *cluster.Cluster, a *cluster.Agent) error {
			if !sleepCtx(ctx, 300*time.Millisecond) {
				return ctx.Err()
			}
			if a.Exited() {
				return fmt.Errorf("etcdctl exited: %v", a.Err())
			}
			return nil
		},
		crash: crashPid,
		term:  func(a *cluster.Agent) { a.SignalGroup(syscall.SIGTERM) },
	}
}

type anchorResult struct {
	tool, store, tm string
	how             string // the graceful release
	s               series
	err             error
}

func runAnchors(ctx context.Context, o *options, st *cluster.Stores, fo []failoverResult, logf func(string, ...any)) []anchorResult {
	var out []anchorResult
	etcd, err := st.Etcd()
	if err != nil {
		return []anchorResult{{tool: "etcd anchors", err: err}}
	}
	redis, err := st.Redis(1)
	if err != nil {
		return []anchorResult{{tool: "redis anchors", err: err}}
	}
	ttl := o.tm.TTL
	secs := (ttl + time.Second - 1) / time.Second * time.Second
	within := func(ttl time.Duration) time.Duration { return ttl*3 + 10*time.Second }

	// electd itself, on the same stores and timings: taken from the
	// failover suite of this run when it ran, else measured here.
	for _, name := range []string{"etcd", "redis"} {
		var got *failoverResult
		for i := range fo {
			if fo[i].name == name && fo[i].err == nil {
				got = &fo[i]
			}
		}
		if got == nil {
			rs := runFailover(ctx, &options{providers: name, runs: o.anchorRuns, slowRuns: o.slowRuns, tm: o.tm,
				work: o.work, electd: o.electd, settle: o.settle}, st, logf) // no -crash-retry series here
			if len(rs) == 1 {
				got = &rs[0]
			}
		}
		if got != nil {
			out = append(out, anchorResult{tool: "electd", store: name, tm: got.tm.String() + " (same run)", how: electdRelease, s: got.s, err: got.err})
		}
	}

	runs := o.anchorRuns
	add := func(tool, store, tm, how string, k kind, crashRuns, termRuns int, crashWithin, termWithin time.Duration) {
		if ctx.Err() != nil {
			return
		}
		logf("anchors: %s on %s (%s), %d crash and %d handover runs", tool, store, tm, crashRuns, termRuns)
		s := runSeries(ctx, k, filepath.Join(o.work, "anchor-"+k.name), crashRuns, termRuns, crashWithin, termWithin, o.settle, logf)
		out = append(out, anchorResult{tool: tool, store: store, tm: tm, how: how, s: s})
	}
	add("`etcdctl lock` (Debian etcd-client)", "etcd", fmt.Sprintf("session TTL %s (`--ttl %d`)", secs, int(secs/time.Second)),
		"SIGTERM to etcdctl's process group (its command exits, then it unlocks)", etcdctlKind(etcd, ttl), runs, runs, within(secs), 10*time.Second)
	k := selfKind("etcd-election", "etcd-election", etcd, "-ttl", ttl.String())
	add("etcd `concurrency.Election` (client v3.7)", "etcd", fmt.Sprintf("session TTL %s", secs),
		"`Election.Resign` on SIGTERM", k, runs, runs, within(secs), 10*time.Second)
	k = selfKind("redsync", "redsync", redis[0], "-ttl", ttl.String(), "-renew", o.tm.Renew.String())
	add("`go-redsync/redsync/v4`", "redis", fmt.Sprintf("expiry %s, extend every %s, 32 tries 50–250 ms apart", ttl, o.tm.Renew),
		"`Unlock` on SIGTERM", k, runs, runs, within(ttl), 10*time.Second)
	k = selfKind("client-go", "client-go", etcd)
	add("client-go leaderelection algorithm (own implementation over an etcd key, CAS on mod revision)", "etcd",
		"lease 15 s, renew deadline 10 s, retry 2 s, jitter 1.2, ReleaseOnCancel",
		"ReleaseOnCancel on SIGTERM", k, o.slowRuns, o.slowRuns, within(k8sLeaseDuration), k8sRetryPeriod*4+10*time.Second)
	return out
}

func writeAnchors(w io.Writer, rs []anchorResult) {
	t := &table{head: []string{"tool", "store", "timings", "crash runs", "crash p50", "crash p99", "crash max",
		"handover runs", "handover p50", "handover p99", "handover max", "notes"}}
	for _, r := range rs {
		if r.err != nil {
			t.add(r.tool, r.store, r.tm, "0", "—", "—", "—", "0", "—", "—", "—", "not run: "+oneLine(r.err.Error()))
			continue
		}
		c, h := pcts(r.s.crash), pcts(r.s.handover)
		t.add(r.tool, r.store, r.tm,
			fmt.Sprintf("%d/%d", len(r.s.crash), r.s.crashWant), c[0], c[1], c[2],
			fmt.Sprintf("%d/%d", len(r.s.handover), r.s.termWant), h[0], h[1], h[2],
			notes("", r.s))
	}
	t.write(w)
}

// writeHandover is the graceful handovers of one run side by side: electd
// on every provider the failover suite measured (or the anchors suite's own
// electd rows), then each anchor's documented release.
func writeHandover(w io.Writer, fo []failoverResult, an []anchorResult) {
	t := &table{head: []string{"tool", "store", "graceful stop", "runs", "handover p50", "handover p99", "handover max"}}
	add := func(tool, store, how string, s series) {
		h := pcts(s.handover)
		t.add(tool, store, how, fmt.Sprintf("%d/%d", len(s.handover), s.termWant), h[0], h[1], h[2])
	}
	seen := map[string]bool{}
	for _, r := range fo {
		if r.err == nil {
			add("electd", r.name, electdRelease, r.s)
			seen[r.name] = true
		}
	}
	for _, r := range an {
		if r.err != nil || (r.tool == "electd" && seen[r.store]) {
			continue
		}
		add(r.tool, r.store, r.how, r.s)
	}
	t.write(w)
}

// electdRelease is electd's graceful handover.
const electdRelease = "SIGTERM to the leading agent"
