// Command electd-bench measures electd: crash failover and graceful handover
// on every provider with three real agents, the same against the tools
// electd replaces (etcdctl lock, etcd's concurrency.Election, client-go's
// leader election algorithm, redsync), and one agent holding thousands of
// leases. It writes markdown tables to stdout and to -out.
//
//	go build -o bin/electd ./cmd/electd && go run ./bench -suites failover -runs 30
//
// `make bench` does the same with the defaults.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/electd/electd/internal/cluster"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "contender" {
		os.Exit(contenderMain(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:]))
}

type options struct {
	suites, providers string
	runs, slowRuns    int
	anchorRuns        int
	tm                cluster.Timing
	crashRetry        []time.Duration
	azureTTL          time.Duration
	scaleStores       string
	scaleJobs         string
	scaleTTL          time.Duration
	scaleRenew        time.Duration
	scaleRetry        time.Duration
	scaleWindow       time.Duration
	scaleLeadWithin   time.Duration
	electd, out, work string
	keep              bool
	shim              bool // electd-shim was copied beside electd
	settle            time.Duration
}

func run(args []string) int {
	o := &options{}
	fs := flag.NewFlagSet("electd-bench", flag.ContinueOnError)
	fs.StringVar(&o.suites, "suites", "failover,anchors,scale", "suites to run: failover, anchors, scale")
	fs.StringVar(&o.providers, "providers", "sqlite,postgres,mysql,redis,redlock,etcd,zookeeper,nats,datastore,mongodb,azure_blob", "providers of the failover suite")
	fs.IntVar(&o.runs, "runs", 30, "crash runs and handover runs per provider")
	fs.IntVar(&o.slowRuns, "slow-runs", 10, "runs where one takes seconds to a quarter minute: azure_blob crash runs (ttl 15 s), the client-go anchor's crash and handover runs")
	fs.IntVar(&o.anchorRuns, "anchor-runs", 30, "crash and handover runs per fast anchor")
	fs.DurationVar(&o.tm.TTL, "ttl", 2*time.Second, "failover suite: job ttl (and the anchors' TTL)")
	fs.DurationVar(&o.tm.Renew, "renew", 500*time.Millisecond, "failover suite: renew_every")
	fs.DurationVar(&o.tm.Retry, "retry", 250*time.Millisecond, "failover suite: retry_every")
	fs.DurationVar(&o.tm.Stop, "stop-timeout", 500*time.Millisecond, "failover suite: run.stop_timeout")
	fs.DurationVar(&o.settle, "settle", 500*time.Millisecond, "failover and anchors suites: pause before each run, so that it starts on a quiet cluster")
	crashRetry := fs.String("crash-retry", "1s", "failover suite: comma-separated retry_every values of extra crash-only series per provider (empty: none)")
	fs.DurationVar(&o.azureTTL, "azure-ttl", 15*time.Second, "failover suite: ttl on azure_blob (Azure leases are 15-60 s)")
	fs.StringVar(&o.scaleStores, "scale-stores", "sqlite,postgres,etcd", "stores of the scale suite (sqlite, postgres, etcd)")
	fs.StringVar(&o.scaleJobs, "scale-jobs", "10000", "comma-separated job counts of the scale suite")
	fs.DurationVar(&o.scaleTTL, "scale-ttl", 15*time.Second, "scale suite: ttl")
	fs.DurationVar(&o.scaleRenew, "scale-renew", 4*time.Second, "scale suite: renew_every")
	fs.DurationVar(&o.scaleRetry, "scale-retry", 2*time.Second, "scale suite: retry_every")
	fs.DurationVar(&o.scaleWindow, "scale-window", 40*time.Second, "scale suite: measurement window")
	fs.DurationVar(&o.scaleLeadWithin, "scale-lead-within", 3*time.Minute, "scale suite: how long to wait for every job to lead before measuring")
	fs.StringVar(&o.electd, "electd", "bin/electd", "the electd binary")
	fs.StringVar(&o.out, "out", "bin/bench-results.md", "also write the report here")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (agent logs, child logs)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, r := range strings.Split(*crashRetry, ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		d, err := time.ParseDuration(r)
		if err != nil || d <= 0 {
			fmt.Fprintf(os.Stderr, "electd-bench: -crash-retry: bad duration %q\n", r)
			return 2
		}
		o.crashRetry = append(o.crashRetry, d)
	}
	if _, err := os.Stat(o.electd); err != nil {
		fmt.Fprintf(os.Stderr, "electd-bench: %v (build it: go build -o bin/electd ./cmd/electd)\n", err)
		return 1
	}
	if abs, err := filepath.Abs(o.electd); err == nil {
		o.electd = abs
	}
	var err error
	if o.work, err = os.MkdirTemp("", "electd-bench-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if !o.keep {
		defer os.RemoveAll(o.work)
	}

	// A private copy: others may rebuild bin/electd while the bench runs.
	// electd-shim goes with it when it is beside the binary, as installed.
	if err := copyFile(o.electd, filepath.Join(o.work, "electd")); err != nil {
		fmt.Fprintln(os.Stderr, "electd-bench:", err)
		return 1
	}
	shim := filepath.Join(filepath.Dir(o.electd), "electd-shim")
	if _, err := os.Stat(shim); err == nil {
		if err := copyFile(shim, filepath.Join(o.work, "electd-shim")); err != nil {
			fmt.Fprintln(os.Stderr, "electd-bench:", err)
			return 1
		}
		o.shim = true
	} else {
		fmt.Fprintf(os.Stderr, "electd-bench: no %s: commands run under electd itself, which starts slower\n", shim)
	}
	electdPath := o.electd
	o.electd = filepath.Join(o.work, "electd")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	begin := time.Now()
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "%s %s\n", time.Since(begin).Round(time.Second), fmt.Sprintf(format, a...))
	}
	st := cluster.NewStores(filepath.Join(o.work, "stores"))
	defer st.Close()

	want := map[string]bool{}
	for _, s := range strings.Split(o.suites, ",") {
		want[strings.TrimSpace(s)] = true
	}
	load0 := loadavg()
	var buf bytes.Buffer
	w := io.Writer(&buf)
	var fo []failoverResult
	type section struct {
		title, load string
		took        time.Duration
		write       func(io.Writer)
	}
	var sections []section
	if want["failover"] {
		t0 := time.Now()
		fo = runFailover(ctx, o, st, logf)
		sections = append(sections, section{"Failover and handover: three `electd run` agents per provider", loadavg(), time.Since(t0),
			func(w io.Writer) {
				prose(w, "", "Crash: kill -9 of the leading agent → the next agent's `run` child running. Handover: SIGTERM of the leading agent → the next child running. The killed agent is replaced by a fresh one (new node id) after each run, so three agents contend every time. Percentiles are nearest-rank: with 30 runs p99 is the largest value.")
				writeFailover(w, fo)
				prose(w, "Crash failover at other retry_every", "kill -9 of the leading agent → the next agent's child running, crash runs only, at the main table's retry_every and at each `-crash-retry` value (the same ttl and renew_every). A waiting candidate finds the expired lease on its next try, up to retry_every × 1.2 after the expiry, so p99 − ttl grows with retry_every.")
				writeCrashRetry(w, fo)
			}})
	}
	if want["anchors"] && ctx.Err() == nil {
		t0 := time.Now()
		an := runAnchors(ctx, o, st, fo, logf)
		sections = append(sections, section{"Anchors, side by side", loadavg(), time.Since(t0),
			func(w io.Writer) {
				prose(w, "", "Each tool runs as three processes of its own that supervise the same child script as electd's `run` (the etcdctl rows: etcdctl's own exec-command). Crash: kill -9 of the holder process → the next holder's child running. Handover: the tool's graceful release (electd: SIGTERM; etcdctl: SIGTERM to its process group, so its command exits and it unlocks; Election: Resign; redsync: Unlock; client-go: ReleaseOnCancel) → the next child running.")
				writeAnchors(w, an)
				prose(w, "Graceful handover, side by side", "The tool's graceful stop or release → the next holder's child running, all measured in this run.")
				writeHandover(w, fo, an)
			}})
	}
	if want["scale"] && ctx.Err() == nil {
		t0 := time.Now()
		sc := runScale(ctx, o, st, logf)
		sections = append(sections, section{"Scale: one agent, many jobs", loadavg(), time.Since(t0),
			func(w io.Writer) {
				prose(w, "", "One `electd run` with N jobs (no run or task: leadership only). \"All leading after\": agent start → every job leader in /v1/jobs (polled every 500 ms). Counters are read at both ends of the window, which starts 15 s (and at least one renew period) after every job leads. \"Held through the window\": leader at both ends with an unchanged token. RSS holding is the mean over the window (sampled every second), peak RSS is VmHWM (the acquisition burst included), goroutines is the agent's go_goroutines at the window's end.")
				writeScale(w, sc)
			}})
	}

	fmt.Fprintf(w, "# electd-bench results\n\n")
	fmt.Fprintf(w, "Run %s, took %s.\n\n", begin.UTC().Format(time.RFC3339), time.Since(begin).Round(time.Second))
	fmt.Fprintf(w, "Command: `%s`\n\n", commandLine())
	writeMachine(w, ctx, o, electdPath, load0)
	for _, s := range sections {
		fmt.Fprintf(w, "## %s\n\n", s.title)
		s.write(w)
		fmt.Fprintf(w, "Suite took %s; load average at its end: %s.\n\n", s.took.Round(time.Second), s.load)
	}
	if ctx.Err() != nil {
		fmt.Fprintln(w, "**Interrupted: the tables hold the runs finished before the interrupt.**")
	}
	os.Stdout.Write(buf.Bytes())
	if o.out != "" {
		os.MkdirAll(filepath.Dir(o.out), 0o755)
		if err := os.WriteFile(o.out, buf.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		logf("report written to %s", o.out)
	}
	return 0
}

