package faults

import (
	"context"
	dbsql "database/sql"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the driver the sql provider uses for sqlite

	ec "github.com/electd/electd/internal/cluster"
	"github.com/electd/electd/internal/teststore"
)

// store is one lease store under test, with the faults it supports.
type store struct {
	name string
	// upstream is the address agents reach through their proxies; empty for
	// a store without a network (SQLite), which gets no connection faults.
	upstream string
	// block is the provider block of an agent that reaches the store at
	// addr (its proxy).
	block func(addr string) string
	// restart stops the store server and starts it again on the same
	// address and data; nil when the test must not restart it.
	restart func() error
	// stall makes the store unresponsive for d, then lets it go on.
	stall     func(d time.Duration) error
	stallHow  string
	restarted string // how restart works, for the report
}

// newStore sets up the named store for one run: a fresh SQLite file, a
// fresh PostgreSQL or MySQL table, a private redis-server or etcd.
func newStore(t *testing.T, name string) *store {
	t.Helper()
	switch name {
	case "sqlite":
		return sqliteStore(t)
	case "postgres":
		return postgresStore(t)
	case "mysql":
		return mysqlStore(t)
	case "redis":
		return redisStore(t)
	case "etcd":
		return etcdStore(t)
	case "zookeeper":
		return zookeeperStore(t)
	case "nats":
		return natsStore(t)
	}
	t.Fatalf("unknown store %q", name)
	return nil
}

// sqliteStore is a file shared by the agents. Stalled by a transaction of
// the test's own that holds the database's write lock (BEGIN EXCLUSIVE):
// what a backup or a stuck writer does.
func sqliteStore(t *testing.T) *store {
	path := filepath.Join(t.TempDir(), "leases.db")
	return &store{
		name: "sqlite",
		block: func(string) string {
			return ec.SQLBlock("sqlite", path, "")
		},
		stall: func(d time.Duration) error {
			db, err := dbsql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
			if err != nil {
				return fmt.Errorf("sqlite stall: open: %w", err)
			}
			defer db.Close()
			return holdLock(db, "BEGIN EXCLUSIVE", d, "ROLLBACK")
		},
		stallHow: "a BEGIN EXCLUSIVE transaction held by the test",
	}
}

// holdLock runs begin on one connection, holds what it took for d, then
// runs end.
func holdLock(db *dbsql.DB, begin string, d time.Duration, end string) error {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("stall: connect: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, begin); err != nil {
		return fmt.Errorf("stall: %s: %w", begin, err)
	}
	time.Sleep(d)
	if _, err := conn.ExecContext(ctx, end); err != nil {
		return fmt.Errorf("stall: %s: %w", end, err)
	}
	return nil
}

// postgresStore is a fresh table on the shared server, which must not be
// restarted: connection faults go through the proxies, and a stall is an
// ACCESS EXCLUSIVE lock on the table.
func postgresStore(t *testing.T) *store {
	dsn := ec.PostgresDSN()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("postgres dsn: %v", err)
	}
	upstream := fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	table := "electd_faults_" + ec.RandomSuffix()
	agentDSN := func(addr string) string {
		return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable&connect_timeout=2", cfg.User, addr, cfg.Database)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("postgres at %s is not reachable (scripts/services.sh starts it): %v", upstream, err)
	}
	conn.Close(ctx)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			c.Exec(ctx, "DROP TABLE IF EXISTS "+table)
			c.Close(ctx)
		}
	})
	return &store{
		name:     "postgres",
		upstream: upstream,
		block: func(addr string) string {
			return ec.SQLBlock("postgres", agentDSN(addr), table)
		},
		stall: func(d time.Duration) error {
			ctx := context.Background()
			c, err := pgx.Connect(ctx, dsn)
			if err != nil {
				return fmt.Errorf("postgres stall: connect: %w", err)
			}
			defer c.Close(ctx)
			tx, err := c.Begin(ctx)
			if err != nil {
				return fmt.Errorf("postgres stall: begin: %w", err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
				return fmt.Errorf("postgres stall: lock: %w", err)
			}
			time.Sleep(d)
			return tx.Rollback(ctx)
		},
		stallHow: "LOCK TABLE ... IN ACCESS EXCLUSIVE MODE held by the test",
	}
}

// mysqlStore is a fresh table on the shared MySQL (MariaDB) server, which
// must not be restarted either. A stall is LOCK TABLES ... WRITE held by a
// session of the test: the agents' statements queue behind it, and those
// they gave up on still run once it is lifted, as after a partition.
func mysqlStore(t *testing.T) *store {
	dsn := ec.MySQLDSN()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil || cfg.Net != "tcp" {
		t.Fatalf("mysql dsn: want a tcp address (%v)", err)
	}
	table := "electd_faults_" + ec.RandomSuffix()
	agentDSN := func(addr string) string {
		c := cfg.Clone()
		c.Addr, c.Timeout = addr, 2*time.Second
		return c.FormatDSN()
	}
	db, err := dbsql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("mysql: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("mysql at %s is not reachable (scripts/services.sh starts it): %v", cfg.Addr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		db.ExecContext(ctx, "DROP TABLE IF EXISTS `"+table+"`")
	})
	return &store{
		name:     "mysql",
		upstream: cfg.Addr,
		block: func(addr string) string {
			return ec.SQLBlock("mysql", agentDSN(addr), table)
		},
		stall: func(d time.Duration) error {
			return holdLock(db, "LOCK TABLES `"+table+"` WRITE", d, "UNLOCK TABLES")
		},
		stallHow: "LOCK TABLES ... WRITE held by the test",
	}
}

