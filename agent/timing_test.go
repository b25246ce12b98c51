package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/timing"
	"github.com/electd/electd/providers"
)

func TestTerm(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := time.Second
	for _, tc := range []struct {
		name                string
		ttl, stop           time.Duration
		now                 time.Duration // since t0
		failed              bool
		renew, retry        time.Duration
		wantValid, wantStop time.Duration
		wantNext            time.Duration
	}{
		{name: "renew on schedule", ttl: 15 * s, stop: 5 * s, now: 0, renew: 4 * s, retry: 2 * s,
			wantValid: 14850 * time.Millisecond, wantStop: 9750 * time.Millisecond, wantNext: 4 * s},
		{name: "retry after a failure", ttl: 15 * s, stop: 5 * s, now: 4 * s, failed: true, renew: 4 * s, retry: 2 * s,
			wantValid: 14850 * time.Millisecond, wantStop: 9750 * time.Millisecond, wantNext: 6 * s},
		{name: "a retry never lands after the step-down point", ttl: 15 * s, stop: 5 * s, now: 9 * s, failed: true, renew: 4 * s, retry: 2 * s,
			wantValid: 14850 * time.Millisecond, wantStop: 9750 * time.Millisecond, wantNext: 9750 * time.Millisecond},
		{name: "late loop renews at once", ttl: 15 * s, stop: 0, now: 5 * s, renew: 4 * s, retry: 2 * s,
			wantValid: 14850 * time.Millisecond, wantStop: 14750 * time.Millisecond, wantNext: 5 * s},
		{name: "no work: only the kill margin is kept", ttl: 10 * s, stop: 0, now: 0, renew: 3 * s, retry: 1 * s,
			wantValid: 9900 * time.Millisecond, wantStop: 9800 * time.Millisecond, wantNext: 3 * s},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm := newTerm(t0, tc.ttl, tc.stop)
			if got := timing.ValidUntil(t0, tc.ttl).Sub(t0); got != tc.wantValid {
				t.Errorf("ValidUntil = t0+%s, want t0+%s", got, tc.wantValid)
			}
			if got := tm.stopBy.Sub(t0); got != tc.wantStop {
				t.Errorf("stopBy = t0+%s, want t0+%s", got, tc.wantStop)
			}
			if got := timing.NextRenew(tm.sent, tm.stopBy, t0.Add(tc.now), tc.failed, tc.renew, tc.retry).Sub(t0); got != tc.wantNext {
				t.Errorf("NextRenew = t0+%s, want t0+%s", got, tc.wantNext)
			}
		})
	}
}

// timingJob runs one job's loop on a fake clock over a real SQLite store
// with faults injected into Renew.
func timingJob(t *testing.T) (*job, *faulty, *fakeClock) {
	return timingJobOn(t, nil)
}

// timingJobOn is timingJob with prepare run on the store before the job
// starts.
func timingJobOn(t *testing.T, prepare func(providers.Provider)) (*job, *faulty, *fakeClock) {
	t.Helper()
	return fakeClockJob(t, config.Job{Name: "timed", Provider: "sql.s", Mode: config.ModeLeader,
		TTL: 10 * time.Second, RenewEvery: 2 * time.Second, RetryEvery: time.Second}, Options{}, prepare)
}

// fakeClockJob runs spec's loop on a fake clock over a real SQLite store,
// with faults injected into Renew; o.Clock is set to the fake clock, and
// prepare, when not nil, runs on the store before the job starts.
func fakeClockJob(t *testing.T, spec config.Job, o Options, prepare func(providers.Provider)) (*job, *faulty, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	o.Clock = clk
	p := sqliteStore(t)
	if prepare != nil {
		prepare(p)
	}
	f := newFaulty(p, clk)
	l := newLoop(f, "sql.s", clk, nil, newFleet(config.Agent{NodeID: "node-1"}, "node-1#0badcafe"), hclog.NewNullLogger())
	j := newJob(&spec, l, o)
	l.post(j.start)
	t.Cleanup(func() {
		l.post(func() { j.retire(ErrStopping) })
		<-j.done()
		l.close()
	})
	return j, f, clk
}

func expectCall(t *testing.T, f *faulty, op string, at time.Time) call {
	t.Helper()
	c := f.nextCall(t)
	if c.op != op || !c.at.Equal(at) {
		t.Fatalf("call %s at %s, want %s at %s", c.op, c.at.Format("15:04:05.000"), op, at.Format("15:04:05.000"))
	}
	return c
}