// prose writes a paragraph, under a ### title when there is one.
func prose(w io.Writer, title, text string) {
	if title != "" {
		fmt.Fprintf(w, "### %s\n\n", title)
	}
	fmt.Fprintf(w, "%s\n\n", text)
}

// commandLine is how this run was started, to reproduce it.
func commandLine() string {
	args := os.Args
	if len(args) > 0 {
		// `go run` builds into a temporary directory: name the command instead.
		if strings.Contains(args[0], "go-build") {
			args = append([]string{"go run ./bench"}, args[1:]...)
		}
	}
	return strings.Join(args, " ")
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func writeMachine(w io.Writer, ctx context.Context, o *options, electdPath, load0 string) {
	t := &table{head: []string{"", ""}}
	t.add("CPU", fmt.Sprintf("%d cores (nproc), %s", runtime.NumCPU(), cpuModel()))
	t.add("memory", memTotal())
	t.add("kernel", readTrim("/proc/sys/kernel/osrelease"))
	t.add("Go", runtime.Version()+" (bench binary)")
	t.add("electd", outputOf(o.electd, "version")+" ("+electdPath+")")
	shim := "electd itself (no electd-shim beside the binary)"
	if o.shim {
		shim = "electd-shim (beside the binary)"
	}
	t.add("commands run under", shim)
	t.add("load average at start", load0+" (the machine is shared with other engineers' tests)")
	for _, v := range storeVersions(ctx) {
		t.add(v[0], v[1])
	}
	fmt.Fprintln(w, "## Machine")
	fmt.Fprintln(w)
	t.write(w)
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown model"
}

func memTotal() string {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "MemTotal:") {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "MemTotal:")), "%d", &kb)
			return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	return "unknown"
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

func outputOf(argv ...string) string {
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.Join(strings.Fields(string(out)), " ")
}

// copyFile copies the binary in 64 KiB writes, as cp, install and dpkg
// write a file. How it is written shows in the agent's RSS: the kernel
// caches a file written in one 75 MB write() in large folios and maps a
// whole folio on each page fault, which made the electd binary's resident
// pages 50 MiB instead of 34 (Linux 6.18, measured with the scale suite).
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	for {
		n, rerr := in.Read(buf)
		if n > 0 {
			if _, err := out.Write(buf[:n]); err != nil {
				out.Close()
				return err
			}
		}
		if rerr == io.EOF {
			return out.Close()
		}
		if rerr != nil {
			out.Close()
			return rerr
		}
	}
}
