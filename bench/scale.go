package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/electd/electd/internal/cluster"
	"github.com/electd/electd/internal/teststore"
)

// settle is the least pause between every job leading and the window.
const settle = 15 * time.Second

// scaleResult is one agent with n jobs on one store.
type scaleResult struct {
	store     string
	jobs      int
	tm        cluster.Timing
	window    time.Duration
	toLead    time.Duration // agent start → every job leading
	leading   int           // jobs leading when the window began
	heldAll   int           // jobs leading at both ends of the window with the same token
	demoted   float64       // electd_transitions_total{type="demoted"} over the window
	storeOps  *float64      // store-side requests (or transactions) per second; nil: no counter
	storeWhat string        // what storeOps counts
	storeCPU  float64       // store server CPU, cores
	renewed   float64       // store-side renewals per second
	renewWhat string
	agentOps  map[string]float64
	cpu       float64 // agent CPU, cores
	rss, hwm  int64   // bytes: mean VmRSS over the window, VmHWM at its end
	// The window's mean of RssAnon (the process's own memory: Go's heap
	// and runtime, SQLite's cache) and RssFile (pages of the binary and
	// other mapped files, shared and reclaimable), and the largest VmRSS
	// seen, sampled every second.
	anon, file, rssMax int64
	// goroutines is the agent's go_goroutines at the window's end, -1 when
	// its /metrics has none.
	goroutines float64
	err        error
}

func runScale(ctx context.Context, o *options, st *cluster.Stores, logf func(string, ...any)) []scaleResult {
	var out []scaleResult
	tm := cluster.Timing{TTL: o.scaleTTL, Renew: o.scaleRenew, Retry: o.scaleRetry}
	for _, store := range strings.Split(o.scaleStores, ",") {
		for _, js := range strings.Split(o.scaleJobs, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(js))
			if err != nil || n <= 0 || ctx.Err() != nil {
				continue
			}
			store = strings.TrimSpace(store)
			logf("scale: %s with %d jobs (%s), window %s", store, n, tm, o.scaleWindow)
			r := scaleOne(ctx, o, st, store, n, tm, logf)
			if r.err != nil {
				logf("scale %s %d: %v", store, n, r.err)
			}
			out = append(out, r)
		}
	}
	return out
}

// storeCounter reads a store-side counter of requests and the CPU time of
// the store's processes.
type storeCounter struct {
	what  string
	count func(ctx context.Context) (float64, error)
	// renewed counts lease renewals as the store sees them (rows or
	// leases), to check that every lease is really renewed.
	renewedWhat string
	renewed     func(ctx context.Context) (float64, error)
	cpu         func(ctx context.Context) (map[int]float64, error) // CPU seconds by pid
	close       func()
	none        bool // no counters: the store runs in the agent (SQLite)
}

// noCounter is a store without counters of its own.
func noCounter(what string) storeCounter {
	zero := func(context.Context) (float64, error) { return 0, nil }
	return storeCounter{what: what, none: true, count: zero, renewed: zero,
		cpu: func(context.Context) (map[int]float64, error) { return nil, nil }, close: func() {}}
}

