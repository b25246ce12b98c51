package sql_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	sqlprovider "github.com/electd/electd/providers/sql"
)

// TestPostgresHostLostFirst: a multi-host DSN whose first hosts are a
// refusing one and one lost silently (it takes the connection and never
// answers, as a partitioned server does) still reaches the primary after
// them: a connection that fails moves the next one's start past the host
// that held it up, so the second request gets through. Before, every new
// connection waited on the silent host until its deadline, and an agent
// never reached the primary while the partition lasted.
func TestPostgresHostLostFirst(t *testing.T) {
	t.Parallel()
	s := reach(t, "postgres", "pgx", "ELECTD_TEST_POSTGRES_DSN", defaultPostgresDSN)
	cfg, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts (the kernel's backlog), never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	_, port, _ := net.SplitHostPort(silent.Addr().String())
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, refused, _ := net.SplitHostPort(closed.Addr().String())
	closed.Close()
	dsn := fmt.Sprintf("host=127.0.0.1,127.0.0.1,%s port=%s,%s,%d user=%s password=%s dbname=%s sslmode=disable target_session_attrs=read-write",
		cfg.Host, refused, port, cfg.Port, cfg.User, cfg.Password, cfg.Database)
	table := randomTable()
	t.Cleanup(func() { _, _ = s.admin.Exec(`DROP TABLE IF EXISTS "` + table + `"`) })
	p := open(t, sqlprovider.Settings{Driver: "postgres", DSN: dsn, Table: table})
	defer p.Close()
	var errs []error
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_, err := p.Observe(ctx, "k")
		cancel()
		if err == nil {
			if i == 0 {
				t.Fatal("the first request, on the silent host, succeeded: the test is not testing anything")
			}
			return
		}
		errs = append(errs, err)
	}
	t.Fatalf("two requests of 500ms never reached the server after the silent host: %v", errs)
}
