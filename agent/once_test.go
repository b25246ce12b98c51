package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/sql"
)

// onceConfig is one job running command under restart = never, on the
// SQLite file db, as `electd lock` builds it.
func onceConfig(t *testing.T, db, command string) *config.Config {
	return loadConfig(t, agentConfig("node-1", db, fmt.Sprintf(`
job "once" {
  ttl         = "3s"
  renew_every = "500ms"
  retry_every = "200ms"
  run {
    command      = ["sh", "-c", %q]
    restart      = "never"
    stop_timeout = "1s"
  }
}`, command)))
}

// runOnce runs cfg's job with RunOnce and returns why it ended, and what
// the command wrote on stdout.
func runOnce(t *testing.T, ctx context.Context, cfg *config.Config, wait time.Duration) (error, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg, Options{
		Logger: hclog.New(&hclog.LoggerOptions{Name: "once", Level: hclog.Debug, Output: testWriter{t}}),
		Shim:   self,
	})
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	reason := a.RunOnce(ctx, Once{Wait: wait, Stdout: &stdout, Stderr: &stderr})
	return reason, stdout.String()
}

// openStore is a second client of the SQLite file db: another node.
func openStore(t *testing.T, db string) providers.Provider {
	t.Helper()
	p, err := (&sql.Settings{Driver: "sqlite", DSN: db}).Open(context.Background(), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// A job of RunOnce leads one term: its command runs once, with the ELECTD_*
// variables and its output on the writers given; its exit code is the
// reason the term ended; the lease is released, its token kept.
func TestRunOnceCommandExits(t *testing.T) {
	db := sqliteDB(t)
	reason, out := runOnce(t, context.Background(), onceConfig(t, db, `echo "$ELECTD_JOB $ELECTD_TOKEN"; exit 3`), -1)
	var exit *ExitError
	if !errors.As(reason, &exit) || exit.Code != 3 || !errors.Is(reason, ErrWorkEnded) {
		t.Fatalf("reason %v, want an *ExitError with code 3", reason)
	}
	if out != "once 1\n" {
		t.Errorf("the command wrote %q, want one run with token 1", out)
	}
	l, err := openStore(t, db).Observe(context.Background(), "once")
	if err != nil || l.Holder != "" || l.Token != 1 {
		t.Errorf("lease after RunOnce: %+v (%v), want released with token 1", l, err)
	}
}

// While another node holds the lease, RunOnce gives up at its Wait, names
// the holder, and never runs the command; Wait 0 makes one attempt.
func TestRunOnceWaitTimeout(t *testing.T) {
	db, ran := sqliteDB(t), filepath.Join(t.TempDir(), "ran")
	other := openStore(t, db)
	if _, err := other.Acquire(context.Background(), providers.AcquireRequest{Key: "once", Holder: "node-2#00000000", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for _, wait := range []time.Duration{0, 500 * time.Millisecond} {
		began := time.Now()
		reason, _ := runOnce(t, context.Background(), onceConfig(t, db, "touch "+ran), wait)
		took := time.Since(began)
		var held *providers.HeldError
		if !errors.Is(reason, ErrWaitTimeout) || !errors.As(reason, &held) || held.Holder != "node-2#00000000" {
			t.Errorf("wait %s: reason %v, want ErrWaitTimeout with the holder node-2", wait, reason)
		}
		if took < wait || took > wait+2*time.Second {
			t.Errorf("wait %s: gave up after %s", wait, took)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatalf("wait %s: the command ran while another node held the lease", wait)
		}
	}
}

// A lease taken by another holder stops the command (stop signal) and ends
// RunOnce with ErrLeaseLost: no second term, no release of the thief's
// lease.
func TestRunOnceLeaseLost(t *testing.T) {
	db, dir := sqliteDB(t), t.TempDir()
	cfg := onceConfig(t, db, fmt.Sprintf(`trap 'echo stopped > %[1]s/stopped; exit 0' TERM; echo $$ > %[1]s/pid; while :; do sleep 0.05; done`, dir))
	other := openStore(t, db)
	done := make(chan error, 1)
	go func() { r, _ := runOnce(t, context.Background(), cfg, -1); done <- r }()
	eventually(t, 10*time.Second, "the command runs", func() bool { return len(lines(t, dir+"/pid")) == 1 })
	// Take it from under the job: free it with the holder and token the
	// store shows, as an expiry would, then acquire it as another node.
	l, err := other.Observe(context.Background(), "once")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Release(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(context.Background(), providers.AcquireRequest{Key: "once", Holder: "thief#00000000", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	select {
	case reason := <-done:
		if !errors.Is(reason, ErrLeaseLost) {
			t.Errorf("reason %v, want ErrLeaseLost", reason)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunOnce did not end within 10s of losing its lease")
	}
	if got := strings.Join(lines(t, dir+"/stopped"), ""); got != "stopped" {
		t.Errorf("the command was not stopped by its stop signal (%q)", got)
	}
	if l, _ := other.Observe(context.Background(), "once"); l.Holder != "thief#00000000" {
		t.Errorf("holder %q after RunOnce, want the thief's", l.Holder)
	}
}

// Ending ctx stops the command and releases the lease: ErrStopping.
func TestRunOnceStopped(t *testing.T) {
	db, dir := sqliteDB(t), t.TempDir()
	cfg := onceConfig(t, db, fmt.Sprintf(`echo $$ > %s/pid; while :; do sleep 0.05; done`, dir))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { r, _ := runOnce(t, ctx, cfg, -1); done <- r }()
	eventually(t, 10*time.Second, "the command runs", func() bool { return len(lines(t, dir+"/pid")) == 1 })
	cancel()
	select {
	case reason := <-done:
		if !errors.Is(reason, ErrStopping) {
			t.Errorf("reason %v, want ErrStopping", reason)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunOnce did not end within 10s of ctx")
	}
	l, err := openStore(t, db).Observe(context.Background(), "once")
	if err != nil || l.Holder != "" {
		t.Errorf("lease after the stop: %+v (%v), want released", l, err)
	}
}