// Renewals go out every renew_every; failures are retried every
// retry_every; when none succeeds, the leader steps down at
// sent + ttl*0.99 - stop_timeout - KillMargin and releases.
func TestRenewalsUntilDeadline(t *testing.T) {
	t.Parallel()
	j, f, clk := timingJob(t)
	t0 := clk.Now()
	expectCall(t, f, "acquire", t0)
	s := time.Second
	expectCall(t, f, "renew", clk.advanceTo(t, t0.Add(2*time.Second)))
	if got := clk.Now().Sub(t0); got != 2*s {
		t.Fatalf("first renewal at t0+%s, want t0+2s", got)
	}
	lastOK := clk.Now()
	f.setRenew(errors.New("store unreachable"), false)
	f.setAcquire(errors.New("store unreachable")) // keep it a candidate after the step-down
	for _, want := range []time.Duration{4 * s, 5 * s, 6 * s, 7 * s, 8 * s, 9 * s, 10 * s, 11 * s} {
		at := clk.advanceTo(t, t0.Add(want))
		if at.Sub(t0) != want {
			t.Fatalf("renewal attempt at t0+%s, want t0+%s", at.Sub(t0), want)
		}
		expectCall(t, f, "renew", at)
		if st := j.get().State; st != "leader" {
			t.Fatalf("state %q while the term is still valid, want leader", st)
		}
	}
	// stopBy = lastOK + 9.9s - 0 - 100ms = t0+11.8s: the leader steps down
	// there and releases.
	at := clk.advanceTo(t, lastOK.Add(9800*time.Millisecond))
	if want := lastOK.Add(9800 * time.Millisecond); !at.Equal(want) {
		t.Fatalf("stepped down at t0+%s, want t0+%s", at.Sub(t0), want.Sub(t0))
	}
	c := f.nextCall(t)
	if c.op != "release" {
		t.Fatalf("after the deadline: %s, want release", c.op)
	}
	if c := f.nextCall(t); c.op != "acquire" {
		t.Fatalf("after stepping down: %s, want a new candidacy (acquire)", c.op)
	}
	eventually(t, 10*time.Second, "status shows a candidate with the error", func() bool {
		st := j.get()
		return st.State == "candidate" && st.LastError != ""
	})
}

// A renewal whose answer does not come by the step-down point (a store or
// a client that overruns its context, or waits on a lock behind one that
// does) does not keep the leader past its term: it steps down and releases
// at the step-down point, and the late answer, a success, is ignored.
func TestOverdueRenewalStepsDownAtDeadline(t *testing.T) {
	t.Parallel()
	j, f, clk := timingJob(t)
	t0 := clk.Now()
	expectCall(t, f, "acquire", t0)
	unstick := f.stickRenew()
	defer unstick()
	expectCall(t, f, "renew-stuck", clk.advanceTo(t, t0.Add(2*time.Second)))
	f.setAcquire(errors.New("store unreachable")) // keep it a candidate after the step-down
	// stopBy = t0 + 9.9s - 0 - 100ms.
	at := clk.advanceToNext(t)
	if want := t0.Add(9800 * time.Millisecond); !at.Equal(want) {
		t.Fatalf("stepped down at t0+%s, want t0+9.8s", at.Sub(t0))
	}
	expectCall(t, f, "release", at)
	if st := j.get(); st.State == "leader" {
		t.Fatalf("state %q after the step-down point, want stopping or candidate", st.State)
	}
	unstick()
	c := f.nextCall(t)
	for c.op == "acquire" { // the candidate's attempts meanwhile
		c = f.nextCall(t)
	}
	if c.op != "renew" || c.err != nil {
		t.Fatalf("the overdue renewal ended with %s %v, want a success", c.op, c.err)
	}
	// The answer is posted to the loop after the call returns: wait until
	// the loop has taken it (and found its term over), then let the loop
	// finish whatever it is doing.
	eventually(t, 10*time.Second, "the late answer reaches the loop", func() bool { return j.l.lateRenewals.Load() == 1 })
	synced := make(chan struct{})
	j.l.post(func() { close(synced) })
	<-synced
	if st := j.get(); st.State == "leader" || st.Token != 1 {
		t.Fatalf("after the late answer: state %q token %d, want no term (token 1 was released)", st.State, st.Token)
	}
}

// A "lost" answer steps down at once, without a release.
func TestLostStepsDownAtOnce(t *testing.T) {
	t.Parallel()
	j, f, clk := timingJob(t)
	t0 := clk.Now()
	expectCall(t, f, "acquire", t0)
	f.setRenew(providers.ErrLost, false)
	expectCall(t, f, "renew", clk.advanceTo(t, t0.Add(2*time.Second)))
	f.setRenew(nil, false)
	// Next is a new candidacy: an acquire, never a release of a lost lease.
	c := f.nextCall(t)
	for c.op == "renew" {
		t.Fatalf("renewed again after the lease was lost")
	}
	if c.op != "acquire" {
		t.Fatalf("after a lost lease: %s, want acquire (no release)", c.op)
	}
	eventually(t, 10*time.Second, "a new term", func() bool { return j.get().Token == 2 && j.get().State == "leader" })
}