// redisStore is a private redis-server with appendfsync always, so that a
// SIGKILL and restart loses nothing (without persistence a restarted
// server forgets every token: docs/providers/redis.md).
func redisStore(t *testing.T) *store {
	dir := t.TempDir()
	port := teststore.MustFreePort(t)
	args := []string{"--appendonly", "yes", "--appendfsync", "always"}
	p, err := teststore.StartRedisAt(t, port, dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "faults-" + ec.RandomSuffix() + ":"
	s := &store{
		name:     "redis",
		upstream: teststore.Addr(port),
		block: func(addr string) string {
			return ec.RedisBlock(prefix, addr)
		},
		stallHow:  "SIGSTOP of redis-server, then SIGCONT",
		restarted: "SIGKILL, then a new redis-server on the same port and append-only file",
	}
	s.restart = func() error {
		p.Stop()
		_, np, err := teststore.StartRedisProc(dir, port, args...)
		if err != nil {
			return fmt.Errorf("restart redis: %w", err)
		}
		p = np
		t.Cleanup(np.Stop)
		return nil
	}
	s.stall = func(d time.Duration) error { return freeze(p, d) }
	return s
}

// etcdStore is a private single-member etcd, restarted on its own data.
func etcdStore(t *testing.T) *store {
	dir := t.TempDir()
	cport, pport := teststore.MustFreePort(t), teststore.MustFreePort(t)
	endpoint, p := teststore.StartEtcdAt(t, dir, cport, pport)
	prefix := "/faults-" + ec.RandomSuffix() + "/"
	return &store{
		name:     "etcd",
		upstream: endpoint,
		block: func(addr string) string {
			return ec.EtcdBlock(prefix, []string{addr}, ec.Str("dial_timeout", "1s"))
		},
		restart: func() error {
			p.Stop()
			_, np, err := teststore.StartEtcdProc(dir, cport, pport)
			if err != nil {
				return fmt.Errorf("restart etcd: %w", err)
			}
			p = np
			t.Cleanup(np.Stop)
			return nil
		},
		stall:     func(d time.Duration) error { return freeze(p, d) },
		stallHow:  "SIGSTOP of etcd, then SIGCONT",
		restarted: "SIGKILL, then etcd again on the same ports and data directory",
	}
}

// zookeeperStore is a private standalone ZooKeeper (tickTime 100 ms),
// restarted on its own data: its transaction log keeps the tokens and the
// open sessions, as in production.
func zookeeperStore(t *testing.T) *store {
	dir := t.TempDir()
	port := teststore.MustFreePort(t)
	addr, p := teststore.StartZooKeeperAt(t, dir, port)
	root := "/faults-" + ec.RandomSuffix()
	return &store{
		name:     "zookeeper",
		upstream: addr,
		block: func(addr string) string {
			return ec.ZooKeeperBlock(root, []string{addr}, ec.Str("connect_timeout", "2s"))
		},
		restart: func() error {
			p.Stop()
			_, np, err := teststore.StartZooKeeperProc(dir, port)
			if err != nil {
				return fmt.Errorf("restart zookeeper: %w", err)
			}
			p = np
			t.Cleanup(np.Stop)
			return nil
		},
		stall:     func(d time.Duration) error { return freeze(p, d) },
		stallHow:  "SIGSTOP of the ZooKeeper server, then SIGCONT",
		restarted: "SIGKILL, then ZooKeeper again on the same port and data directory",
	}
}

// natsStore is a private nats-server with JetStream, restarted on its own
// store directory: the server has written what it acknowledged before it
// answers, so a SIGKILL (not a power loss) loses no record.
func natsStore(t *testing.T) *store {
	dir := t.TempDir()
	port := teststore.MustFreePort(t)
	p, err := teststore.StartNATSAt(t, dir, port)
	if err != nil {
		t.Fatal(err)
	}
	bucket := "faults_" + ec.RandomSuffix()
	s := &store{
		name:     "nats",
		upstream: teststore.Addr(port),
		block: func(addr string) string {
			return ec.NATSBlock(bucket, []string{addr}, ec.Str("connect_timeout", "2s"))
		},
		stallHow:  "SIGSTOP of nats-server, then SIGCONT",
		restarted: "SIGKILL, then nats-server again on the same port and store directory",
	}
	s.restart = func() error {
		p.Stop()
		_, np, err := teststore.StartNATSProc(dir, port)
		if err != nil {
			return fmt.Errorf("restart nats: %w", err)
		}
		p = np
		t.Cleanup(np.Stop)
		return nil
	}
	s.stall = func(d time.Duration) error { return freeze(p, d) }
	return s
}

func freeze(p *teststore.Proc, d time.Duration) error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("stall: SIGSTOP: %w", err)
	}
	time.Sleep(d)
	if err := p.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("stall: SIGCONT: %w", err)
	}
	return nil
}
