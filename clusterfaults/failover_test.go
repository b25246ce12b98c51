package clusterfaults

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"

	ec "github.com/electd/electd/internal/cluster"
)

// replicated is a store with one primary and asynchronous replicas, which
// the suite fails over (PostgreSQL, Redis). leader is the primary's host.
type replicated interface {
	store
	// failover makes host to's member the primary, fencing old (stopping
	// it, or taking its address away) if it still runs, as a failover
	// manager does; the agents' address follows.
	failover(old, to int)
	// rejoin makes host i's member a replica of the primary again.
	rejoin(i int)
	// hold stops host i's replica receiving from the primary; it keeps
	// what it has.
	hold(i int)
	// token is the job's token in host i's copy.
	token(i int, job string) string
}

// failoverRound is one round of faults on a replicated store.
func (s *suite) failoverRound(rs replicated) {
	s.bystander()
	s.killPrimary(rs)
	s.isolatePrimary(rs, false)
	s.isolatePrimary(rs, true)
	s.heldBack(rs)
}

// leadOn hands leadership over (electd step-down) until the leading agent
// runs on host want (on == true) or elsewhere; it says whether it got
// there within 8 handovers.
func (s *suite) leadOn(want int, on bool) bool {
	for k := 0; k < 8; k++ {
		l := s.settled()
		if (l == want) == on {
			return true
		}
		_, rec, err := s.c.Leader()
		if err != nil {
			s.t.Fatal(err)
		}
		s.handover(rec)
	}
	return false
}

// other is a host that is not p.
func (s *suite) other(p int) int { return p%s.h.n + 1 }

// rejoinAll makes every host but the primary's a replica again.
func (s *suite) rejoinAll(rs replicated, to int) {
	for i := 1; i <= s.h.n; i++ {
		if i != to {
			rs.rejoin(i)
		}
	}
}

// window marks a failover's time: an overlap of at most one ttl that
// begins in it is the documented asynchronous-replication window.
func (s *suite) window(from time.Time) {
	s.failovers = append(s.failovers, [2]time.Time{from, time.Now()})
}

// killPrimary: kill -9 of the primary, another member promoted at once.
func (s *suite) killPrimary(rs replicated) {
	s.settled()
	p := s.storeLeader(1)
	to := s.other(p)
	n0, t0 := s.starts(), time.Now()
	rs.kill(p)
	rs.failover(p, to)
	time.Sleep(timing.TTL + rs.electionTime())
	s.window(t0)
	s.measure(fmt.Sprintf("kill -9 the primary (h%d), promote h%d", p, to), t0, n0, timing.TTL+rs.electionTime(), false)
	s.rejoinAll(rs, to)
}

// isolatePrimary: the primary's host is cut off and another member is
// promoted at once; the old primary is fenced. The leading agent is first
// moved onto the primary's host (withLeader) or off it.
func (s *suite) isolatePrimary(rs replicated, withLeader bool) {
	p := s.storeLeader(1)
	if !s.leadOn(p, withLeader) {
		s.t.Logf("%s: the leading agent did not move as wanted within 8 handovers", s.st.name())
	}
	l := s.settled()
	to := s.other(p)
	target := timing.TTL + rs.electionTime()
	what := fmt.Sprintf("isolate the primary (h%d), promote h%d", p, to)
	if l == p {
		target += 2 * time.Second
		what = fmt.Sprintf("isolate leader+primary (h%d), promote h%d", p, to)
	}
	n0, t0 := s.starts(), time.Now()
	s.h.isolate(p)
	rs.failover(p, to)
	if l == p {
		if _, err := s.c.Children.WaitStart(context.Background(), n0, fmt.Sprintf("node-%d", l), 60*time.Second); err != nil {
			s.t.Errorf("%s: no new leader within 60s of isolating the leader's and primary's host h%d", s.st.name(), l)
		}
	} else {
		time.Sleep(timing.TTL + rs.electionTime())
	}
	s.window(t0)
	s.h.heal(p)
	s.measure(what, t0, n0, target, l == p)
	s.rejoinAll(rs, to)
}

