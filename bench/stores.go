package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the postgres driver for the store-side counters

	"github.com/electd/electd/internal/cluster"
	"github.com/electd/electd/internal/teststore"
)

// benchDB is a database of its own for the scale suite, so that its
// transaction counters are not mixed with other tests on the machine's
// PostgreSQL test database (cluster.PostgresDSN).
const benchDB = "electd_bench"

// benchDatabase creates the scale suite's PostgreSQL database when missing
// and returns its DSN.
func benchDatabase(ctx context.Context) (string, error) {
	u, err := url.Parse(cluster.PostgresDSN())
	if err != nil {
		return "", fmt.Errorf("postgres dsn: %w", err)
	}
	db, err := sql.Open("pgx", u.String())
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
	u.Path = "/" + benchDB
	return u.String(), nil
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
		{"PostgreSQL", sqlVersion("pgx", cluster.PostgresDSN(), "SHOW server_version")},
		{"MariaDB (mysql driver)", ask("mariadb", "-h", "127.0.0.1", "-uroot", "-N", "-e", "SELECT VERSION()")},
		{"SQLite", "modernc.org/sqlite (pure Go, in the agent)"},
		{"Redis", ask("redis-server", "--version")},
		{"etcd", tool("etcd", "", "--version")},
		{"etcdctl", tool("etcdctl", "", "version")},
		{"ZooKeeper", ask("java", "-cp", teststore.ZooKeeperJar, "org.apache.zookeeper.version.VersionInfoMain")},
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
