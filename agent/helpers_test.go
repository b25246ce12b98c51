package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/actions/proc"
	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/registry"
	sqlprovider "github.com/electd/electd/providers/sql"
)

// The test binary is also the shim that supervises each command.
func TestMain(m *testing.M) {
	proc.MaybeShim()
	os.Exit(m.Run())
}

// fakeClock moves only when the test says so.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
	c  *fakeClock
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_800_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &fakeWaiter{at: c.now.Add(d), ch: make(chan time.Time, 1), c: c}
	if d <= 0 {
		w.ch <- c.now
		return w
	}
	c.waiters = append(c.waiters, w)
	return w
}

func (w *fakeWaiter) C() <-chan time.Time { return w.ch }

// Stop takes w off the clock: advanceToNext never moves to it.
func (w *fakeWaiter) Stop() bool {
	c := w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, o := range c.waiters {
		if o == w {
			c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
			return true
		}
	}
	return false
}

// advanceTo is advanceToNext for a test that knows the next wake-up: it
// waits until something waits on the clock at or before want, then moves
// the clock to the earliest. A wake-up that the loop has yet to schedule
// (an answer on its way to the loop) is waited for, not passed over for a
// later one already on the clock, such as the step-down point while a
// renewal is out.
func (c *fakeClock) advanceTo(t *testing.T, want time.Time) time.Time {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		due := false
		next := time.Time{}
		for _, w := range c.waiters {
			if !w.at.After(want) {
				due = true
			}
			if next.IsZero() || w.at.Before(next) {
				next = w.at
			}
		}
		c.mu.Unlock()
		if due {
			return c.advanceToNext(t)
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing waits on the clock at or before %s (the earliest wake-up: %s)", want.Format("15:04:05.000"), next.Format("15:04:05.000"))
		}
		time.Sleep(time.Millisecond)
	}
}

// advanceToNext waits until something waits on the clock, then moves the
// clock to the earliest waiter and fires every waiter due by then.
func (c *fakeClock) advanceToNext(t *testing.T) time.Time {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		if len(c.waiters) > 0 {
			sort.Slice(c.waiters, func(i, k int) bool { return c.waiters[i].at.Before(c.waiters[k].at) })
			c.now = c.waiters[0].at
			var rest []*fakeWaiter
			for _, w := range c.waiters {
				if w.at.After(c.now) {
					rest = append(rest, w)
				} else {
					w.ch <- c.now
				}
			}
			c.waiters = rest
			now := c.now
			c.mu.Unlock()
			return now
		}
		c.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("nothing waits on the clock")
		}
		time.Sleep(time.Millisecond)
	}
}

// faulty wraps a real provider and records every call; Renew can be told
// to fail with an error, or to hang until its context ends.
type faulty struct {
	providers.Provider
	clock Clock

	mu         sync.Mutex
	acquireErr error
	renewErr   error
	hangRenew  bool
	hangOnce   int           // so many next renewals hang, then hangRenew applies
	stuck      chan struct{} // Renew waits for it to close, whatever its context says
	lastRenew  time.Time     // real time the last successful Renew was sent
	calls      chan call
}

type call struct {
	op    string
	at    time.Time // on the test's clock
	err   error
	value string // the lease value sent (renew, release)
}

func newFaulty(p providers.Provider, clock Clock) *faulty {
	return &faulty{Provider: p, clock: clock, calls: make(chan call, 1000)}
}

func (f *faulty) record(op string, at time.Time, err error, value ...string) {
	c := call{op: op, at: at, err: err}
	if len(value) > 0 {
		c.value = value[0]
	}
	select {
	case f.calls <- c:
	default:
	}
}

func (f *faulty) setRenew(err error, hang bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renewErr, f.hangRenew = err, hang
}

// hangRenews makes the next n renewals hang until their context ends.
func (f *faulty) hangRenews(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hangOnce = n
}

// stickRenew makes the next renewals wait, past their deadline, until
// unstick is called; they then succeed.
func (f *faulty) stickRenew() (unstick func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	f.stuck = ch
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.stuck = nil
			f.mu.Unlock()
			close(ch)
		})
	}
}

func (f *faulty) setAcquire(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acquireErr = err
}

func (f *faulty) Acquire(ctx context.Context, req providers.AcquireRequest) (providers.Lease, error) {
	at := f.clock.Now()
	f.mu.Lock()
	acquireErr := f.acquireErr
	f.mu.Unlock()
	if acquireErr != nil {
		f.record("acquire", at, acquireErr)
		return providers.Lease{}, acquireErr
	}
	l, err := f.Provider.Acquire(ctx, req)
	f.record("acquire", at, err)
	return l, err
}

