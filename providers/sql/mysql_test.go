package sql_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
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
	open := reach(t, "mysql", "mysql", "ELECTD_TEST_MYSQL_DSN", defaultMySQLDSN).factory(t)
	a, b := open(t), open(t)
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
	_, err := b.Acquire(ctx, "job", "b", ttl)
	providertest.WantHeld(t, err, "job", "a", la.Token)
	time.Sleep(300 * time.Millisecond) // the holder's bell is taken, the candidate waits on it
	crashed := time.Now()
	if err := a.Close(); err != nil { // no Release: the pool and the bell's connection go
		t.Fatal(err)
	}
	select {
	case k := <-woken:
		if k != "job" {
			t.Fatalf("woken for %q", k)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the candidate was not woken when the holder's connection went")
	}
	_, err = b.Acquire(ctx, "job", "b", ttl)
	var h *providers.HeldError
	if !errors.As(err, &h) || h.Remaining <= 0 {
		t.Fatalf("Acquire after the holder died, %s into a %s term: %v, want held until the term ends", time.Since(crashed), ttl, err)
	}
	time.Sleep(h.Remaining + 10*time.Millisecond)
	lb := providertest.MustAcquire(t, b, "job", "b", ttl)
	if lb.Token != la.Token+1 {
		t.Fatalf("token %d, want %d", lb.Token, la.Token+1)
	}
	if err := b.Release(context.Background(), lb); err != nil {
		t.Fatal(err)
	}
}
