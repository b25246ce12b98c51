package sql_test

import (
	"context"
	"crypto/rand"
	dbsql "database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
	sqlprovider "github.com/electd/electd/providers/sql"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
)

const (
	defaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	defaultMySQLDSN    = "root@tcp(127.0.0.1:3306)/test"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func randomTable() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "electd_test_" + hex.EncodeToString(b)
}

func open(t *testing.T, s sqlprovider.Settings) providers.Provider {
	t.Helper()
	p, err := s.Open(context.Background(), hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("Open(%s): %v", s.Driver, err)
	}
	return p
}

// server is a real database server reachable by the tests; a server that is
// down fails the test with how to start it.
type server struct {
	driver, dsn, sqlDriver, envVar string
	admin                          *dbsql.DB
}

func reach(t *testing.T, driver, sqlDriver, envVar, def string) *server {
	t.Helper()
	teststore.SkipShort(t, driver)
	s := &server{driver: driver, dsn: envOr(envVar, def), sqlDriver: sqlDriver, envVar: envVar}
	db, err := dbsql.Open(sqlDriver, s.dsn)
	if err != nil {
		t.Fatalf("%s: %v", driver, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		where := s.dsn // the default holds no secret; a DSN from the environment may
		if os.Getenv(envVar) != "" {
			where = "$" + envVar
		}
		t.Fatalf("%s not reachable at %s: run scripts/services.sh or make test: %v", driver, where, err)
	}
	t.Cleanup(func() { db.Close() })
	s.admin = db
	return s
}

// factory gives each case a fresh table, dropped when the case ends.
func (s *server) factory(t *testing.T) func(*testing.T) providers.Provider {
	table := randomTable()
	t.Cleanup(func() {
		q := `DROP TABLE IF EXISTS "` + table + `"`
		if s.driver == "mysql" {
			q = "DROP TABLE IF EXISTS `" + table + "`"
		}
		if _, err := s.admin.Exec(q); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
	settings := sqlprovider.Settings{Driver: s.driver, DSN: s.dsn, Table: table}
	return func(t *testing.T) providers.Provider { return open(t, settings) }
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		// SQLite needs no server, but the conformance suite waits out
		// real leases: 8 to 20 s here.
		t.Skip("the conformance suite waits out real leases: skipped under -short")
	}
	providertest.Run(t, func(t *testing.T) func(*testing.T) providers.Provider {
		settings := sqlprovider.Settings{Driver: "sqlite", DSN: filepath.Join(t.TempDir(), "leases.db")}
		return func(t *testing.T) providers.Provider { return open(t, settings) }
	}, providertest.Options{
		// A file in a directory that does not exist cannot be opened: the
		// closest honest "store down" for an embedded database.
		Unreachable: func(t *testing.T) providers.Provider {
			return open(t, sqlprovider.Settings{Driver: "sqlite", DSN: filepath.Join(t.TempDir(), "missing", "leases.db")})
		},
		Notifier: true, // releases, through a file watch on the database

	})
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	s := reach(t, "postgres", "pgx", "ELECTD_TEST_POSTGRES_DSN", defaultPostgresDSN)
	providertest.Run(t, s.factory, providertest.Options{
		Unreachable: func(t *testing.T) providers.Provider {
			return open(t, sqlprovider.Settings{Driver: "postgres", DSN: "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2"})
		},
		Notifier: true,
	})
}

func TestMySQL(t *testing.T) {
	t.Parallel()
	s := reach(t, "mysql", "mysql", "ELECTD_TEST_MYSQL_DSN", defaultMySQLDSN)
	providertest.Run(t, s.factory, providertest.Options{
		Unreachable: func(t *testing.T) providers.Provider {
			return open(t, sqlprovider.Settings{Driver: "mysql", DSN: "root@tcp(127.0.0.1:1)/test?timeout=2s"})
		},
		Notifier: true, // releases, through named locks (lockwake.go)
	})
}

// TestConcurrentFirstUse: clients that start together on a table that does
// not exist yet all create it or find it (postgres can fail CREATE TABLE IF
// NOT EXISTS on its catalog when racing).
func TestConcurrentFirstUse(t *testing.T) {
	t.Parallel()
	for _, s := range []*server{
		reach(t, "postgres", "pgx", "ELECTD_TEST_POSTGRES_DSN", defaultPostgresDSN),
		reach(t, "mysql", "mysql", "ELECTD_TEST_MYSQL_DSN", defaultMySQLDSN),
	} {
		t.Run(s.driver, func(t *testing.T) {
			open := s.factory(t)
			errs := make(chan error, 10)
			for range cap(errs) {
				p := open(t)
				t.Cleanup(func() { p.Close() })
				go func() {
					_, err := p.Observe(context.Background(), "job")
					errs <- err
				}()
			}
			for range cap(errs) {
				if err := <-errs; err != nil {
					t.Errorf("first Observe: %v", err)
				}
			}
		})
	}
}
