package agent

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/syncbuf"
)

// Three jobs on one store that fails for two minutes (on the fake clock,
// an attempt per job per retry_every) log one line for the store, a few
// summaries at growing intervals, and one line when it answers again; the
// jobs show since when the store has been unreachable, and their loop is
// not called stuck.
func TestStoreOutageIsLoggedOnceForItsJobs(t *testing.T) {
	clk := newFakeClock()
	p := sqliteStore(t)
	f := newFaulty(p, clk)
	f.setAcquire(errors.New("dial tcp 10.0.0.5:5432: connect: connection refused"))
	buf := &syncbuf.Buffer{}
	log := hclog.New(&hclog.LoggerOptions{Output: buf, Level: hclog.Info, DisableTime: true})
	l := newLoop(f, "sql.s", clk, nil, newFleet(config.Agent{NodeID: "node-1"}, "node-1#0badcafe"), log)
	var jobs []*job
	for _, name := range []string{"a", "b", "c"} {
		spec := config.Job{Name: name, Provider: "sql.s", Mode: config.ModeLeader,
			TTL: 10 * time.Second, RenewEvery: 2 * time.Second, RetryEvery: time.Second}
		j := newJob(&spec, l, Options{Clock: clk})
		jobs = append(jobs, j)
		l.post(j.start)
	}
	t.Cleanup(func() {
		for _, j := range jobs {
			l.post(func() { j.retire(ErrStopping) })
			<-j.done()
		}
		l.close()
	})

	t0 := clk.Now()
	attempts := 0
	for clk.Now().Sub(t0) < 2*time.Minute {
		clk.advanceToNext(t)
		for len(f.calls) > 0 {
			if c := <-f.calls; c.op == "acquire" {
				attempts++
			}
		}
	}
	if attempts < 200 {
		t.Fatalf("%d attempts in two minutes of three jobs retrying every second", attempts)
	}
	for _, j := range jobs {
		st := j.get()
		if st.StoreUnreachableSince == nil || st.LastAttempt.IsZero() || !strings.Contains(st.LastError, "connection refused") {
			t.Errorf("%s during the outage: unreachable since %v, last attempt %s, last error %q", st.Job, st.StoreUnreachableSince, st.LastAttempt, st.LastError)
		}
	}

	f.setAcquire(nil)
	eventually(t, 10*time.Second, "the store answers again", func() bool {
		if len(f.calls) == 0 {
			clk.advanceToNext(t)
		}
		for len(f.calls) > 0 {
			<-f.calls
		}
		return strings.Contains(buf.String(), "store reachable again")
	})

	out := buf.String()
	if n := strings.Count(out, "cannot reach the store"); n != 1 {
		t.Errorf("%d first lines for one outage of three jobs, want 1:\n%s", n, out)
	}
	// Summaries 10s, 30s, 70s after the first: three in two minutes.
	if n := strings.Count(out, "store still unreachable"); n < 2 || n > 4 {
		t.Errorf("%d summaries in two minutes, want 3 (10s, 30s, 70s after the first):\n%s", n, out)
	}
	if n := strings.Count(out, "store reachable again"); n != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", n, out)
	}
	if strings.Contains(out, "cannot acquire the lease") {
		t.Errorf("a line per failed attempt:\n%s", out)
	}
	t.Logf("%d attempts, %d lines:\n%s", attempts, strings.Count(out, "\n"), out)
	eventually(t, 10*time.Second, "an answer clears the outage", func() bool {
		if len(f.calls) == 0 {
			clk.advanceToNext(t) // a job may still wait for its retry
		}
		for len(f.calls) > 0 {
			<-f.calls
		}
		for _, j := range jobs {
			if j.get().StoreUnreachableSince != nil {
				return false
			}
		}
		return true
	})
}

// Wedged judges the loop, not the store: a job whose store has not
// answered for minutes but whose attempts end (in errors) is not stuck; one
// whose attempts stopped ending for 3 ttl + 3 retry_every is.
func TestWedgedMeansTheLoopIsStuck(t *testing.T) {
	now := time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC)
	down := now.Add(-10 * time.Minute)
	outage := JobStatus{Job: "outage", TTL: 10 * time.Second, RetryEvery: time.Second,
		LastLeaseOp: down, LastAttempt: now.Add(-11 * time.Second), StoreUnreachableSince: &down}
	stuck := JobStatus{Job: "stuck", TTL: 10 * time.Second, RetryEvery: time.Second,
		LastLeaseOp: now.Add(-40 * time.Second), LastAttempt: now.Add(-34 * time.Second)}
	started := JobStatus{Job: "started", TTL: 10 * time.Second, RetryEvery: time.Second, LastLeaseOp: now.Add(-35 * time.Second)}
	lock := JobStatus{Job: "lock", LastLeaseOp: down} // mode = "lock": TTL 0, not judged
	got := Wedged([]JobStatus{outage, stuck, started, lock}, now)
	if len(got) != 2 || !strings.HasPrefix(got[0], "stuck: loop stuck: no lease operation ended for 34s (limit 33s)") ||
		!strings.HasPrefix(got[1], "started: loop stuck") {
		t.Errorf("Wedged = %q, want stuck and started (no attempt ended since the start) only", got)
	}
	if got := StoreUnreachable([]JobStatus{outage, stuck}, now); len(got) != 1 || !strings.Contains(got[0], "store unreachable since 2026-11-27T19:50:00Z (10m0s ago, 1 job(s))") {
		t.Errorf("StoreUnreachable = %q", got)
	}
}
