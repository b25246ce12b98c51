package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the postgres driver for the store-side counters

	"github.com/electd/electd/internal/teststore"
)

// Stores the machine runs already (scripts/services.sh starts them).
const (
	pgBase   = "postgres://postgres@127.0.0.1:5432/"
	pgDSN    = pgBase + "test?sslmode=disable"
	mysqlDSN = "root@tcp(127.0.0.1:3306)/test"
	// benchDB is a database of its own for the scale suite, so that its
	// transaction counters are not mixed with other tests on `test`.
	benchDB = "electd_bench"
)

// storeTB lets the bench call teststore's Start* helpers, which take a
// testing.TB, outside a test. Only the methods teststore calls are
// implemented; the embedded nil interface makes any other call panic, which
// would be a bug of this adapter. Fatal panics with fatalError, which
// startStore turns back into an error.
type storeTB struct {
	testing.TB
	s *stores
}

type fatalError struct{ msg string }

func (t storeTB) Helper()           {}
func (t storeTB) Fatal(args ...any) { panic(fatalError{fmt.Sprint(args...)}) }
func (t storeTB) Fatalf(format string, args ...any) {
	panic(fatalError{fmt.Sprintf(format, args...)})
}
func (t storeTB) Cleanup(f func()) { t.s.onClose(f) }
func (t storeTB) TempDir() string {
	d, err := os.MkdirTemp(t.s.dir, "store-")
	if err != nil {
		panic(fatalError{err.Error()})
	}
	return d
}

// stores starts each store once, on first use, and stops them all at the end.
type stores struct {
	dir string

	mu       sync.Mutex
	started  map[string]any
	cleanups []func()
}

func newStores(dir string) *stores { return &stores{dir: dir, started: map[string]any{}} }

func (s *stores) onClose(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

// Close stops every store started, newest first.
func (s *stores) Close() {
	s.mu.Lock()
	fs := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// start runs fn with the adapter and turns its Fatal into an error.
func (s *stores) start(fn func(t testing.TB)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatalError)
			if !ok {
				panic(r)
			}
			err = errors.New(f.msg)
		}
	}()
	fn(storeTB{s: s})
	return nil
}

// once returns the value cached under name, or starts it.
func once[T any](s *stores, name string, start func() (T, error)) (T, error) {
	s.mu.Lock()
	if v, ok := s.started[name]; ok {
		s.mu.Unlock()
		return v.(T), nil
	}
	s.mu.Unlock()
	v, err := start()
	if err != nil {
		return v, fmt.Errorf("start %s: %w", name, err)
	}
	s.mu.Lock()
	s.started[name] = v
	s.mu.Unlock()
	return v, nil
}

// etcdStore is one etcd server: its client endpoint and its process.
type etcdStore struct {
	endpoint string
	proc     *teststore.Proc
}

// etcd returns the shared etcd server (failover and anchors).
func (s *stores) etcd() (etcdStore, error) {
	return once(s, "etcd", s.newEtcd)
}

// newEtcd starts a fresh etcd server (the scale suite wants its own, so
// that its request counters are the agent's alone).
func (s *stores) newEtcd() (etcdStore, error) {
	var e etcdStore
	err := s.start(func(t testing.TB) { e.endpoint, e.proc = teststore.StartEtcd(t) })
	return e, err
}

// redis returns n redis-servers of their own (1 for single, 3 for Redlock).
func (s *stores) redis(n int) ([]string, error) {
	return once(s, fmt.Sprintf("redis-%d", n), func() ([]string, error) {
		var addrs []string
		err := s.start(func(t testing.TB) {
			for range n {
				a, _ := teststore.StartRedis(t)
				addrs = append(addrs, a)
			}
		})
		return addrs, err
	})
}

func (s *stores) azurite() (string, error) {
	return once(s, "azurite", func() (string, error) {
		var cs string
		err := s.start(func(t testing.TB) { cs, _ = teststore.StartAzurite(t) })
		return cs, err
	})
}

func (s *stores) datastore() (string, error) {
	return once(s, "datastore", func() (string, error) {
		var host string
		err := s.start(func(t testing.TB) { host, _ = teststore.StartDatastore(t) })
		return host, err
	})
}

func (s *stores) ferretdb() (string, error) {
	return once(s, "ferretdb", func() (string, error) {
		var uri string
		err := s.start(func(t testing.TB) { uri, _ = teststore.StartFerretDB(t) })
		return uri, err
	})
}

// benchDatabase creates the scale suite's PostgreSQL database when missing
// and returns its DSN.
func benchDatabase(ctx context.Context) (string, error) {
	db, err := sql.Open("pgx", pgDSN)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", benchDB).Scan(&n); err != nil {
		return "", fmt.Errorf("postgres: look for database %s: %w", benchDB, err)
	}
	if n == 0 {
		if _, err := db.ExecContext(ctx, "CREATE DATABASE "+benchDB); err != nil {
			return "", fmt.Errorf("postgres: create database %s: %w", benchDB, err)
		}
	}
	return pgBase + benchDB + "?sslmode=disable", nil
}

// versions of the stores and tools, for the report; what cannot be asked
// says so instead of failing the run.
func storeVersions(ctx context.Context) [][2]string {
	ask := func(argv ...string) string {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			return "unknown (" + strings.TrimSpace(firstLine(string(out))+" "+err.Error()) + ")"
		}
		return strings.TrimSpace(firstLine(string(out)))
	}
	tool := func(name, rel string, args ...string) string {
		bin, err := teststore.Tool(name, rel)
		if err != nil {
			return "not installed"
		}
		return ask(append([]string{bin}, args...)...)
	}
	sqlVersion := func(driver, dsn, q string) string {
		db, err := sql.Open(driver, dsn)
		if err != nil {
			return "unknown (" + err.Error() + ")"
		}
		defer db.Close()
		var v string
		if err := db.QueryRowContext(ctx, q).Scan(&v); err != nil {
			return "unknown (" + err.Error() + ")"
		}
		return v
	}
	return [][2]string{
		{"PostgreSQL", sqlVersion("pgx", pgDSN, "SHOW server_version")},
		{"MariaDB (mysql driver)", ask("mariadb", "-h", "127.0.0.1", "-uroot", "-N", "-e", "SELECT VERSION()")},
		{"SQLite", "modernc.org/sqlite (pure Go, in the agent)"},
		{"Redis", ask("redis-server", "--version")},
		{"etcd", tool("etcd", "", "--version")},
		{"etcdctl", tool("etcdctl", "", "version")},
		{"Azurite", tool("azurite-blob", "azurite/node_modules/.bin/azurite-blob", "--version")},
		{"Datastore emulator", emulatorVersion()},
		{"FerretDB", tool("ferretdb", "bin/ferretdb", "--version")},
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// emulatorVersion reads the version the Cloud SDK records for the
// Datastore emulator component, when it does.
func emulatorVersion() string {
	b, err := os.ReadFile("/usr/lib/google-cloud-sdk/platform/cloud-datastore-emulator/VERSION")
	if err == nil {
		return "cloud-datastore-emulator " + strings.TrimSpace(string(b))
	}
	if _, err := os.Stat(teststore.DatastoreJar); err == nil {
		return "cloud-datastore-emulator (" + teststore.DatastoreJar + ")"
	}
	return "not installed"
}
