package clusterfaults

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	ec "github.com/electd/electd/internal/cluster"
	"github.com/electd/electd/internal/teststore"
)

// pgCluster is a PostgreSQL primary with a streaming standby on each other
// host (pg_basebackup -R): asynchronous replication, PostgreSQL's default.
// The agents reach it with the multi-host DSN docs/providers/sql.md
// describes (every host, target_session_attrs=read-write), which follows a
// promotion by itself. A failover is what a failover manager does, at
// once: the old primary is stopped if it still runs (fenced), a standby is
// promoted (pg_promote), and every other member is rebuilt as a standby of
// the new primary (a fresh base backup: the old primary, and a standby
// that had received more than the promoted one, cannot follow it).
type pgCluster struct {
	t    *testing.T
	h    *hosts
	base string // owned by the postgres user
	bin  string // the server's bin directory
	*members
	prim int
}

const pgPort = "5432"

func newPostgres(t *testing.T, h *hosts) store {
	if why := teststore.HavePostgresServer(); why != "" {
		t.Skip(why)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, k int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[k]) })
	if len(dirs) == 0 {
		t.Skip("PostgreSQL's server programs are not under /usr/lib/postgresql/*/bin")
	}
	base, err := os.MkdirTemp("", "electd-clusters-pg-")
	if err != nil {
		t.Fatal(err)
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("no postgres user to run PostgreSQL as: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(base, uid, gid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) }) // after the servers stop (cleanups run last first)
	p := &pgCluster{t: t, h: h, base: base, bin: dirs[0], members: newMembers(t, h, "postgres"), prim: 1}
	p.as(1, "initdb", "-D", p.data(1), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
	hba := fmt.Sprintf("host all all %s.0/24 trust\nhost replication all %s.0/24 trust\n", subnet, subnet)
	f, err := os.OpenFile(filepath.Join(p.data(1), "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(hba)
	f.Close()
	p.start(1)
	p.waitServing(1)
	for i := 2; i <= h.n; i++ {
		p.rejoin(i)
	}
	if !ec.Until(60*time.Second, 200*time.Millisecond, func() bool { return p.healthy(1) }) {
		t.Fatalf("PostgreSQL not serving within 60s:\n%s", p.logs())
	}
	return p
}

func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func (p *pgCluster) name() string { return "postgres" }

func (p *pgCluster) data(i int) string { return filepath.Join(p.base, fmt.Sprintf("h%d", i)) }

// as runs a PostgreSQL program as the postgres user in host i's namespace.
func (p *pgCluster) as(i int, prog string, args ...string) string {
	p.t.Helper()
	argv := p.h.in(i, append([]string{"runuser", "-u", "postgres", "--", filepath.Join(p.bin, prog)}, args...)...)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

func (p *pgCluster) block() string {
	var hosts, ports []string
	for i := 1; i <= p.h.n; i++ {
		hosts = append(hosts, p.h.addr(i))
		ports = append(ports, pgPort)
	}
	dsn := fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable connect_timeout=2 target_session_attrs=read-write",
		strings.Join(hosts, ","), strings.Join(ports, ","))
	return ec.SQLBlock("postgres", dsn, "")
}

func (p *pgCluster) start(i int) {
	p.t.Helper()
	argv := p.h.in(i, "runuser", "-u", "postgres", "--", filepath.Join(p.bin, "postgres"), "-D", p.data(i),
		"-p", pgPort, "-c", "listen_addresses="+p.h.addr(i), "-c", "unix_socket_directories=",
		"-c", "wal_level=replica", "-c", "max_wal_senders=5", "-c", "fsync=off",
		"-c", "shared_buffers=16MB", "-c", "max_connections=60")
	p.run(i, p.base, argv...)
}

// psql runs q on host i's server, from host from; its output, trimmed.
func (p *pgCluster) psql(from, i int, q string) (string, error) {
	argv := p.h.in(from, "timeout", "3", filepath.Join(p.bin, "psql"), "-h", p.h.addr(i), "-p", pgPort,
		"-U", "postgres", "-d", "postgres", "-Atc", q)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=1")
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

func (p *pgCluster) waitServing(i int) {
	p.t.Helper()
	if !ec.Until(60*time.Second, 200*time.Millisecond, func() bool { _, err := p.psql(i, i, "SELECT 1"); return err == nil }) {
		p.t.Fatalf("PostgreSQL on h%d not serving within 60s:\n%s", i, p.logs())
	}
}

// healthy: the primary takes writes and every standby is in recovery,
// streaming from it, all as seen from host from.
func (p *pgCluster) healthy(from int) bool {
	for i := 1; i <= p.h.n; i++ {
		want := "t"
		if i == p.prim {
			want = "f"
		}
		if v, err := p.psql(from, i, "SELECT pg_is_in_recovery()"); err != nil || v != want {
			return false
		}
	}
	v, err := p.psql(from, p.prim, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
	return err == nil && v == strconv.Itoa(p.h.n-1)
}

func (p *pgCluster) leader(int) (int, error) { return p.prim, nil }

func (p *pgCluster) restart(i int) { p.rejoin(i) }

// electionTime is the suite's failover (stop the old primary, promote a
// standby: about a second) and the multi-host DSN finding the new primary.
func (p *pgCluster) electionTime() time.Duration { return 2 * time.Second }

func (p *pgCluster) primary() int { return p.prim }

// failover stops the old primary if it still runs (a failover manager
// fences it) and promotes host to's standby.
func (p *pgCluster) failover(old, to int) {
	p.t.Helper()
	select {
	case <-p.procs[old].Exited():
	default:
		p.kill(old)
	}
	// pg_promote without waiting (psql's 3 s could cut a slow promotion
	// short), then until it takes writes.
	if _, err := p.psql(to, to, "SELECT pg_promote(false)"); err != nil {
		p.t.Fatalf("pg_promote on h%d: %v\n%s", to, err, p.logs())
	}
	if !ec.Until(30*time.Second, 50*time.Millisecond, func() bool {
		v, err := p.psql(to, to, "SELECT pg_is_in_recovery()")
		return err == nil && v == "f"
	}) {
		p.t.Fatalf("h%d not promoted within 30s:\n%s", to, p.logs())
	}
	p.prim = to
}

// rejoin rebuilds host i's member as a standby of the primary.
func (p *pgCluster) rejoin(i int) {
	p.t.Helper()
	if pr := p.procs[i]; pr != nil {
		pr.Stop()
	}
	if err := os.RemoveAll(p.data(i)); err != nil {
		p.t.Fatal(err)
	}
	p.as(i, "pg_basebackup", "-D", p.data(i), "-R", "-X", "stream", "-c", "fast",
		"-h", p.h.addr(p.prim), "-p", pgPort, "-U", "postgres")
	p.start(i)
	p.waitServing(i)
}

// hold stops host i's standby receiving WAL (its primary_conninfo
// emptied), keeping what it has.
func (p *pgCluster) hold(i int) {
	p.t.Helper()
	for _, q := range []string{"ALTER SYSTEM SET primary_conninfo = ''", "SELECT pg_reload_conf()"} {
		if _, err := p.psql(i, i, q); err != nil {
			p.t.Fatalf("h%d: %s: %v", i, q, err)
		}
	}
	if !ec.Until(10*time.Second, 50*time.Millisecond, func() bool {
		v, err := p.psql(i, i, "SELECT count(*) FROM pg_stat_wal_receiver")
		return err == nil && v == "0"
	}) {
		p.t.Fatalf("h%d: the standby's WAL receiver did not stop", i)
	}
}

// token is the job's token in host i's copy ("" when it has none).
func (p *pgCluster) token(i int, job string) string {
	v, _ := p.psql(i, i, fmt.Sprintf(`SELECT token FROM electd_leases WHERE "key" = '%s'`, job))
	return v
}
