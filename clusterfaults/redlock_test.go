package clusterfaults

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	ec "github.com/electd/electd/internal/cluster"
	"github.com/electd/electd/internal/teststore"
)

// redlockSet is three independent redis-servers, one per host, without
// persistence, as Redlock is deployed: no replication, no consensus. It
// has no leader; for the faults the "store's leader" is the server on the
// host that asks (the leading agent's, see leader), so that:
//   - isolating the store leader's host is isolating the leading agent's
//     host, whose two servers elsewhere still make a quorum for the others;
//   - killing it is a server of the leader's quorum lost and restarted
//     empty (its counter gone): the leader renews on the other two, and the
//     server is brought back in step by the next term (docs/providers/redis.md);
//   - isolating a bystander cuts off one server and one candidate.
type redlockSet struct {
	t   *testing.T
	h   *hosts
	dir string
	bin string
	*members
}

const redisPort = "6379"

func newRedlock(t *testing.T, h *hosts) store {
	bin, err := teststore.Tool("redis-server", "")
	if err != nil {
		t.Skipf("redis-server is not installed: %v", err)
	}
	r := &redlockSet{t: t, h: h, dir: t.TempDir(), bin: bin, members: newMembers(t, h, "redis")}
	for i := 1; i <= h.n; i++ {
		r.start(i)
	}
	if !ec.Until(30*time.Second, 200*time.Millisecond, func() bool { return r.healthy(1) }) {
		t.Fatalf("redis-servers not answering within 30s:\n%s", r.logs())
	}
	return r
}

func (r *redlockSet) name() string { return "redlock" }

func (r *redlockSet) block() string {
	var addrs []string
	for i := 1; i <= r.h.n; i++ {
		addrs = append(addrs, r.h.addr(i)+":"+redisPort)
	}
	return ec.RedisBlock("electd-clusters:", addrs...)
}

func (r *redlockSet) start(i int) {
	r.t.Helper()
	argv := r.h.in(i, r.bin, "--port", redisPort, "--bind", r.h.addr(i), "--protected-mode", "no",
		"--save", "", "--appendonly", "no", "--dir", r.dir)
	r.run(i, r.dir, argv...)
}

// ping says whether host i's server answers host from.
func (r *redlockSet) ping(from, i int) bool {
	argv := r.h.in(from, "timeout", "2", "redis-cli", "-h", r.h.addr(i), "-p", redisPort, "ping")
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	return err == nil && strings.TrimSpace(string(out)) == "PONG"
}

func (r *redlockSet) healthy(from int) bool {
	for i := 1; i <= r.h.n; i++ {
		if !r.ping(from, i) {
			return false
		}
	}
	return true
}

// leader is the server on the asking host (see redlockSet).
func (r *redlockSet) leader(from int) (int, error) { return from, nil }

// restart starts host i's server again, empty.
func (r *redlockSet) restart(i int) {
	r.t.Helper()
	r.start(i)
	if !ec.Until(30*time.Second, 200*time.Millisecond, func() bool { return r.ping(i, i) }) {
		r.t.Fatalf("redis-server h%d not answering within 30s of its restart:\n%s", i, r.logs())
	}
}

// electionTime: there is no leader to elect, but a term won on just two
// servers, one of them the one lost, ends as a lost leader's does (the
// server that missed it joins at a renewal, which a fault right after a
// heal can beat): a new leader within ttl + 2 s, the suite's target for a
// leader cut off.
func (r *redlockSet) electionTime() time.Duration { return 2 * time.Second }
