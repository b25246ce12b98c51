package clusterfaults

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	ec "github.com/electd/electd/internal/cluster"
	"github.com/electd/electd/internal/teststore"
)

// vip is the address that follows Redis's primary, as a virtual IP does in
// production (keepalived): the agents know only it.
var vip = subnet + ".100"

// redisReplicated is a Redis primary with a replica on each other host
// (REPLICAOF, asynchronous), without persistence, behind vip. A failover
// is what a failover manager does, at once: vip leaves the old primary's
// host (which fences it: the agents can no longer reach it, the ones on
// its own host included), the chosen replica is made the primary
// (REPLICAOF NO ONE), vip is added on its host, and every host forgets
// the old address's link-layer neighbour (a gratuitous ARP). The other
// members are made its replicas (a fresh full sync).
type redisReplicated struct {
	t   *testing.T
	h   *hosts
	dir string
	bin string
	*members
	prim int
}

func newRedisReplicated(t *testing.T, h *hosts) store {
	bin, err := teststore.Tool("redis-server", "")
	if err != nil {
		t.Skipf("redis-server is not installed: %v", err)
	}
	r := &redisReplicated{t: t, h: h, dir: t.TempDir(), bin: bin, members: newMembers(t, h, "redis"), prim: 1}
	for i := 1; i <= h.n; i++ {
		r.start(i)
	}
	if !ec.Until(30*time.Second, 200*time.Millisecond, func() bool { return r.ping(1, 1) }) {
		t.Fatalf("redis-server h1 not answering within 30s:\n%s", r.logs())
	}
	h.run(h.ns(1), "ip", "addr", "add", vip+"/24", "dev", "eth0")
	for i := 2; i <= h.n; i++ {
		r.rejoin(i)
	}
	if !ec.Until(30*time.Second, 200*time.Millisecond, func() bool { return r.healthy(1) }) {
		t.Fatalf("Redis primary and replicas not in step within 30s:\n%s", r.logs())
	}
	return r
}

func (r *redisReplicated) name() string { return "redis" }

func (r *redisReplicated) block() string { return ec.RedisBlock("electd-clusters:", vip+":"+redisPort) }

func (r *redisReplicated) start(i int) {
	r.t.Helper()
	argv := r.h.in(i, r.bin, "--port", redisPort, "--bind", "0.0.0.0", "--protected-mode", "no",
		"--save", "", "--appendonly", "no", "--dir", r.dir)
	r.run(i, r.dir, argv...)
}

// cli runs redis-cli against addr from host from; its output, trimmed.
func (r *redisReplicated) cli(from int, addr string, args ...string) (string, error) {
	argv := r.h.in(from, append([]string{"timeout", "2", "redis-cli", "-h", addr, "-p", redisPort}, args...)...)
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	return strings.TrimSpace(string(out)), err
}

func (r *redisReplicated) ping(from, i int) bool {
	out, err := r.cli(from, r.h.addr(i), "ping")
	return err == nil && out == "PONG"
}

// healthy: vip answers as the primary, and every replica's link to it is
// up, seen from host from.
func (r *redisReplicated) healthy(from int) bool {
	out, err := r.cli(from, vip, "info", "replication")
	if err != nil || !strings.Contains(out, "role:master") || !strings.Contains(out, fmt.Sprintf("connected_slaves:%d", r.h.n-1)) {
		return false
	}
	for i := 1; i <= r.h.n; i++ {
		if i == r.prim {
			continue
		}
		out, err := r.cli(from, r.h.addr(i), "info", "replication")
		if err != nil || !strings.Contains(out, "master_link_status:up") {
			return false
		}
	}
	return true
}

func (r *redisReplicated) leader(int) (int, error) { return r.prim, nil }

func (r *redisReplicated) restart(i int) { r.rejoin(i) }

// electionTime is the suite's failover (moving vip, REPLICAOF NO ONE:
// well under a second) and the agents' connections to the old primary
// failing.
func (r *redisReplicated) electionTime() time.Duration { return time.Second }

func (r *redisReplicated) primary() int { return r.prim }

func (r *redisReplicated) failover(old, to int) {
	r.t.Helper()
	_, _ = r.h.try(r.h.ns(old), "ip", "addr", "del", vip+"/24", "dev", "eth0")
	if out, err := r.cli(to, r.h.addr(to), "replicaof", "no", "one"); err != nil || out != "OK" {
		r.t.Fatalf("REPLICAOF NO ONE on h%d: %v %q", to, err, out)
	}
	r.h.run(r.h.ns(to), "ip", "addr", "add", vip+"/24", "dev", "eth0")
	for i := 1; i <= r.h.n; i++ {
		_, _ = r.h.try(r.h.ns(i), "ip", "neigh", "flush", "all")
	}
	r.prim = to
}

// rejoin makes host i's member a replica of the primary, starting it
// again (empty) when it is not running.
func (r *redisReplicated) rejoin(i int) {
	r.t.Helper()
	if p := r.procs[i]; p == nil || exited(p) {
		r.start(i)
		if !ec.Until(30*time.Second, 100*time.Millisecond, func() bool { return r.ping(i, i) }) {
			r.t.Fatalf("redis-server h%d not answering within 30s:\n%s", i, r.logs())
		}
	}
	if out, err := r.cli(i, r.h.addr(i), "replicaof", r.h.addr(r.prim), redisPort); err != nil || !strings.HasPrefix(out, "OK") {
		r.t.Fatalf("REPLICAOF on h%d: %v %q", i, err, out)
	}
	if !ec.Until(30*time.Second, 100*time.Millisecond, func() bool {
		out, err := r.cli(i, r.h.addr(i), "info", "replication")
		return err == nil && strings.Contains(out, "master_link_status:up")
	}) {
		r.t.Fatalf("h%d's replica not in step within 30s:\n%s", i, r.logs())
	}
}

// hold points host i's replica at a closed port of the primary's host: it
// keeps its data and receives nothing more.
func (r *redisReplicated) hold(i int) {
	r.t.Helper()
	if out, err := r.cli(i, r.h.addr(i), "replicaof", r.h.addr(r.prim), "1"); err != nil || !strings.HasPrefix(out, "OK") {
		r.t.Fatalf("REPLICAOF on h%d: %v %q", i, err, out)
	}
}

func (r *redisReplicated) token(i int, job string) string {
	out, _ := r.cli(i, r.h.addr(i), "hget", "electd-clusters:lease:"+job, "token")
	return out
}

func exited(p *teststore.Proc) bool {
	select {
	case <-p.Exited():
		return true
	default:
		return false
	}
}