func scaleOne(ctx context.Context, o *options, st *cluster.Stores, store string, n int, tm cluster.Timing, logf func(string, ...any)) scaleResult {
	r := scaleResult{store: store, jobs: n, tm: tm, window: o.scaleWindow}
	dir := filepath.Join(o.work, fmt.Sprintf("scale-%s-%d", store, n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.err = err
		return r
	}
	var block string
	var sc storeCounter
	switch store {
	case "sqlite":
		block = cluster.SQLBlock("sqlite", filepath.Join(dir, "leases.db"), "")
		sc = noCounter("none: SQLite runs in the agent's process")
	case "postgres":
		dsn, err := benchDatabase(ctx)
		if err != nil {
			r.err = err
			return r
		}
		table := "electd_scale_" + cluster.RandomSuffix()
		block = cluster.SQLBlock("postgres", dsn, table)
		sc, err = pgCounter(dsn, table)
		if err != nil {
			r.err = err
			return r
		}
	case "etcd":
		// An etcd of its own: its counters are this agent's alone.
		endpoint, proc, err := st.NewEtcd()
		if err != nil {
			r.err = err
			return r
		}
		defer proc.Stop()
		block = cluster.EtcdBlock("", []string{endpoint})
		sc = etcdCounter("http://"+endpoint, proc.Pid())
	default:
		r.err = fmt.Errorf("scale: unknown store %q (sqlite, postgres, etcd)", store)
		return r
	}
	defer sc.close()
	r.storeWhat, r.renewWhat = sc.what, sc.renewedWhat

	port, err := teststore.FreePort()
	if err != nil {
		r.err = err
		return r
	}
	blocks := []string{cluster.AgentBlock("scale", teststore.Addr(port), cluster.Str("log_level", "warn"),
		cluster.Str("shutdown_timeout", "60s")), block}
	for i := range n {
		blocks = append(blocks, cluster.LeaseJob(fmt.Sprintf("j%05d", i), tm))
	}
	cfg := filepath.Join(dir, "scale.hcl")
	if err := cluster.WriteConfig(cfg, blocks...); err != nil {
		r.err = err
		return r
	}
	started := time.Now()
	p, err := cluster.StartAgent(o.electd, "scale", cfg, dir, nil, teststore.Addr(port))
	if err != nil {
		r.err = err
		return r
	}
	defer p.Stop(90 * time.Second)
	api := "http://" + p.API

	// Wait until every job leads (or give up after o.scaleLeadWithin and
	// measure what there is).
	deadline := time.Now().Add(o.scaleLeadWithin)
	var jobs map[string]jobState
	for {
		if p.Exited() {
			r.err = fmt.Errorf("agent exited: %v\n%s", p.Err(), cluster.Tail(p.LogPath, 2000))
			return r
		}
		jobs, err = getJobs(ctx, api)
		if err == nil && leadingCount(jobs) == n {
			r.toLead = time.Since(started)
			break
		}
		if time.Now().After(deadline) {
			logf("scale %s %d: %d of %d jobs leading after %s; measuring anyway", store, n, leadingCount(jobs), n, o.scaleLeadWithin)
			break
		}
		if !sleepCtx(ctx, 500*time.Millisecond) {
			r.err = ctx.Err()
			return r
		}
	}
	r.leading = leadingCount(jobs)
	logf("scale %s %d: %d leading after %s", store, n, r.leading, time.Since(started).Round(time.Millisecond))
	// Settle past the burst of acquisitions: one renew period at least,
	// and 15 s, because an idle PostgreSQL backend publishes its pending
	// transaction counts up to 10 s late (PGSTAT_IDLE_INTERVAL): without
	// this the acquisitions would be counted inside the window.
	sleepCtx(ctx, max(tm.Renew, settle))

	// Window: counters at both ends.
	jobs0, err1 := getJobs(ctx, api)
	m0, err2 := getMetrics(ctx, api+"/metrics")
	s0, err3 := sc.count(ctx)
	rn0, _ := sc.renewed(ctx)
	scpu0, _ := sc.cpu(ctx)
	cpu0, err4 := procCPU(p.Pid())
	t0 := time.Now()
	if err := firstErr(err1, err2, err3, err4); err != nil {
		r.err = fmt.Errorf("window start: %w", err)
		return r
	}
	var mem memSamples
	for end := time.Now().Add(o.scaleWindow); time.Now().Before(end); {
		mem.add(p.Pid())
		if !sleepCtx(ctx, min(time.Second, time.Until(end))) {
			r.err = ctx.Err()
			return r
		}
	}
	jobs1, err1 := getJobs(ctx, api)
	m1, err2 := getMetrics(ctx, api+"/metrics")
	s1, err3 := sc.count(ctx)
	rn1, _ := sc.renewed(ctx)
	scpu1, _ := sc.cpu(ctx)
	// Processes present at both ends only (a backend may come or go).
	var scpu float64
	for pid, c1 := range scpu1 {
		if c0, ok := scpu0[pid]; ok {
			scpu += c1 - c0
		}
	}
	cpu1, err4 := procCPU(p.Pid())
	secs := time.Since(t0).Seconds()
	if err := firstErr(err1, err2, err3, err4); err != nil {
		r.err = fmt.Errorf("window end: %w", err)
		return r
	}
	mem.add(p.Pid())
	_, r.hwm = procMem(p.Pid())
	r.rss, r.anon, r.file, r.rssMax = mem.mean()
	r.goroutines = -1
	if hasMetric(m1, "go_goroutines") {
		r.goroutines = sumMetric(m1, "go_goroutines")
	}

	for name, j0 := range jobs0 {
		j1, ok := jobs1[name]
		if ok && j0.State == "leader" && j1.State == "leader" && j0.Token == j1.Token {
			r.heldAll++
		}
	}
	r.demoted = sumMetric(m1, "electd_transitions_total", `type="demoted"`) - sumMetric(m0, "electd_transitions_total", `type="demoted"`)
	if !sc.none {
		ops := (s1 - s0) / secs
		r.storeOps = &ops
	}
	r.renewed = (rn1 - rn0) / secs
	r.storeCPU = scpu / secs
	r.cpu = (cpu1 - cpu0) / secs
	r.agentOps = map[string]float64{}
	for _, op := range []string{"acquire", "renew", "release", "observe"} {
		sel := `op="` + op + `"`
		if d := sumMetric(m1, "electd_lease_op_seconds_count", sel) - sumMetric(m0, "electd_lease_op_seconds_count", sel); d > 0 {
			r.agentOps[op] = d / secs
		}
	}
	// Operations the agent may add (a batched renew, for instance) show up
	// under their own op label.
	for _, op := range opLabels(m1) {
		if _, known := r.agentOps[op]; known || op == "acquire" || op == "renew" || op == "release" || op == "observe" {
			continue
		}
		sel := `op="` + op + `"`
		if d := sumMetric(m1, "electd_lease_op_seconds_count", sel) - sumMetric(m0, "electd_lease_op_seconds_count", sel); d > 0 {
			r.agentOps[op] = d / secs
		}
	}
	return r
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

type jobState struct {
	Job   string `json:"job"`
	State string `json:"state"`
	Token uint64 `json:"token"`
}

func getJobs(ctx context.Context, api string) (map[string]jobState, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api+"/v1/jobs", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var js []jobState
	if err := json.NewDecoder(resp.Body).Decode(&js); err != nil {
		return nil, fmt.Errorf("decode /v1/jobs: %w", err)
	}
	m := make(map[string]jobState, len(js))
	for _, j := range js {
		m[j.Job] = j
	}
	return m, nil
}

func leadingCount(js map[string]jobState) int {
	n := 0
	for _, j := range js {
		if j.State == "leader" {
			n++
		}
	}
	return n
}

// metrics is a Prometheus text exposition, one sample per line.
type metrics []string

func getMetrics(ctx context.Context, url string) (metrics, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var m metrics
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); line != "" && line[0] != '#' {
			m = append(m, line)
		}
	}
	return m, sc.Err()
}

