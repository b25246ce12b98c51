package agent

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/syncbuf"
	"github.com/electd/electd/providers"
)

// Fitness is judged at every decision: a drain or a failing health check
// that lands while a request is out is acted on when its answer comes.

// gate holds Acquires until the test lets them through.
type gate struct {
	providers.Provider
	out chan struct{} // an Acquire is held

	mu   sync.Mutex
	open chan struct{} // nil: Acquires go through
}

func (g *gate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *gate) let() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.open)
	g.open = nil
}

func (g *gate) Acquire(ctx context.Context, req providers.AcquireRequest) (providers.Lease, error) {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	if open != nil {
		g.out <- struct{}{}
		<-open
	}
	return g.Provider.Acquire(ctx, req)
}

// fitRig is one job's loop on a fake clock over a real SQLite store:
// Acquires pass through a gate, every call is recorded (faulty).
type fitRig struct {
	clk   *fakeClock
	store providers.Provider
	f     *faulty
	g     *gate
	l     *loop
	j     *job
	log   *syncbuf.Buffer
}

func newFitRig(t *testing.T, spec config.Job, wrap func(*job)) *fitRig {
	t.Helper()
	clk := newFakeClock()
	p := sqliteStore(t)
	r := &fitRig{clk: clk, store: p, f: newFaulty(p, clk), log: &syncbuf.Buffer{}}
	r.g = &gate{Provider: r.f, out: make(chan struct{}, 1)}
	log := hclog.New(&hclog.LoggerOptions{Output: r.log, Level: hclog.Info, DisableTime: true})
	r.l = newLoop(r.g, "sql.s", clk, nil, newFleet(config.Agent{NodeID: "node-1"}, "node-1#0badcafe"), log)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r.j = newJob(&spec, r.l, Options{Clock: clk, Shim: self})
	if wrap != nil {
		wrap(r.j)
	}
	t.Cleanup(func() {
		r.l.post(func() { r.j.retire(ErrStopping) })
		<-r.j.done()
		r.l.close()
		if t.Failed() {
			t.Logf("agent log:\n%s", r.log.String())
		}
	})
	return r
}

func fitSpec() config.Job {
	return config.Job{Name: "fit", Provider: "sql.s", Mode: config.ModeLeader,
		TTL: 10 * time.Second, RenewEvery: 2 * time.Second, RetryEvery: time.Second}
}

// start starts the job on its loop.
func (r *fitRig) start() { r.l.post(r.j.start) }

// advance moves the clock to its next wake-up if something waits on it,
// and does not wait: an answer on its way sets none.
func (r *fitRig) advance(t *testing.T) {
	t.Helper()
	r.clk.mu.Lock()
	waiting := len(r.clk.waiters) > 0
	r.clk.mu.Unlock()
	if waiting {
		r.clk.advanceToNext(t)
	}
}

// onLoop runs fn on the loop and waits for it.
func (r *fitRig) onLoop(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan struct{})
	r.l.post(func() { fn(); close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not run a function within 10s")
	}
}

// drain is Agent.Drain for this loop: the agent's flag, then the job told.
func (r *fitRig) drain(t *testing.T, on bool) {
	t.Helper()
	r.l.fleet.draining.Store(on)
	r.onLoop(t, func() { r.j.drain(on) })
}

// heldAcquire waits for an Acquire to be held at the gate.
func (r *fitRig) heldAcquire(t *testing.T) {
	t.Helper()
	select {
	case <-r.g.out:
	case <-time.After(10 * time.Second):
		t.Fatal("no Acquire held within 10s")
	}
}

// expect takes the next recorded calls and checks their operations.
func (r *fitRig) expect(t *testing.T, ops ...string) {
	t.Helper()
	for _, op := range ops {
		if c := r.f.nextCall(t); c.op != op {
			t.Fatalf("call %s (error %v), want %s", c.op, c.err, op)
		}
	}
}

// until takes the recorded calls up to the next op.
func (r *fitRig) until(t *testing.T, op string) {
	t.Helper()
	for {
		if c := r.f.nextCall(t); c.op == op {
			return
		}
	}
}

// leads advances the clock until the job leads.
func (r *fitRig) leads(t *testing.T) {
	t.Helper()
	eventually(t, 10*time.Second, "the job leads", func() bool {
		if r.j.get().State == StateLeader {
			return true
		}
		r.advance(t)
		return false
	})
}

// demoted waits for the job's term to end, for reason.
func (r *fitRig) demoted(t *testing.T, reason string) {
	t.Helper()
	eventually(t, 10*time.Second, "the term over, "+reason, func() bool {
		h := r.j.History()
		last := h[len(h)-1]
		return last.Type == config.EventDemoted && last.Reason == reason
	})
}

