package teststore

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
)

// Postgres is a PostgreSQL server of a test's own (not the machine's, which
// the other tests share): a data directory under a temporary directory, on
// a free loopback port, trust authentication, streaming replication
// allowed. As root it runs as the postgres user, since initdb and postgres
// refuse to run as root.
type Postgres struct {
	Dir  string // the data directory
	Port int
	Proc *Proc
	run  []string // the prefix that runs a PostgreSQL program (runuser as root)
}

// pgBin finds a PostgreSQL server program: on PATH, else under the newest
// /usr/lib/postgresql/*/bin (Debian keeps them off PATH).
func pgBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, k int) bool { return versionOf(dirs[i]) > versionOf(dirs[k]) })
	for _, d := range dirs {
		if p := filepath.Join(d, name); fileExists(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("teststore: PostgreSQL's %s is not installed (Debian: postgresql)", name)
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// HavePostgresServer says why a test cannot start a PostgreSQL server of its
// own here, or "" when it can.
func HavePostgresServer() string {
	for _, name := range []string{"initdb", "postgres", "pg_basebackup"} {
		if _, err := pgBin(name); err != nil {
			return err.Error()
		}
	}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			return "teststore: running as root and there is no postgres user to run PostgreSQL as"
		}
		if _, err := exec.LookPath("runuser"); err != nil {
			return "teststore: running as root and runuser is missing"
		}
	}
	return ""
}

// pgBase makes a directory the server's user can write, removed with t.
func pgBase(t testing.TB) (dir string, run []string) {
	t.Helper()
	SkipShort(t, "a PostgreSQL server of its own")
	base, err := os.MkdirTemp("", "electd-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(base, uid, gid); err != nil {
			t.Fatal(err)
		}
		run = []string{"runuser", "-u", "postgres", "--"}
	}
	return base, run
}

// StartPostgresPrimary initialises and starts a server that accepts
// streaming standbys. It is stopped (SIGKILL) when t ends.
func StartPostgresPrimary(t testing.TB) *Postgres {
	t.Helper()
	SkipShort(t, "a PostgreSQL server of its own")
	if why := HavePostgresServer(); why != "" {
		t.Skip(why)
	}
	base, run := pgBase(t)
	pg := &Postgres{Dir: filepath.Join(base, "data"), Port: MustFreePort(t), run: run}
	initdb, _ := pgBin("initdb")
	pg.mustRun(t, initdb, "-D", pg.Dir, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
	pg.start(t, base)
	return pg
}

// StartStandby makes a streaming standby of pg (pg_basebackup -R) and starts
// it on a free port: asynchronous replication, as PostgreSQL's default.
func (pg *Postgres) StartStandby(t testing.TB) *Postgres {
	t.Helper()
	base, run := pgBase(t)
	sb := &Postgres{Dir: filepath.Join(base, "data"), Port: MustFreePort(t), run: run}
	bb, _ := pgBin("pg_basebackup")
	pg.mustRun(t, bb, "-D", sb.Dir, "-R", "-X", "stream", "-h", "127.0.0.1", "-p", strconv.Itoa(pg.Port), "-U", "postgres")
	sb.start(t, base)
	return sb
}

func (pg *Postgres) mustRun(t testing.TB, argv ...string) {
	t.Helper()
	argv = append(append([]string{}, pg.run...), argv...)
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("teststore: %v: %v\n%s", argv, err, out)
	}
}

func (pg *Postgres) start(t testing.TB, base string) {
	t.Helper()
	bin, _ := pgBin("postgres")
	argv := append(append([]string{}, pg.run...), bin, "-D", pg.Dir, "-p", strconv.Itoa(pg.Port), "-k", base,
		"-c", "listen_addresses=127.0.0.1", "-c", "wal_level=replica", "-c", "max_wal_senders=5",
		"-c", "fsync=off", "-c", "shared_buffers=16MB", "-c", "max_connections=60")
	p, err := Start(fmt.Sprintf("postgres-%d", pg.Port), base, argv...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	pg.Proc = p
	if err := p.WaitReady(30*time.Second, func(ctx context.Context) error { _, err := pg.Query(ctx, "SELECT 1"); return err }); err != nil {
		t.Fatal(err)
	}
}

// DSN is a libpq DSN of the server's postgres database.
func (pg *Postgres) DSN() string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable connect_timeout=2", pg.Port)
}

// Query runs q and returns the first column of its first row as text ("" for
// no row).
func (pg *Postgres) Query(ctx context.Context, q string) (string, error) {
	db, err := sql.Open("pgx", pg.DSN())
	if err != nil {
		return "", err
	}
	defer db.Close()
	var v sql.NullString
	err = db.QueryRowContext(ctx, q).Scan(&v)
	if err == sql.ErrNoRows {
		return "", nil
	}
	return v.String, err
}

// MustQuery is Query that fails t.
func (pg *Postgres) MustQuery(t testing.TB, q string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := pg.Query(ctx, q)
	if err != nil {
		t.Fatalf("teststore: postgres on %d: %s: %v", pg.Port, q, err)
	}
	return v
}

// HoldReplication stops a standby's WAL receiver (its primary_conninfo
// emptied and reloaded) and waits until it has stopped: writes on the
// primary after it are not received, and a promotion loses them.
func (pg *Postgres) HoldReplication(t testing.TB) {
	t.Helper()
	pg.MustQuery(t, "ALTER SYSTEM SET primary_conninfo = ''")
	pg.MustQuery(t, "SELECT pg_reload_conf()::text")
	deadline := time.Now().Add(10 * time.Second)
	for pg.MustQuery(t, "SELECT count(*)::text FROM pg_stat_wal_receiver") != "0" {
		if time.Now().After(deadline) {
			t.Fatal("teststore: the standby's WAL receiver did not stop")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Promote makes a standby the primary and waits until it takes writes.
func (pg *Postgres) Promote(t testing.TB) {
	t.Helper()
	pg.MustQuery(t, "SELECT pg_promote(true, 30)::text")
	deadline := time.Now().Add(30 * time.Second)
	for pg.MustQuery(t, "SELECT pg_is_in_recovery()::text") != "false" {
		if time.Now().After(deadline) {
			t.Fatal("teststore: the standby was not promoted")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