// sumMetric adds the samples of name whose labels contain every selector.
func sumMetric(m metrics, name string, selectors ...string) float64 {
	var sum float64
	for _, line := range m {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue // a longer name with this prefix
		}
		ok := true
		for _, s := range selectors {
			if !strings.Contains(rest, s) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		fs := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(fs) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fs[0], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// hasMetric reports whether m has a sample of name.
func hasMetric(m metrics, name string) bool {
	for _, line := range m {
		if rest, ok := strings.CutPrefix(line, name); ok && rest != "" && (rest[0] == '{' || rest[0] == ' ') {
			return true
		}
	}
	return false
}

// opLabels lists the op labels of electd_lease_op_seconds_count.
func opLabels(m metrics) []string {
	seen := map[string]bool{}
	for _, line := range m {
		if !strings.HasPrefix(line, "electd_lease_op_seconds_count{") {
			continue
		}
		if _, after, ok := strings.Cut(line, `op="`); ok {
			if op, _, ok := strings.Cut(after, `"`); ok {
				seen[op] = true
			}
		}
	}
	var out []string
	for op := range seen {
		out = append(out, op)
	}
	sort.Strings(out)
	return out
}

// procCPU is user+system CPU seconds of pid (/proc/PID/stat, fields 14 and
// 15, in clock ticks of 1/100 s on Linux).
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	rest := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	// rest[0] is field 3 (state); utime is field 14, stime field 15.
	if len(rest) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseFloat(rest[11], 64)
	st, err2 := strconv.ParseFloat(rest[12], 64)
	if err := firstErr(err1, err2); err != nil {
		return 0, err
	}
	return (ut + st) / 100, nil
}

// memSamples accumulates readings of /proc/PID/status.
type memSamples struct {
	n               int64
	rss, anon, file int64 // sums
	rssMax          int64
}

func (m *memSamples) add(pid int) {
	f := procStatus(pid)
	if f["VmRSS:"] == 0 {
		return // exited, or no /proc
	}
	m.n++
	m.rss += f["VmRSS:"]
	m.anon += f["RssAnon:"]
	m.file += f["RssFile:"]
	m.rssMax = max(m.rssMax, f["VmRSS:"])
}

// mean is the mean VmRSS, RssAnon and RssFile, and the largest VmRSS.
func (m *memSamples) mean() (rss, anon, file, rssMax int64) {
	if m.n == 0 {
		return 0, 0, 0, 0
	}
	return m.rss / m.n, m.anon / m.n, m.file / m.n, m.rssMax
}

// procStatus is the sizes of /proc/PID/status, in bytes, by field name
// ("VmRSS:").
func procStatus(pid int) map[string]int64 {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		if len(fs) == 3 && fs[2] == "kB" {
			kb, _ := strconv.ParseInt(fs[1], 10, 64)
			out[fs[0]] = kb * 1024
		}
	}
	return out
}