func (f *faulty) Renew(ctx context.Context, l providers.Lease) (providers.Lease, error) {
	at, sent := f.clock.Now(), time.Now()
	f.mu.Lock()
	renewErr, hang, stuck := f.renewErr, f.hangRenew, f.stuck
	if f.hangOnce > 0 {
		f.hangOnce--
		hang = true
	}
	f.mu.Unlock()
	if stuck != nil {
		// A store or client that overruns its deadline: the answer, a
		// success, comes only when the test says.
		f.record("renew-stuck", at, nil)
		<-stuck
		f.record("renew", at, nil)
		return l, nil
	}
	if hang {
		<-ctx.Done()
		f.record("renew", at, ctx.Err())
		return providers.Lease{}, ctx.Err()
	}
	if renewErr != nil {
		f.record("renew", at, renewErr)
		return providers.Lease{}, renewErr
	}
	r, err := f.Provider.Renew(ctx, l)
	if err == nil {
		f.mu.Lock()
		f.lastRenew = sent
		f.mu.Unlock()
	}
	f.record("renew", at, err, l.Value)
	return r, err
}

func (f *faulty) Release(ctx context.Context, l providers.Lease) error {
	at := f.clock.Now()
	err := f.Provider.Release(ctx, l)
	f.record("release", at, err, l.Value)
	return err
}

// nextCall waits for the next recorded call.
func (f *faulty) nextCall(t *testing.T) call {
	t.Helper()
	select {
	case c := <-f.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no lease operation within 10s")
	}
	return call{}
}

// testAgent is one agent running a configuration in this process.
type testAgent struct {
	*Agent
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// sqliteDB is a fresh SQLite file shared by the agents of one test.
// sqliteDB is a SQLite file of the test's own, on a tmpfs where there is
// one (teststore.DBDir).
func sqliteDB(t *testing.T) string { return filepath.Join(teststore.DBDir(t), "leases.db") }

// sqliteStore opens a SQLite store of the test's own, closed when the test
// ends.
func sqliteStore(t *testing.T) providers.Provider {
	t.Helper()
	settings := &sqlprovider.Settings{Driver: "sqlite", DSN: sqliteDB(t)}
	p, err := settings.Open(context.Background(), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// loadConfig writes src to a file and loads it like `electd run` does.
func loadConfig(t *testing.T, src string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "electd.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load([]string{path}, config.Options{Types: registry.Types(), Default: registry.Default})
	if diags.HasErrors() {
		var b strings.Builder
		diags.WriteText(&b)
		t.Fatalf("config:\n%s", b.String())
	}
	return cfg
}

// agentConfig is a configuration for node on the SQLite file db with the
// given job blocks.
func agentConfig(node, db, jobs string) string {
	return fmt.Sprintf(`
agent {
  node_id          = %q
  listen           = ""
  shutdown_timeout = "10s"
}
provider "sql" "s" {
  driver = "sqlite"
  dsn    = %q
}
%s`, node, db, jobs)
}

type agentOpt func(*Options)

func startAgent(t *testing.T, cfg *config.Config, opts ...agentOpt) *testAgent {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o := Options{
		Logger: hclog.New(&hclog.LoggerOptions{Name: cfg.Agent.NodeID, Level: hclog.Debug, Output: testWriter{t}}),
		Shim:   self,
		Open: func(ctx context.Context, p config.Provider) (providers.Provider, error) {
			return p.Settings.Open(ctx, hclog.NewNullLogger())
		},
	}
	for _, opt := range opts {
		opt(&o)
	}
	if testing.Short() && o.Clock == nil {
		t.Skip("runs agents on the real clock for seconds: skipped under -short")
	}
	a, err := New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ta := &testAgent{Agent: a, cancel: cancel, done: make(chan error, 1)}
	go func() { ta.done <- a.Run(ctx) }()
	t.Cleanup(func() { ta.stop(t) })
	return ta
}

// stop is a graceful stop (SIGTERM); it fails the test when Run errs.
func (a *testAgent) stop(t *testing.T) {
	t.Helper()
	a.once.Do(func() {
		a.cancel()
		select {
		case err := <-a.done:
			if err != nil {
				t.Errorf("agent stopped with an error: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("agent did not stop within 30s")
		}
	})
}

func (a *testAgent) job(name string) (s jobState) {
	for _, j := range a.Jobs() {
		if j.Job == name {
			return jobState{j.State, j.Leader, j.Token}
		}
	}
	return jobState{}
}

type jobState struct {
	state, leader string
	token         uint64
}

// testWriter sends logs to t.Log, so a failing test shows what happened.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lines reads a file the commands append to.
func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// leaseOps is how many lease operations (acquire, renew, observe: answered
// or not) job has ended on a; 0 until the agent runs it.
func leaseOps(a *testAgent, job string) uint64 {
	for _, j := range a.running() {
		if j.name() == job {
			return j.opsDone()
		}
	}
	return 0
}

// turns waits until each of jobs on a has ended n more lease operations
// from now: proof that its loop has tried (and been refused, or held off)
// n times, whatever the machine's load.
func turns(t *testing.T, n uint64, a *testAgent, jobs ...string) {
	t.Helper()
	start := make([]uint64, len(jobs))
	for i, j := range jobs {
		start[i] = leaseOps(a, j)
	}
	eventually(t, time.Duration(n)*10*time.Second, fmt.Sprintf("%d lease operations of %v", n, jobs), func() bool {
		for i, j := range jobs {
			if leaseOps(a, j) < start[i]+n {
				return false
			}
		}
		return true
	})
}
