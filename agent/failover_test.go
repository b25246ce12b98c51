package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/electd/electd/internal/teststore"
)

// Failovers of the store that lose writes: the agents' token mark
// (mark.go) keeps every term's token above every token handed out before,
// which the store alone no longer knows. Each test runs three agents on one
// job, hands leadership over twice (the second time while replication is
// held back), fails the store over to a copy that missed the last term, and
// checks the tokens of every term that any agent won.

const failoverJob = `
job "f" {
  ttl         = "3s"
  renew_every = "500ms"
  retry_every = "200ms"
}
`

// failoverAgents starts three agents on the provider block.
func failoverAgents(t *testing.T, provider string) []*testAgent {
	var agents []*testAgent
	for i := 1; i <= 3; i++ {
		cfg := loadConfig(t, fmt.Sprintf(`
agent {
  node_id          = "n%d"
  listen           = ""
  shutdown_timeout = "10s"
}
%s
%s`, i, provider, failoverJob))
		agents = append(agents, startAgent(t, cfg))
	}
	return agents
}

// leader waits for exactly one agent to lead f with a token above after,
// and returns it with its token.
func leader(t *testing.T, agents []*testAgent, after uint64, within time.Duration) (*testAgent, uint64) {
	t.Helper()
	var lead *testAgent
	var token uint64
	eventually(t, within, fmt.Sprintf("a leader with a token above %d", after), func() bool {
		lead, token = nil, 0
		for _, a := range agents {
			if s := a.job("f"); s.state == StateLeader && s.token > after {
				lead, token = a, s.token
			}
		}
		return lead != nil
	})
	return lead, token
}

// handover asks the leader to step down and waits for the next term.
func handover(t *testing.T, agents []*testAgent, lead *testAgent, token uint64) (*testAgent, uint64) {
	t.Helper()
	if err := lead.StepDown(context.Background(), "f"); err != nil {
		t.Fatalf("step down: %v", err)
	}
	return leader(t, agents, token, 15*time.Second)
}

// sawEverywhere waits until every agent's mark has reached token.
func sawEverywhere(t *testing.T, agents []*testAgent, token uint64) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("every agent saw token %d", token), func() bool {
		for _, a := range agents {
			if j := a.Jobs(); len(j) != 1 || j[0].TokenMark < token {
				return false
			}
		}
		return true
	})
}

// electedAfter waits for the first term won after since and returns its
// token.
func electedAfter(t *testing.T, agents []*testAgent, since time.Time) uint64 {
	t.Helper()
	var token uint64
	eventually(t, 30*time.Second, "a term won after the failover", func() bool {
		var first time.Time
		for _, a := range agents {
			h, _ := a.History("f")
			for _, tr := range h {
				if tr.Type == "elected" && tr.Time.After(since) && (first.IsZero() || tr.Time.Before(first)) {
					first, token = tr.Time, tr.Token
				}
			}
		}
		return !first.IsZero()
	})
	return token
}

// electedTokens is every term any agent won, in order, and whether a token
// came twice.
func electedTokens(t *testing.T, agents []*testAgent) []uint64 {
	t.Helper()
	var tokens []uint64
	for _, a := range agents {
		h, err := a.History("f")
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range h {
			if tr.Type == "elected" {
				tokens = append(tokens, tr.Token)
			}
		}
	}
	slices.Sort(tokens)
	return tokens
}

// checkFailover: no token was won twice, the first term after the
// failover is above the last before it, and an agent saw and reported the
// store's lower token.
func checkFailover(t *testing.T, agents []*testAgent, lost, after uint64) {
	t.Helper()
	tokens := electedTokens(t, agents)
	for i := 1; i < len(tokens); i++ {
		if tokens[i] == tokens[i-1] {
			t.Errorf("token %d was won twice (terms won: %v)", tokens[i], tokens)
		}
	}
	if after <= lost {
		t.Errorf("the first term after the failover has token %d, not above the lost term's %d", after, lost)
	}
	var reported []string
	for _, a := range agents {
		for _, j := range a.Jobs() {
			if j.TokenMark < lost {
				t.Errorf("%s: token mark %d, below the lost term's %d that every agent saw", a.Info().Node, j.TokenMark, lost)
			}
			if j.TokenRegressions > 0 {
				reported = append(reported, fmt.Sprintf("%s: %d", a.Info().Node, j.TokenRegressions))
			}
		}
	}
	if len(reported) == 0 {
		t.Error("no agent reported the store's token going back")
	}
	t.Logf("terms won: %v; lost term %d, first after the failover %d; regressions reported: %s", tokens, lost, after, strings.Join(reported, ", "))
}