// gaveBack checks that the job holds nothing and that its history and
// metrics show the lease won and given back at once, for reason.
func (r *fitRig) gaveBack(t *testing.T, reason string) {
	t.Helper()
	eventually(t, 10*time.Second, "the job a candidate again", func() bool {
		done := make(chan phase, 1)
		r.l.post(func() { done <- r.j.phase })
		return <-done != stopping
	})
	if st := r.j.get(); st.State == StateLeader || st.State == StateStopping {
		t.Errorf("state %q after giving the lease back", st.State)
	}
	lease, err := r.store.Observe(context.Background(), "fit")
	if err != nil || lease.Holder != "" {
		t.Errorf("the store after the release: holder %q, error %v; want free", lease.Holder, err)
	}
	h := r.j.History()
	if len(h) != 2 || h[0].Type != config.EventElected || h[1].Type != config.EventDemoted || h[1].Reason != reason ||
		h[0].Token != h[1].Token || h[1].PreviousLeader != "node-1" {
		t.Errorf("history %+v, want elected then demoted (%s), one token", h, reason)
	}
	if n := r.j.sample().TermsEnded[reason]; n != 1 {
		t.Errorf("terms ended (%s): %d, want 1", reason, n)
	}
	if out := r.log.String(); !strings.Contains(out, "releasing it at once") {
		t.Errorf("no line says why the lease was given back:\n%s", out)
	}
}

// A drain that lands while an Acquire is out: when the Acquire wins, the
// lease is released at once, no term begins, and the job competes for
// nothing until the drain is cancelled.
func TestDrainWhileAcquireIsOutLetsGo(t *testing.T) {
	r := newFitRig(t, fitSpec(), nil)
	r.g.hold()
	r.start()
	r.heldAcquire(t)
	r.drain(t, true)
	r.g.let()
	r.expect(t, "acquire", "release")
	r.gaveBack(t, ReasonDrained)
	if out := r.log.String(); !strings.Contains(out, `reason="the agent is draining"`) {
		t.Errorf("the release does not say why:\n%s", out)
	}

	// Draining: no attempt, however long it waits.
	t0 := r.clk.Now()
	for r.clk.Now().Sub(t0) < 30*time.Second {
		r.clk.advanceToNext(t) // a draining candidate always waits for its next look
	}
	select {
	case c := <-r.f.calls:
		t.Fatalf("a draining node sent %s", c.op)
	default:
	}
	if st := r.j.get(); st.Competing || !strings.Contains(st.Waiting, "draining") {
		t.Errorf("competing %v, waiting %q while draining", st.Competing, st.Waiting)
	}

	r.drain(t, false)
	r.leads(t)
}

// A health check turning to failing while an Acquire is out: the lease is
// released at once, with the check's error; the node competes again once
// its check passes.
func TestFailingHealthWhileAcquireIsOutLetsGo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	spec := fitSpec()
	// One real check at the start; the test gives the others.
	spec.Health = &config.Health{HTTP: srv.URL, Interval: time.Hour, Timeout: 2 * time.Second, Failures: 1, Successes: 1}
	r := newFitRig(t, spec, nil)
	r.g.hold()
	r.start()
	eventually(t, 10*time.Second, "an Acquire once the first check passed", func() bool {
		select {
		case <-r.g.out:
			return true
		default:
			r.advance(t) // a candidate that saw no pass yet retries
			return false
		}
	})
	r.onLoop(t, func() { r.j.checked(errors.New("exit code 1")) })
	r.g.let()
	r.expect(t, "acquire", "release")
	r.gaveBack(t, ReasonUnhealthy)
	if st := r.j.get(); !strings.Contains(st.LastError, "exit code 1") {
		t.Errorf("last error %q, want the check's", st.LastError)
	}

	r.onLoop(t, func() { r.j.checked(nil) })
	r.leads(t)
}

// A drain that lands while a renewal is out: the agent's flag is set
// before its word reaches each job's loop, so the renewal's answer can come
// first. The answer sees the drain, and the leader steps down.
func TestDrainWhileRenewalIsOutStepsDown(t *testing.T) {
	r := newFitRig(t, fitSpec(), nil)
	r.start()
	r.expect(t, "acquire")
	eventually(t, 10*time.Second, "the job leads", func() bool { return r.j.get().State == StateLeader })
	unstick := r.f.stickRenew()
	defer unstick()
	r.clk.advanceToNext(t)
	r.expect(t, "renew-stuck")
	r.l.fleet.draining.Store(true) // the loop has not been told yet
	unstick()
	r.expect(t, "renew", "release")
	r.demoted(t, ReasonDrained)
	if st := r.j.get(); st.State == StateLeader {
		t.Errorf("state %q after the renewal answered a draining node", st.State)
	}
}

