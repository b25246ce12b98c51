package agent

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
)

// The balance decisions, on views the test writes: one agent's loop on a
// fake clock over SQLite leads its jobs; the test gives its members the
// other agents' records as a view would, and sees what it hands over. No
// membership goroutine runs: nothing but the test's views moves anything.

type balanceRig struct {
	clk  *fakeClock
	p    providers.Provider
	l    *loop
	m    *members
	jobs []*job
}

// newBalanceRig is node-a leading n jobs.
func newBalanceRig(t *testing.T, n int) *balanceRig {
	t.Helper()
	clk := newFakeClock()
	p := sqliteStore(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := &balanceRig{clk: clk, p: p}
	r.l = newLoop(p, "sql.s", clk, nil, newFleet(config.Agent{NodeID: "node-a", Balance: true}, "node-a#1"), hclog.NewNullLogger())
	r.m = &members{l: r.l, holder: "node-a#1", ttl: 10 * time.Second, slot: -1, wanted: map[string]bool{}, done: make(chan struct{})}
	close(r.m.done) // no goroutine keeps a record
	r.l.members = r.m
	for i := range n {
		spec := fitSpec()
		spec.Name = fmt.Sprintf("job%d", i)
		j := newJob(&spec, r.l, Options{Clock: clk, Shim: self})
		r.jobs = append(r.jobs, j)
		r.l.post(j.start)
	}
	t.Cleanup(func() {
		for _, j := range r.jobs {
			r.l.post(func() { j.retire(ErrStopping) })
			<-j.done()
		}
		r.l.close()
	})
	eventually(t, 10*time.Second, "node-a leads every job", func() bool { return r.leading(t) == n })
	return r
}

// leading is how many jobs node-a leads, read on the loop.
func (r *balanceRig) leading(t *testing.T) int {
	t.Helper()
	done := make(chan int, 1)
	r.l.post(func() {
		n := 0
		for _, j := range r.jobs {
			if j.phase == leading {
				n++
			}
		}
		done <- n
	})
	select {
	case n := <-done:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not answer within 10s")
		return 0
	}
}

// peer is another agent's record as a view reads it: it leads n jobs and
// can lead every job of the rig; seq counts its writes; under, when not
// nil, is the agents it sees under their share (it balances).
func (r *balanceRig) peer(holder string, n int, seq uint64, under []string) record {
	rec := record{Leading: n, Seq: seq, holder: holder, id: canBitsOf(holder)}
	rec.can = make([]byte, canBytes)
	for _, j := range r.jobs {
		bloomAdd(rec.can, j.bits)
	}
	if under != nil {
		rec.under = make([]byte, underBytes)
		for _, h := range under {
			bloomAdd(rec.under, canBitsOf(h))
		}
	}
	return rec
}

// view gives node-a a view of the others, and says how many jobs it leads
// after it.
func (r *balanceRig) view(t *testing.T, recs ...record) int {
	t.Helper()
	done := make(chan struct{})
	r.l.post(func() { r.m.update(recs); close(done) })
	<-done
	return r.leading(t)
}

// Node-a leads 6 jobs; node-b leads its share (2) and node-c none. Node-a
// hands node-c a job only once node-c has been under in two views and
// node-b, which balances too, says it sees node-c under: node-b then
// defers to node-c for the job rather than take it. An agent that does
// not publish what it sees (older, or not balancing) is not waited for.
func TestBalanceWaitsUntilTheOthersSeeTheTakerUnder(t *testing.T) {
	r := newBalanceRig(t, 6)
	const b, c = "node-b#1", "node-c#1"
	if n := r.view(t, r.peer(b, 2, 1, []string{}), r.peer(c, 0, 1, []string{})); n != 6 {
		t.Fatalf("first view of node-c under: node-a leads %d, want 6 (node-c is not ready yet)", n)
	}
	if n := r.view(t, r.peer(b, 2, 2, []string{}), r.peer(c, 0, 2, []string{})); n != 6 {
		t.Fatalf("node-b does not see node-c under: node-a leads %d, want 6", n)
	}
	if n := r.view(t, r.peer(b, 2, 3, []string{c}), r.peer(c, 0, 3, []string{})); n != 5 {
		t.Fatalf("node-b sees node-c under: node-a leads %d, want 5 (one handed over)", n)
	}

	// An older agent (no Seq, no set of agents under) is not waited for.
	r = newBalanceRig(t, 6)
	old := r.peer(b, 2, 0, nil)
	r.view(t, old, r.peer(c, 0, 1, []string{}))
	if n := r.view(t, old, r.peer(c, 0, 2, []string{})); n != 5 {
		t.Fatalf("beside an agent that does not say whom it sees under: node-a leads %d, want 5", n)
	}
}

// An agent whose record stops changing has gone silent (killed, or cut off
// from the store) though its lease lives on: after silentViews views it is
// handed nothing, takes no share, and the others do not defer to it.
func TestBalanceHandsNothingToASilentAgent(t *testing.T) {
	r := newBalanceRig(t, 6)
	const c = "node-c#1"
	r.view(t, r.peer(c, 0, 7, []string{}))
	if n := r.view(t, r.peer(c, 0, 7, []string{})); n != 6 {
		t.Fatalf("node-c's record unchanged since the view before: node-a leads %d, want 6", n)
	}
	if n := r.view(t, r.peer(c, 0, 7, []string{})); n != 6 {
		t.Fatalf("node-c silent for %d views: node-a leads %d, want 6", silentViews, n)
	}
	done := make(chan string, 1)
	r.l.post(func() {
		done <- fmt.Sprintf("view %d, target %d, others under %v, deferral %s", len(r.m.view), r.m.target, r.m.othersUnder, r.jobs[0].deferral())
	})
	if got, want := <-done, "view 0, target 6, others under false, deferral 0s"; got != want {
		t.Errorf("after node-c went silent: %s; want no other agent in the view, and no deferral", got)
	}
	// Heard again: a live agent under its share, handed a job once seen
	// under in two views.
	r.view(t, r.peer(c, 0, 8, []string{}))
	if n := r.view(t, r.peer(c, 0, 9, []string{})); n != 5 {
		t.Fatalf("node-c heard again and under in two views: node-a leads %d, want 5", n)
	}
}

// An agent over its share defers to one under it for a lease that is
// released: with the store's notifications flowing it does not poll the
// lease before the term's end (a poll could land between the release and
// its notification), and one freed while its own attempt is on its way
// to the store is tried again after the deferral: the attempt is
// refused (the holder still had it), the release's notification came
// meanwhile, and the agent tries again after the deferral, not at once
// (it took the job 4 ms after the release, over node-c's head, in a
// rollout of 30 jobs).
func TestBalanceDefersWhenFreedDuringAnAttempt(t *testing.T) {
	r := newBalanceRig(t, 6)
	spec := fitSpec()
	spec.Name = "held"
	if _, err := r.p.Acquire(context.Background(), providers.AcquireRequest{Key: spec.Name, Holder: "node-b#1", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	j := newJob(&spec, r.l, Options{Clock: r.clk, Shim: self})
	r.jobs = append(r.jobs, j)
	// Node-c, under its share and able to lead every job, in one view:
	// not yet handed anything, but deferred to.
	r.view(t, r.peer("node-c#1", 0, 1, []string{}))
	if err := r.l.notify(); err != nil {
		t.Fatal(err)
	}
	r.l.post(j.start)
	waitCandidate := func() {
		t.Helper()
		eventually(t, 10*time.Second, "the job's attempt answered", func() bool {
			done := make(chan bool, 1)
			r.l.post(func() { done <- j.phase == candidate && j.timer != nil })
			return <-done
		})
	}
	waitCandidate()
	// Refused while the store's notifications flow: it does not poll
	// before the term's end (a minute), when a release is notified.
	got := make(chan string, 1)
	r.l.post(func() { got <- j.timer.at.Sub(r.clk.Now()).Round(time.Second).String() })
	if msg := <-got; msg != "1m1s" {
		t.Fatalf("refused by a term with a minute left, notifications flowing: next attempt in %s, want at the term's end and the deferral (1m1s)", msg)
	}
	r.l.post(func() {
		if d := j.deferral(); d != balanceDefer {
			got <- fmt.Sprintf("deferral %s, want %s (node-a over its share, node-c under)", d, balanceDefer)
			return
		}
		// The attempt goes out, and a notification arrives before its
		// answer.
		r.l.cancel(j.timer)
		j.attempt()
		j.notify()
		got <- ""
	})
	if msg := <-got; msg != "" {
		t.Fatal(msg)
	}
	waitCandidate()
	r.l.post(func() {
		got <- fmt.Sprintf("next attempt in %s", j.timer.at.Sub(r.clk.Now()))
	})
	if msg, want := <-got, fmt.Sprintf("next attempt in %s", balanceDefer); msg != want {
		t.Fatalf("refused with a notification on the way: %s; want %s", msg, want)
	}
}

// An agent under its share that holds the jobs off (it handed one over
// itself a moment ago) is handed nothing; once it no longer does, it is
// handed a job only when it could lead it in the view before too. Another
// agent's view may be one view older, and one that still saw the taker
// hold the job off did not defer to it and took the job itself (a hand
// trial of three agents: the job moved twice).
func TestBalanceWaitsAViewAfterTheTakersHoldOff(t *testing.T) {
	r := newBalanceRig(t, 6)
	const c = "node-c#1"
	holding := func(seq uint64) record {
		rec := r.peer(c, 0, seq, []string{})
		rec.held = make([]byte, holdBytes)
		for _, j := range r.jobs {
			bloomAdd(rec.held, j.bits)
		}
		return rec
	}
	r.view(t, holding(1))
	if n := r.view(t, holding(2)); n != 6 {
		t.Fatalf("node-c under but holding every job off: node-a leads %d, want 6", n)
	}
	if n := r.view(t, r.peer(c, 0, 3, []string{})); n != 6 {
		t.Fatalf("node-c's hold-off over in this view only: node-a leads %d, want 6 (another agent may not see it yet)", n)
	}
	if n := r.view(t, r.peer(c, 0, 4, []string{})); n != 5 {
		t.Fatalf("node-c's hold-off over for two views: node-a leads %d, want 5 (one handed over)", n)
	}
}