// heldBack: a replica stops receiving, leadership is handed over twice
// (electd step-down) so that the last two terms exist only on the primary,
// the primary is killed and that replica promoted. The last term is lost:
// its leader steps down, and the next term must get a token above it (the
// agents' token mark), with at most the documented window of two leaders.
func (s *suite) heldBack(rs replicated) {
	s.settled()
	p := s.storeLeader(1)
	to := s.other(p)
	_, rec, err := s.c.Leader()
	if err != nil {
		s.t.Fatal(err)
	}
	kept := rec.Token
	if !ec.Until(10*time.Second, 100*time.Millisecond, func() bool { return rs.token(to, "worker") == kept }) {
		s.t.Fatalf("%s: h%d's replica does not have token %s within 10s", s.st.name(), to, kept)
	}
	rs.hold(to)
	last := rec
	for k := 0; k < 2; k++ {
		last = s.handover(last)
	}
	lost := last.TokenNum()
	s.sawEverywhere(lost)
	if got := rs.token(to, "worker"); got != kept {
		s.t.Fatalf("%s: h%d's replica has token %s after the handovers, want %s: replication was not held back", s.st.name(), to, got, kept)
	}
	n0, t0 := s.starts(), time.Now()
	rs.kill(p)
	rs.failover(p, to)
	if _, err := s.c.Children.WaitStart(context.Background(), n0, "", 60*time.Second); err != nil {
		s.t.Errorf("%s: no new term within 60s of the failover", s.st.name())
	}
	s.window(t0)
	s.measure(fmt.Sprintf("held back (%s kept, up to %d lost), kill h%d, promote h%d", kept, lost, p, to), t0, n0, timing.TTL+rs.electionTime(), true)
	s.rejoinAll(rs, to)
}

// handover asks the leader of the term started by rec to step down and
// waits for the next term.
func (s *suite) handover(rec ec.Record) ec.Record {
	s.t.Helper()
	var i int
	fmt.Sscanf(rec.Node, "node-%d", &i)
	n0 := s.starts()
	if out, err := s.api(i, "step-down"); err != nil {
		s.t.Fatalf("step-down on %s: %v: %s", rec.Node, err, out)
	}
	next, err := s.c.Children.WaitStart(context.Background(), n0, "", 30*time.Second)
	if err != nil {
		s.t.Fatalf("%s: no new term within 30s of a step-down", s.st.name())
	}
	return next
}

// api runs `electd CMD worker -addr` against host i's agent.
func (s *suite) api(i int, cmd string) (string, error) {
	argv := s.h.in(i, electd(s.t), cmd, "worker", "-addr", "http://"+agentAPI)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	return string(out), err
}

// jobInfo is what /v1/jobs says of the job on host i's agent.
type jobInfo struct {
	TokenMark        uint64 `json:"token_mark"`
	TokenRegressions uint64 `json:"token_regressions"`
}

func (s *suite) job(i int) (jobInfo, error) {
	argv := s.h.in(i, "curl", "-sf", "-m", "2", "http://"+agentAPI+"/v1/jobs")
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		return jobInfo{}, err
	}
	var jobs []jobInfo
	if err := json.Unmarshal(out, &jobs); err != nil || len(jobs) != 1 {
		return jobInfo{}, fmt.Errorf("/v1/jobs: %v: %s", err, out)
	}
	return jobs[0], nil
}

// sawEverywhere waits until every agent's mark has reached token.
func (s *suite) sawEverywhere(token uint64) {
	s.t.Helper()
	if !ec.Until(10*time.Second, 100*time.Millisecond, func() bool {
		for i := 1; i <= s.h.n; i++ {
			if j, err := s.job(i); err != nil || j.TokenMark < token {
				return false
			}
		}
		return true
	}) {
		s.t.Fatalf("not every agent saw token %d within 10s", token)
	}
}

// regressions is what the agents reported: each agent's count of tokens
// the store reported below its mark.
func (s *suite) regressions() string {
	var parts []string
	for i := 1; i <= s.h.n; i++ {
		j, err := s.job(i)
		if err != nil {
			parts = append(parts, fmt.Sprintf("node-%d ?", i))
			continue
		}
		parts = append(parts, fmt.Sprintf("node-%d %d", i, j.TokenRegressions))
	}
	return strings.Join(parts, ", ")
}
