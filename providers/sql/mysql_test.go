package sql_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
	sqlprovider "github.com/electd/electd/providers/sql"
)

// TestMySQLHandover measures a graceful handover on MySQL/MariaDB: the
// candidate waits on the key's named lock, which the holder gives up after
// its release commits.
//
//	go test -count=1 -v -run 'TestMySQLHandover$' ./providers/sql/
func TestMySQLHandover(t *testing.T) {
	t.Parallel()
	open := reach(t, "mysql", "mysql", "ELECTD_TEST_MYSQL_DSN", defaultMySQLDSN).factory(t)
	a, b := open(t), open(t)
	providertest.Handover(t, a, b, providertest.HandoverOptions{Target: 100 * time.Millisecond})
}

// TestMySQLBellOnCrash: a holder that dies without a release drops its
// connection, and its named lock with it: the candidate is woken, and the
// table still refuses it until the term's end. The bell hurries a
// candidate, never a leader.
func TestMySQLBellOnCrash(t *testing.T) {
	t.Parallel()
	srv := reach(t, "mysql", "mysql", "ELECTD_TEST_MYSQL_DSN", defaultMySQLDSN)
	table := randomTable()
	t.Cleanup(func() { srv.admin.Exec("DROP TABLE IF EXISTS `" + table + "`") })
	settings := sqlprovider.Settings{Driver: "mysql", DSN: srv.dsn, Table: table}
	a, b := open(t, settings), open(t, settings)
	ctx := providertest.Context(t)
	const ttl = 3 * time.Second
	la := providertest.MustAcquire(t, a, "job", "a", ttl)
	woken := make(chan string, 10)
	if err := b.(providers.Notifier).Notify(ctx, func(key string) {
		select {
		case woken <- key:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	_, err := b.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: ttl})
	providertest.WantHeld(t, err, "job", "a", la.Token)
	// The holder's bell is taken (IS_USED_LOCK names its connection), and
	// a candidate waits on a bell. The processlist shows GET_LOCK(?, ?)
	// without its arguments: a candidate of a parallel test could stand in
	// for this one, which would then miss the bell (and the test fail).
	bell := sqlprovider.BellName(table, "job")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var taken, waiting bool
		if err := srv.admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?) IS NOT NULL, EXISTS(SELECT 1 FROM information_schema.PROCESSLIST"+
			" WHERE STATE = 'User lock' AND INFO LIKE 'SELECT GET_LOCK(%')", bell).Scan(&taken, &waiting); err != nil {
			t.Fatal(err)
		}
		if taken && waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 10s: bell taken %v, a candidate waiting on a bell %v", taken, waiting)
		}
	}
	crashed := time.Now()
	if err := a.Close(); err != nil { // no Release: the pool and the bell's connection go
		t.Fatal(err)
	}
	select {
	case k := <-woken:
		if k != "job" {
			t.Fatalf("woken for %q", k)
		}
	case <-time.After(providertest.NotifyWithin):
		t.Fatal("the candidate was not woken when the holder's connection went")
	}
	_, err = b.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: ttl})
	var h *providers.HeldError
	if !errors.As(err, &h) || h.Remaining <= 0 {
		t.Fatalf("Acquire after the holder died, %s into a %s term: %v, want held until the term ends", time.Since(crashed), ttl, err)
	}
	time.Sleep(h.Remaining + 10*time.Millisecond) // the term ends by the table's clock
	lb := providertest.MustAcquire(t, b, "job", "b", ttl)
	if lb.Token != la.Token+1 {
		t.Fatalf("token %d, want %d", lb.Token, la.Token+1)
	}
	if err := b.Release(context.Background(), lb); err != nil {
		t.Fatal(err)
	}
}