// TestFailoverPostgres: a primary with an asynchronous streaming standby,
// reached through the multi-host DSN the docs describe; the standby stops
// receiving WAL before the second handover and is promoted after the
// primary is killed.
func TestFailoverPostgres(t *testing.T) {
	t.Parallel()
	primary := teststore.StartPostgresPrimary(t)
	standby := primary.StartStandby(t)
	agents := failoverAgents(t, fmt.Sprintf(`
provider "sql" "s" {
  driver = "postgres"
  dsn    = "host=127.0.0.1,127.0.0.1 port=%d,%d user=postgres dbname=postgres sslmode=disable connect_timeout=2 target_session_attrs=read-write"
}`, primary.Port, standby.Port))
	lead, token := leader(t, agents, 0, 20*time.Second)
	lead, token = handover(t, agents, lead, token)
	// Wait for the standby to have the second term, then hold it back.
	eventually(t, 10*time.Second, "the standby has the second term", func() bool {
		v, _ := standby.Query(context.Background(), `SELECT token::text FROM electd_leases WHERE "key" = 'f'`)
		return v == fmt.Sprint(token)
	})
	standby.HoldReplication(t)
	_, lost := handover(t, agents, lead, token)
	sawEverywhere(t, agents, lost) // candidates are refused by the lost term
	failed := time.Now()
	primary.Proc.Stop() // kill -9 of the primary's process group
	standby.Promote(t)
	checkFailover(t, agents, lost, electedAfter(t, agents, failed))
}

// TestFailoverRedis: a primary with a replica; the replica is cut off from
// the primary (pointed at a closed port, keeping its data) before the
// second handover, then the primary is killed, the replica promoted
// (REPLICAOF NO ONE) and the agents' address switched to it, as a virtual
// IP or DNS name would be.
func TestFailoverRedis(t *testing.T) {
	t.Parallel()
	pAddr, pProc := teststore.StartRedis(t)
	rAddr, _ := teststore.StartRedis(t)
	ctx := context.Background()
	replica := goredis.NewClient(&goredis.Options{Addr: rAddr})
	t.Cleanup(func() { replica.Close() })
	host, port, _ := strings.Cut(pAddr, ":")
	if err := replica.ReplicaOf(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	fw := teststore.Forward(t, pAddr)
	agents := failoverAgents(t, fmt.Sprintf(`
provider "redis" "r" {
  addresses = [%q]
}`, fw.Addr))
	lead, token := leader(t, agents, 0, 20*time.Second)
	lead, token = handover(t, agents, lead, token)
	eventually(t, 10*time.Second, "the replica has the second term", func() bool {
		v, _ := replica.HGet(ctx, "electd:lease:f", "token").Result()
		return v == fmt.Sprint(token)
	})
	closed := teststore.MustFreePort(t)
	if err := replica.ReplicaOf(ctx, "127.0.0.1", fmt.Sprint(closed)).Err(); err != nil {
		t.Fatal(err)
	}
	_, lost := handover(t, agents, lead, token)
	sawEverywhere(t, agents, lost)
	if v, _ := replica.HGet(ctx, "electd:lease:f", "token").Result(); v != fmt.Sprint(token) {
		t.Fatalf("the replica has token %s, want %d: replication was not held back", v, token)
	}
	failed := time.Now()
	pProc.Stop()
	if err := replica.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	fw.Switch(rAddr)
	checkFailover(t, agents, lost, electedAfter(t, agents, failed))
}

// TestFailoverRedlock: three servers, two of them restarted empty after two
// handovers, while the third holds the leader's term. The empty servers
// join that term at its next renewal (their counters below its token), so
// the leader keeps it, and the next term's token goes on above it. (A
// quorum of empty servers agreeing on a low token when no term is live is
// the provider's TestRedlockServerLostData.)
func TestFailoverRedlock(t *testing.T) {
	t.Parallel()
	var addrs []string
	var procs []*teststore.Proc
	var ports []int
	for range 3 {
		port := teststore.MustFreePort(t)
		p, err := teststore.StartRedisAt(t, port, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		addrs, procs, ports = append(addrs, teststore.Addr(port)), append(procs, p), append(ports, port)
	}
	agents := failoverAgents(t, fmt.Sprintf(`
provider "redis" "r" {
  addresses = [%q, %q, %q]
}`, addrs[0], addrs[1], addrs[2]))
	lead, token := leader(t, agents, 0, 20*time.Second)
	lead, token = handover(t, agents, lead, token)
	lead, lost := handover(t, agents, lead, token)
	for _, i := range []int{0, 1} {
		procs[i].Stop()
		if _, err := teststore.StartRedisAt(t, ports[i], t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	third := goredis.NewClient(&goredis.Options{Addr: addrs[2]})
	t.Cleanup(func() { third.Close() })
	for i, a := range addrs[:2] {
		c := goredis.NewClient(&goredis.Options{Addr: a})
		eventually(t, 10*time.Second, fmt.Sprintf("server %d joined the leader's term", i), func() bool {
			v, _ := c.HGet(context.Background(), "electd:lease:f", "token").Result()
			w, _ := third.HGet(context.Background(), "electd:lease:f", "token").Result()
			return v != "" && v == w && w == fmt.Sprint(lost)
		})
		c.Close()
	}
	if s := lead.job("f"); s.state != StateLeader || s.token != lost {
		t.Fatalf("the leader of token %d is %v with token %d after two servers restarted empty, want still leading", lost, s.state, s.token)
	}
	_, after := handover(t, agents, lead, lost)
	tokens := electedTokens(t, agents)
	for i := 1; i < len(tokens); i++ {
		if tokens[i] == tokens[i-1] {
			t.Errorf("token %d was won twice (terms won: %v)", tokens[i], tokens)
		}
	}
	if after <= lost {
		t.Errorf("the first term after two servers restarted empty has token %d, not above %d", after, lost)
	}
	t.Logf("terms won: %v; before the restarts %d, first after %d", tokens, lost, after)
}