// procMem is VmRSS and VmHWM (peak RSS) of pid, in bytes.
func procMem(pid int) (rss, hwm int64) {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		if len(fs) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fs[1], 10, 64)
		switch fs[0] {
		case "VmRSS:":
			rss = kb * 1024
		case "VmHWM:":
			hwm = kb * 1024
		}
	}
	return rss, hwm
}

// pgCounter counts committed transactions of the bench database
// (pg_stat_database.xact_commit) and the CPU of its server backends.
func pgCounter(dsn, table string) (storeCounter, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return storeCounter{}, err
	}
	db.SetMaxOpenConns(1)
	return storeCounter{
		what: "transactions committed in the bench database (`pg_stat_database.xact_commit`; includes the bench's own 3 queries per sample; the window starts 15 s after the last acquisition because idle backends publish their counts up to 10 s late)",
		count: func(ctx context.Context) (float64, error) {
			// Statistics reach the view when a backend flushes them (at
			// most every second); forcing a snapshot refresh reads the
			// latest.
			if _, err := db.ExecContext(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
				return 0, err
			}
			var n float64
			err := db.QueryRowContext(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", benchDB).Scan(&n)
			return n, err
		},
		renewedWhat: "rows updated in the lease table (`pg_stat_user_tables.n_tup_upd`)",
		renewed: func(ctx context.Context) (float64, error) {
			var n float64
			err := db.QueryRowContext(ctx, "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = $1", table).Scan(&n)
			return n, err
		},
		cpu: func(ctx context.Context) (map[int]float64, error) {
			rows, err := db.QueryContext(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", benchDB)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			m := map[int]float64{}
			for rows.Next() {
				var pid int
				if rows.Scan(&pid) == nil {
					if c, err := procCPU(pid); err == nil {
						m[pid] = c
					}
				}
			}
			return m, rows.Err()
		},
		close: func() { db.Close() },
	}, nil
}

// etcdCounter counts the gRPC requests etcd received: unary calls handled
// plus messages on streams (LeaseKeepAlive, Watch), from etcd's /metrics.
func etcdCounter(base string, pid int) storeCounter {
	metric := func(name string) func(ctx context.Context) (float64, error) {
		return func(ctx context.Context) (float64, error) {
			m, err := getMetrics(ctx, base+"/metrics")
			if err != nil {
				return 0, err
			}
			return sumMetric(m, name), nil
		}
	}
	return storeCounter{
		what:        "gRPC messages received by etcd (`grpc_server_msg_received_total`: unary calls and stream messages such as LeaseKeepAlive)",
		count:       metric("grpc_server_msg_received_total"),
		renewedWhat: "leases renewed by the etcd server (`etcd_debugging_lease_renewed_total`)",
		renewed:     metric("etcd_debugging_lease_renewed_total"),
		cpu: func(ctx context.Context) (map[int]float64, error) {
			c, err := procCPU(pid)
			return map[int]float64{pid: c}, err
		},
		close: func() {},
	}
}

func writeScale(w io.Writer, rs []scaleResult) {
	t := &table{head: []string{"store", "jobs", "timings", "all leading after", "leases held through the window",
		"agent RSS holding", "agent peak RSS", "agent CPU", "goroutines", "agent lease ops/s",
		"store requests/s", "store-side renewals/s", "store CPU", "notes"}}
	for _, r := range rs {
		if r.err != nil {
			t.add(r.store, strconv.Itoa(r.jobs), r.tm.String(), "—", "—", "—", "—", "—", "—", "—", "—", "—", "—", "not measured: "+oneLine(r.err.Error()))
			continue
		}
		lead := "not all within the limit"
		if r.toLead > 0 {
			lead = cell(r.toLead.Round(100 * time.Millisecond))
		}
		var ops []string
		for _, op := range sortedKeys(r.agentOps) {
			ops = append(ops, fmt.Sprintf("%s %.1f", op, r.agentOps[op]))
		}
		held := fmt.Sprintf("%d/%d", r.heldAll, r.jobs)
		if r.demoted > 0 {
			held += fmt.Sprintf(" (%.0f demotions)", r.demoted)
		}
		gor := "missing (no go_goroutines in /metrics)"
		if r.goroutines >= 0 {
			gor = fmt.Sprintf("%.0f", r.goroutines)
		}
		storeOps, renewed, storeCPU := "—", "—", "—"
		if r.storeOps != nil {
			storeOps, renewed, storeCPU = fmt.Sprintf("%.1f", *r.storeOps), fmt.Sprintf("%.0f", r.renewed), fmt.Sprintf("%.0f %%", r.storeCPU*100)
		}
		note := fmt.Sprintf("window %s; %d leading at its start", r.window, r.leading)
		rss := fmt.Sprintf("%d MiB (anon %d + file %d; max %d)", r.rss>>20, r.anon>>20, r.file>>20, r.rssMax>>20)
		t.add(r.store, strconv.Itoa(r.jobs), r.tm.String(), lead, held,
			rss, fmt.Sprintf("%d MiB", r.hwm>>20), fmt.Sprintf("%.1f %%", r.cpu*100), gor,
			strings.Join(ops, ", "), storeOps, renewed, storeCPU, note)
	}
	t.write(w)
	seen := map[string]bool{}
	for _, r := range rs {
		if r.storeWhat != "" && !seen[r.store] {
			seen[r.store] = true
			if r.renewWhat == "" {
				fmt.Fprintf(w, "- %s: store-side counters: %s.\n", r.store, r.storeWhat)
				continue
			}
			fmt.Fprintf(w, "- %s: store requests/s = %s; store-side renewals/s = %s.\n", r.store, r.storeWhat, r.renewWhat)
		}
	}
	fmt.Fprintln(w, "- CPU is a percentage of one core (user + system, `/proc/PID/stat`) over the window; RSS holding is the mean VmRSS over the window, sampled every second, split into RssAnon (the agent's own memory: Go's heap and runtime, SQLite's cache) and RssFile (pages of the electd binary and other mapped files, shared and reclaimable), with the largest sample; peak RSS is VmHWM at the window's end (`/proc/PID/status`); goroutines is the agent's own `go_goroutines` gauge; agent lease ops/s are the agent's own `electd_lease_op_seconds_count` by op.")
	fmt.Fprintln(w)
}

func sortedKeys(m map[string]float64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
