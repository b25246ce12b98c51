package faults

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// TestCheckerRules feeds the checker made-up histories: each rule must
// flag what it exists to catch and let through what is allowed, or the
// fault runs' zero counts would mean nothing.
func TestCheckerRules(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	child := func(id int, node string, token uint64, from, to float64) childLife {
		return childLife{id: id, node: node, token: token, pid: 1 << 30, start: at(from), end: at(to), ended: true}
	}
	grandchild := func(id, parent int, node string, token uint64, from, to float64) childLife {
		c := child(id, node, token, from, to)
		c.sub, c.parent = true, parent
		return c
	}
	slots := func(job string, tokens ...uint64) []slotRun { // one run per second from t0
		var out []slotRun
		for i, tok := range tokens {
			if tok == 0 {
				continue // a slot nobody ran
			}
			out = append(out, slotRun{job: job, node: "n", token: tok, slot: at(float64(i)), at: at(float64(i))})
		}
		return out
	}
	// Both task jobs must have run: a healthy background for every case.
	healthy := append(slots(jobTickLead, 1, 1, 1), slots(jobTickLock, 1, 2, 3)...)
	cases := []struct {
		name       string
		h          history
		faults     []faultRec
		pauses     []window
		violations int
		failures   int
		check      func(t *testing.T, r *report)
	}{
		{
			name: "a clean handover",
			h: history{children: []childLife{child(0, "a", 1, 0, 10), child(1, "b", 2, 10.5, 20)},
				writes: []write{{child: 0, token: 1, accepted: true}, {child: 1, token: 2, accepted: true}}, slots: healthy},
			faults: []faultRec{{kind: faultKill, from: at(10), to: at(10)}},
			check: func(t *testing.T, r *report) {
				if g := r.gaps[faultKill]; len(g) != 1 || g[0] != 500*time.Millisecond {
					t.Errorf("gaps after kill-9 = %v, want one of 500ms", g)
				}
			},
		},
		{
			name:       "two children at once, nobody paused",
			h:          history{children: []childLife{child(0, "a", 1, 0, 10), child(1, "b", 2, 9, 20)}, slots: healthy},
			violations: 1, failures: 1,
		},
		{
			name:   "two children at once while the older one's agent was paused",
			h:      history{children: []childLife{child(0, "a", 1, 0, 10), child(1, "b", 2, 9, 20)}, slots: healthy},
			pauses: []window{{node: "a", from: at(5), to: at(8)}}, // overlap ends by 8 + stop_timeout + grace
			check: func(t *testing.T, r *report) {
				if n, _ := r.pausedOverlaps(); n != 1 {
					t.Errorf("paused overlaps = %d, want 1", n)
				}
			},
		},
		{
			name:       "a paused leader's child outlives the grace after SIGCONT",
			h:          history{children: []childLife{child(0, "a", 1, 0, 20), child(1, "b", 2, 9, 30)}, slots: healthy},
			pauses:     []window{{node: "a", from: at(5), to: at(8)}},
			violations: 1, failures: 1,
		},
		{
			name: "a stale write from an agent that was not paused",
			h: history{children: []childLife{child(0, "a", 1, 0, 10), child(1, "b", 2, 10, 20)},
				writes: []write{{child: 1, token: 2, accepted: true, at: at(10)}, {child: 0, token: 1, highest: 2, at: at(10)}}, slots: healthy},
			violations: 1, failures: 1,
		},
		{
			name: "a stale write while paused is fenced, not a violation",
			h: history{children: []childLife{child(0, "a", 1, 0, 10), child(1, "b", 2, 9, 20)},
				writes: []write{{child: 1, token: 2, accepted: true, at: at(9)}, {child: 0, token: 1, highest: 2, at: at(9.5)}}, slots: healthy},
			pauses: []window{{node: "a", from: at(5), to: at(8)}},
			check: func(t *testing.T, r *report) {
				if r.fenced != 1 {
					t.Errorf("fenced = %d, want 1", r.fenced)
				}
			},
		},
		{
			name: "an accepted write with a lower token",
			h: history{children: []childLife{child(0, "a", 1, 0, 10)},
				writes: []write{{child: 0, token: 5, accepted: true}, {child: 0, token: 4, accepted: true}}, slots: healthy},
			violations: 1, failures: 1,
		},
		{
			name:       "a later term with a lower token",
			h:          history{children: []childLife{child(0, "a", 5, 0, 10), child(1, "b", 4, 11, 20)}, slots: healthy},
			violations: 1, failures: 1,
		},
		{
			name: "a slot run twice",
			h: history{children: []childLife{child(0, "a", 1, 0, 10)}, slots: append(healthy,
				slotRun{job: jobTickLock, node: "b", token: 9, slot: at(2), at: at(2)})},
			failures: 1,
		},
		{
			name:     "a slot lost within one term, no fault",
			h:        history{children: []childLife{child(0, "a", 1, 0, 10)}, slots: append(slots(jobTickLead, 1, 0, 1), slots(jobTickLock, 1, 2, 3)...)},
			failures: 1,
		},
		{
			name: "a slot skipped while the run before still ran is counted, not failed",
			h: history{children: []childLife{child(0, "a", 1, 0, 10)}, slots: append([]slotRun{
				{job: jobTickLead, node: "n", token: 1, slot: at(0), at: at(0), end: at(1.2)},
				{job: jobTickLead, node: "n", token: 1, slot: at(2), at: at(2), end: at(2.5)},
			}, slots(jobTickLock, 1, 2, 3)...)},
			check: func(t *testing.T, r *report) {
				if s := r.slots[jobTickLead]; s.overran != 1 || s.lost != 0 {
					t.Errorf("tick-leader = %+v, want 1 skipped while the run before ran, none lost", *s)
				}
			},
		},
		{
			name: "a slot missing after the run before had ended is lost",
			h: history{children: []childLife{child(0, "a", 1, 0, 10)}, slots: append([]slotRun{
				{job: jobTickLead, node: "n", token: 1, slot: at(0), at: at(0), end: at(0.8)},
				{job: jobTickLead, node: "n", token: 1, slot: at(2), at: at(2), end: at(2.5)},
			}, slots(jobTickLock, 1, 2, 3)...)},
			failures: 1,
		},
		{
			name:   "slots skipped across a change of leader are coalesced",
			h:      history{children: []childLife{child(0, "a", 1, 0, 10)}, slots: append(slots(jobTickLead, 1, 0, 0, 2), slots(jobTickLock, 1, 2, 3)...)},
			faults: []faultRec{{kind: faultKill, from: at(0.5), to: at(0.5)}},
			check: func(t *testing.T, r *report) {
				if s := r.slots[jobTickLead]; s.coalesced != 2 || s.lost != 0 {
					t.Errorf("tick-leader = %+v, want 2 coalesced and none lost", *s)
				}
			},
		},
		{
			name:     "a lock slot lost during a SIGHUP burst is lost",
			h:        history{children: []childLife{child(0, "a", 1, 0, 10)}, slots: append(slots(jobTickLead, 1, 1, 1), slots(jobTickLock, 1, 0, 3)...)},
			faults:   []faultRec{{kind: faultHUP, from: at(0.5), to: at(1.5)}},
			failures: 1,
		},
		{
			name:   "a lock slot lost during a store stall is counted, not failed",
			h:      history{children: []childLife{child(0, "a", 1, 0, 10)}, slots: append(slots(jobTickLead, 1, 1, 1), slots(jobTickLock, 1, 0, 3)...)},
			faults: []faultRec{{kind: faultStall, from: at(0.5), to: at(1.5)}},
			check: func(t *testing.T, r *report) {
				if s := r.slots[jobTickLock]; s.lostInFault != 1 {
					t.Errorf("tick-lock = %+v, want 1 lost in a fault", *s)
				}
			},
		},
		{
			name: "a setsid grandchild beside its own parent is one piece of work",
			h: history{children: []childLife{child(0, "a", 1, 0, 10), grandchild(1, 0, "a", 1, 2, 10.2),
				child(2, "b", 2, 10.5, 20)}, slots: healthy},
			faults: []faultRec{{kind: faultSetsid, node: "a", from: at(9), to: at(9)}},
		},
		{
			name: "a setsid grandchild alive when the next leader's child starts",
			h: history{children: []childLife{child(0, "a", 1, 0, 10), grandchild(1, 0, "a", 1, 2, 11),
				child(2, "b", 2, 10.5, 20)}, slots: healthy},
			faults:     []faultRec{{kind: faultSetsid, node: "a", from: at(9), to: at(9)}},
			violations: 1, failures: 1,
		},
		{
			name: "a grandchild beside its parent's restart in the same term",
			h: history{children: []childLife{child(0, "a", 1, 0, 5), grandchild(1, 0, "a", 1, 2, 7),
				child(2, "a", 1, 5.3, 20)}, slots: healthy},
			violations: 1, failures: 1,
		},
		{
			name:     "a lock slot lost during a rejected reload is lost",
			h:        history{children: []childLife{child(0, "a", 1, 0, 10)}, slots: append(slots(jobTickLead, 1, 1, 1), slots(jobTickLock, 1, 0, 3)...)},
			faults:   []faultRec{{kind: faultBadReload, node: "a", from: at(0.5), to: at(1.5)}},
			failures: 1,
		},
		{
			name:     "a leaderless gap no fault explains is reported, not failed",
			h:        history{children: []childLife{child(0, "a", 1, 0, 10), child(1, "b", 2, 30, 40)}, slots: healthy},
			failures: 0,
			check: func(t *testing.T, r *report) {
				if len(r.spurious) != 1 {
					t.Errorf("spurious gaps = %v, want 1", r.spurious)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			end := at(40)
			r := check(tc.h, tc.faults, tc.pauses, end)
			if len(r.violations) != tc.violations || len(r.failures) != tc.failures {
				t.Errorf("violations %d, failures %d; want %d, %d:\n%s", len(r.violations), len(r.failures),
					tc.violations, tc.failures, strings.Join(r.failures, "\n"))
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// TestProxy checks the two ways the proxy breaks a connection.
func TestProxy(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					c.Write([]byte(sc.Text() + "\n"))
				}
			}()
		}
	}()
	p := newProxy(t, echo.Addr().String())
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", p.addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	ask := func(c net.Conn, in *bufio.Reader, wait time.Duration) (string, error) {
		c.SetDeadline(time.Now().Add(wait))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return "", err
		}
		return in.ReadString('\n')
	}

	c, in := dial()
	if got, err := ask(c, in, time.Second); err != nil || got != "ping\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	// freeze: nothing comes back, then the held bytes arrive after "up".
	p.set("freeze")
	if got, err := ask(c, in, 300*time.Millisecond); err == nil {
		t.Fatalf("frozen proxy answered %q", got)
	}
	p.set("up")
	c.SetDeadline(time.Now().Add(time.Second))
	if got, err := in.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("after a freeze the held request should be answered late: %q, %v", got, err)
	}

	// cut: the open connection breaks and new ones are refused.
	p.set("cut")
	if _, err := ask(c, in, time.Second); err == nil {
		t.Fatal("a cut connection still answered")
	}
	// A connection made during a cut is reset, at once or on first use.
	if c2, err := net.Dial("tcp", p.addr()); err == nil {
		defer c2.Close()
		if _, err := ask(c2, bufio.NewReader(c2), time.Second); err == nil {
			t.Fatal("a connection made during a cut answered")
		}
	}
	p.set("up")
	c3, in3 := dial()
	if got, err := ask(c3, in3, time.Second); err != nil || got != "ping\n" {
		t.Fatalf("after a cut: %q, %v", got, err)
	}
}
