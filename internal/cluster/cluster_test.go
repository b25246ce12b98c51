package cluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

func TestChildLogReadsCompleteLinesOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "children.log")
	l := NewChildLog(path)
	if recs, err := l.Records(); err != nil || len(recs) != 0 {
		t.Fatalf("missing log: %v, %v; want nothing, no error", recs, err)
	}
	write := func(s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(s)
		f.Close()
	}
	write("start 7 100 node-1 1700000000000000000\nstop 7 100 node-1 17000000")
	recs, err := l.Records()
	if err != nil || len(recs) != 1 {
		t.Fatalf("records = %v, %v; want the complete line only", recs, err)
	}
	if r := recs[0]; r.Kind != "start" || r.TokenNum() != 7 || r.PID != 100 || r.Node != "node-1" || r.At.UnixNano() != 1700000000000000000 {
		t.Errorf("record = %+v", r)
	}
	write("01000000000\nstart 8 101 node-2 1700000002000000000\n")
	starts, err := l.Starts()
	if err != nil || len(starts) != 2 || starts[1].Node != "node-2" {
		t.Fatalf("starts = %v, %v", starts, err)
	}
	if bad, err := l.CheckHistory(nil); err != nil || len(bad) != 0 {
		t.Errorf("history: %v, %v; want no problem", bad, err)
	}
	write("start 8 102 node-3 1700000003000000000\n")
	if bad, _ := l.CheckHistory(nil); len(bad) == 0 {
		t.Error("a repeated token and an overlap went unnoticed")
	}
	write("garbage\n")
	if _, err := l.Records(); err == nil {
		t.Error("a malformed line was not reported")
	}
}

// The configurations this package writes pass `electd check`.
func TestConfigsPassCheck(t *testing.T) {
	bin := MustElectd(t)
	dir := t.TempDir()
	tm := Timing{TTL: 2 * time.Second, Renew: 500 * time.Millisecond, Retry: time.Second, Stop: 500 * time.Millisecond}
	blocks := map[string]string{
		"sqlite":    SQLBlock("sqlite", filepath.Join(dir, "leases.db"), ""),
		"postgres":  SQLBlock("postgres", PostgresDSN(), "electd_t_x"),
		"etcd":      EtcdBlock("/x/", []string{"127.0.0.1:2379"}, Str("dial_timeout", "1s")),
		"redis":     RedisBlock("p:", "127.0.0.1:1"),
		"zookeeper": ZooKeeperBlock("/x", []string{"127.0.0.1:2181"}),
	}
	for name, block := range blocks {
		cfg := filepath.Join(dir, name+".hcl")
		err := WriteConfig(cfg, AgentBlock("node-1", "127.0.0.1:0", Str("log_level", "warn")), block,
			RunJob("worker", tm, "sh", "child.sh", "children.log"), LeaseJob("j00001", tm))
		if err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, "check", "-no-env", "-config", cfg).CombinedOutput(); err != nil {
			b, _ := os.ReadFile(cfg)
			t.Errorf("%s: electd check: %v\n%s\n%s", name, err, out, b)
		}
	}
}

// Two agents on SQLite: one child runs, and a SIGTERM of its agent hands
// over to the other.
func TestSQLiteCluster(t *testing.T) {
	tm := Timing{TTL: 3 * time.Second, Renew: 500 * time.Millisecond, Retry: 250 * time.Millisecond, Stop: 500 * time.Millisecond}
	c := Start(t, 2, Options{Provider: MustProvider(t, "sqlite"), Timing: tm, API: true})
	for _, a := range c.Agents() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := a.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	MustWaitStarts(t, c, 1, 30*time.Second)
	MustExactlyOneFor(t, c, time.Second)
	lead, first := MustLeader(t, c)
	term := time.Now()
	lead.Signal(syscall.SIGTERM)
	next, err := c.Children.WaitStart(context.Background(), 1, first.Node, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err, ok := lead.Wait(10 * time.Second); !ok || err != nil {
		t.Errorf("agent after SIGTERM: exited %v, %v; want exit 0", ok, err)
	}
	c.Forget(lead.Node)
	t.Logf("SIGTERM → next child running: %s", next.At.Sub(term).Round(time.Millisecond))
	CheckHistory(t, c, nil)
}

// History tells repeats from regressions, counts what a fence would refuse,
// and finds an overlap with any earlier term, not only the one before.
func TestHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "children.log")
	lines := "" +
		"start 1 100 node-1 1000000000\n" +
		"stop 1 100 node-1 5000000000\n" + // runs 1-5 s
		"start 2 101 node-2 2000000000\n" + // overlaps token 1 for 1 s (until 3 s)
		"stop 2 101 node-2 3000000000\n" +
		"start 4 102 node-3 6000000000\n" +
		"stop 4 102 node-3 7000000000\n" +
		"start 3 103 node-1 8000000000\n" + // below 4: regression
		"stop 3 103 node-1 9000000000\n" +
		"start 4 104 node-2 10000000000\n" + // 4 again: repeat
		"stop 4 104 node-2 11000000000\n" +
		"start 5 105 node-3 12000000000\n" +
		"stop 5 105 node-3 13000000000\n"
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := NewChildLog(path).History(nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.Terms != 6 {
		t.Errorf("terms = %d, want 6", h.Terms)
	}
	if len(h.Overlaps) != 1 || h.Overlaps[0].Earlier.PID != 100 || h.Overlaps[0].Later.PID != 101 || h.Overlaps[0].For != time.Second {
		t.Errorf("overlaps = %v, want child 101 over child 100 for 1s", h.Overlaps)
	}
	if len(h.Regressions) != 1 || h.Regressions[0].PID != 103 {
		t.Errorf("regressions = %v, want child 103's token 3", h.Regressions)
	}
	if len(h.Repeats) != 1 || h.Repeats[0].PID != 104 {
		t.Errorf("repeats = %v, want child 104's token 4", h.Repeats)
	}
	if h.FenceRefused != 2 {
		t.Errorf("a fence would refuse %d terms, want 2 (tokens 3 and 4 after 4)", h.FenceRefused)
	}
	if got := len(h.Problems()); got != 3 {
		t.Errorf("problems = %v, want 3", h.Problems())
	}
}
