package sql_test

import (
	"context"
	"testing"
	"time"

	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
	sqlprovider "github.com/electd/electd/providers/sql"
)

func pgPair(t *testing.T) (s *server, table string, a, b providers.Provider, w providers.Notifier) {
	t.Helper()
	s = reach(t, "postgres", "pgx", "ELECTD_TEST_POSTGRES_DSN", defaultPostgresDSN)
	table = randomTable()
	t.Cleanup(func() { _, _ = s.admin.Exec(`DROP TABLE IF EXISTS "` + table + `"`) })
	settings := sqlprovider.Settings{Driver: "postgres", DSN: s.dsn, Table: table}
	a, b = open(t, settings), open(t, settings)
	t.Cleanup(func() { a.Close(); b.Close() })
	w, ok := b.(providers.Notifier)
	if !ok {
		t.Fatal("postgres provider does not implement providers.Notifier")
	}
	ctx := context.Background()
	if _, err := a.Observe(ctx, "warm-up"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Observe(ctx, "warm-up"); err != nil {
		t.Fatal(err)
	}
	return s, table, a, b, w
}

// TestPostgresHandover measures a graceful handover: the candidate waits on
// LISTEN and acquires when the release's NOTIFY arrives.
//
//	go test -count=1 -v -run 'TestPostgresHandover$' ./providers/sql/
func TestPostgresHandover(t *testing.T) {
	t.Parallel()
	_, _, a, b, _ := pgPair(t)
	providertest.Handover(t, a, b, providertest.HandoverOptions{Target: 100 * time.Millisecond})
}

// TestPostgresNotifyReconnect kills the listening connection: the
// subscriber hears "every key may have changed" once the listener is back
// (notifications may have been lost) and notifications flow again.
func TestPostgresNotifyReconnect(t *testing.T) {
	t.Parallel()
	s, table, a, _, w := pgPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch := make(chan string, 16)
	if err := w.Notify(ctx, func(key string) {
		select {
		case ch <- key:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	res, err := s.admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1`,
		`LISTEN "electd_`+table+`"`)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("terminated %d listening backends, want 1", n)
	}
	select {
	case key := <-ch:
		if key != "" {
			t.Errorf("after a reconnect: changed(%q), want changed(\"\") (every key)", key)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no hint within 5s after the listening connection was killed")
	}
	l, err := a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for len(ch) > 0 {
		<-ch
	}
	if err := a.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case key := <-ch:
			if key == "job" {
				return
			}
		case <-time.After(providertest.NotifyWithin):
			t.Fatal("no notification of job after the listener reconnected")
		}
	}
}

// TestPostgresNotifyDown: Notify against a server that is down fails
// instead of subscribing to something that will never fire.
func TestPostgresNotifyDown(t *testing.T) {
	t.Parallel()
	p := open(t, sqlprovider.Settings{Driver: "postgres", DSN: "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2"})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.(providers.Notifier).Notify(ctx, func(string) {}); err == nil {
		t.Fatal("Notify against a server that is down succeeded")
	} else {
		t.Log(err)
	}
}