// A renewal that hangs (a store member lost silently) is abandoned after a
// fifth of the window to the step-down point, in real time, and sent again
// at once: one stuck request does not end a healthy term.
func TestHungRenewalRetried(t *testing.T) {
	t.Parallel()
	j, f, clk := timingJob(t)
	t0 := clk.Now()
	expectCall(t, f, "acquire", t0)
	f.hangRenews(1)
	at := clk.advanceTo(t, t0.Add(2*time.Second))
	start := time.Now()
	// stopBy = t0+9.8s; the attempt's deadline is (9.8s)/5 = 1.96s of real
	// time, as the window left (7.8s) is longer.
	c := f.nextCall(t)
	if c.op != "renew" || !errors.Is(c.err, context.DeadlineExceeded) {
		t.Fatalf("hanging renewal ended with %s %v, want renew with a deadline error", c.op, c.err)
	}
	if real := time.Since(start); real < 1800*time.Millisecond || real > 4*time.Second {
		t.Errorf("the hanging renewal was abandoned after %s of real time, want about 1.96s", real)
	}
	expectCall(t, f, "renew", at) // at once: no retry_every wait
	eventually(t, 10*time.Second, "still the leader of its first term", func() bool {
		st := j.get()
		return st.State == "leader" && st.Token == 1
	})
	// The term is measured from the retry: the next renewal is due
	// renew_every after it.
	expectCall(t, f, "renew", clk.advanceTo(t, at.Add(2*time.Second)))
}

// Renewals that all hang are each abandoned after their share of the
// window and sent again; the leader steps down at the step-down point and
// releases, not later.
func TestHangingRenewalsStepDownAtDeadline(t *testing.T) {
	t.Parallel()
	j, f, clk := timingJob(t)
	t0 := clk.Now()
	expectCall(t, f, "acquire", t0)
	f.setRenew(nil, true)
	f.setAcquire(errors.New("store unreachable")) // keep it a candidate after the step-down
	at := clk.advanceTo(t, t0.Add(2*time.Second))
	for range 2 {
		if c := expectCall(t, f, "renew", at); !errors.Is(c.err, context.DeadlineExceeded) {
			t.Fatalf("hanging renewal ended with %v, want a deadline error", c.err)
		}
	}
	if st := j.get().State; st != "leader" {
		t.Fatalf("state %q while the term is still valid, want leader", st)
	}
	if got := clk.advanceToNext(t); !got.Equal(t0.Add(9800 * time.Millisecond)) {
		t.Fatalf("stepped down at t0+%s, want t0+9.8s", got.Sub(t0))
	}
	c := f.nextCall(t)
	for c.op == "renew" { // the attempt in flight at the step-down point
		c = f.nextCall(t)
	}
	if c.op != "release" {
		t.Fatalf("after the step-down point: %s, want release", c.op)
	}
}

// TestNotificationsDoNotStorm: a candidate refused by a live term tries at
// once on a notification at most once per retry_every, however many come
// (candidates whose attempts notify each other, or themselves, once woke
// each other in a loop); after retry_every a notification is acted on at
// once again.
func TestNotificationsDoNotStorm(t *testing.T) {
	j, f, clk := timingJobOn(t, func(p providers.Provider) {
		if _, err := p.Acquire(context.Background(), providers.AcquireRequest{Key: "timed", Holder: "other#1", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	})
	l := j.l
	if c := f.nextCall(t); c.op != "acquire" || !errors.Is(c.err, providers.ErrHeld) {
		t.Fatalf("first call: %s %v, want a refused acquire", c.op, c.err)
	}
	// A burst of notifications, some while an attempt is out, some while
	// the job waits; the clock stands still, so no timer fires.
	burst := func() int {
		for range 40 {
			l.post(j.notify)
			time.Sleep(2 * time.Millisecond) // spread over the attempt's flight and the wait after
		}
		// The loop has taken every notification, and no attempt is out:
		// each sent was answered, so the store has seen (and recorded) it.
		eventually(t, 10*time.Second, "no attempt out after the burst", func() bool {
			idle := make(chan bool)
			l.post(func() { idle <- j.phase != asking })
			return <-idle
		})
		n := 0
		for len(f.calls) > 0 {
			if c := <-f.calls; c.op == "acquire" {
				n++
			}
		}
		return n
	}
	if n := burst(); n != 1 {
		t.Errorf("40 notifications within retry_every: %d attempts, want 1", n)
	}
	clk.mu.Lock()
	clk.now = clk.now.Add(j.spec.RetryEvery) // the waiters due by then are left to fire on the next advance
	clk.mu.Unlock()
	if n := burst(); n != 1 {
		t.Errorf("40 notifications a retry_every later: %d attempts, want 1", n)
	}
}