// A task's slot recorded with a renewal whose answer comes after a drain:
// the slot is not run, and the release carries the record from before it,
// so that the next leader runs it (at most once, and not lost).
func TestDrainWhileSlotRecordIsOutDoesNotRunIt(t *testing.T) {
	every, err := config.ParseSchedule("@every 1m")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "ran")
	spec := fitSpec()
	spec.TTL, spec.RenewEvery, spec.RetryEvery = 10*time.Minute, 5*time.Minute, time.Minute
	spec.Task = &config.Task{ScheduleText: "@every 1m", Schedule: every, StopTimeout: time.Second,
		Command: config.Command{Argv: config.ListOf("sh", "-c", "echo ran >> "+out)}}
	r := newFitRig(t, spec, nil)
	r.start()
	t0 := r.clk.Now()
	r.expect(t, "acquire")
	eventually(t, 10*time.Second, "the job leads", func() bool { return r.j.get().State == StateLeader })
	unstick := r.f.stickRenew()
	defer unstick()
	slot := nextSlot(every, t0)
	for r.clk.Now().Before(slot) {
		r.clk.advanceTo(t, slot)
	}
	r.expect(t, "renew-stuck")
	r.l.fleet.draining.Store(true) // the loop has not been told yet
	unstick()
	r.expect(t, "renew")
	c := r.f.nextCall(t)
	if c.op != "release" {
		t.Fatalf("call %s, want release", c.op)
	}
	if rec := parseRecord(c.value); !rec.slot.Before(slot) {
		t.Errorf("released with the slot %s recorded as run, though it did not run", rec.slot.Format(time.RFC3339))
	}
	r.demoted(t, ReasonDrained)
	if got := lines(t, out); len(got) != 0 {
		t.Errorf("the task ran on a draining node: %q", got)
	}
}

// mode = "lock": a drain that lands while a slot's Acquire is out gives
// the lease back at once; the slot does not run here, and the job waits
// for its next slot.
func TestDrainWhileSlotAcquireIsOutLetsGo(t *testing.T) {
	every, err := config.ParseSchedule("@every 1m")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "ran")
	spec := fitSpec()
	spec.Mode = config.ModeLock
	spec.Task = &config.Task{ScheduleText: "@every 1m", Schedule: every, StopTimeout: time.Second,
		Command: config.Command{Argv: config.ListOf("sh", "-c", "echo ran >> "+out)}}
	r := newFitRig(t, spec, nil)
	r.g.hold()
	r.start()
	eventually(t, 10*time.Second, "the slot's Acquire", func() bool {
		select {
		case <-r.g.out:
			return true
		default:
			r.advance(t)
			return false
		}
	})
	r.drain(t, true)
	r.g.let()
	r.expect(t, "acquire", "release")
	r.demoted(t, ReasonDrained)
	if got := lines(t, out); len(got) != 0 {
		t.Errorf("the task ran on a draining node: %q", got)
	}
	if n := r.j.sample().TermsEnded[ReasonDrained]; n != 0 {
		t.Errorf("a lock job's slot counted as a move: %d", n)
	}
	eventually(t, 10*time.Second, "a wait for the next slot", func() bool {
		next := make(chan bool, 1)
		r.l.post(func() { next <- r.j.phase == candidate && r.j.timer != nil && r.j.timer.at.After(r.clk.Now()) })
		return <-next
	})
}

// Each health result while leading is judged, not only a change of state:
// a leader whose check is failing steps down at the next result, however
// it came to lead. Failures below the job's count do not make it step down.
func TestEveryHealthResultIsJudgedWhileLeading(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	spec := fitSpec()
	spec.Health = &config.Health{HTTP: srv.URL, Interval: time.Hour, Timeout: 2 * time.Second, Failures: 2, Successes: 2}
	r := newFitRig(t, spec, nil)
	r.start()
	r.leads(t)

	r.onLoop(t, func() { r.j.checked(errors.New("exit code 1")) })
	if st := r.j.get(); st.State != StateLeader {
		t.Fatalf("state %q after one failure of the two that make it unfit", st.State)
	}
	r.onLoop(t, func() { r.j.checked(nil) })

	// Failing, and leading: a transition this node did not act on.
	r.onLoop(t, func() { r.j.health.state, r.j.health.fails, r.j.health.passes = HealthFailing, 2, 0 })
	r.onLoop(t, func() { r.j.checked(nil) }) // one pass of the two that make it fit
	r.until(t, "release")
	r.demoted(t, ReasonUnhealthy)
}

// `electd lock` (RunOnce's one-shot policy): a lease won by a node that
// became unfit while the Acquire was out is given back, and the job goes on
// waiting for its one term rather than ending.
func TestOneShotWaitsOnAfterLettingGo(t *testing.T) {
	r := newFitRig(t, fitSpec(), func(j *job) {
		j.policy = &oneShot{policy: j.policy, Once: Once{Wait: -1}}
	})
	r.g.hold()
	r.start()
	r.heldAcquire(t)
	r.drain(t, true)
	r.g.let()
	r.expect(t, "acquire", "release")
	r.gaveBack(t, ReasonDrained)
	select {
	case <-r.j.done():
		t.Fatalf("the one-shot job ended: %v", r.j.retiring)
	default:
	}
	r.drain(t, false)
	r.leads(t)
}
