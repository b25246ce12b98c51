package datastore

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
)

// TestStoreFailures runs a holder against an emulator of its own that
// freezes (SIGSTOP: a store that is slow), thaws and dies. Every failed call
// returns a store error within its context deadline, never a lease verdict.
func TestStoreFailures(t *testing.T) {
	t.Parallel()
	host, proc := teststore.StartDatastore(t)
	p, err := newProvider(context.Background(), Settings{ProjectID: testProject, Namespace: newNamespace()},
		hclog.NewNullLogger(), host)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l, err := p.Acquire(context.Background(), providers.AcquireRequest{Key: "job", Holder: "a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	renew := func(within time.Duration) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		start := time.Now()
		_, err := p.Renew(ctx, l)
		if took := time.Since(start); took > within+time.Second {
			t.Fatalf("Renew with a %s deadline took %s", within, took)
		}
		return err
	}
	storeError := func(what string, err error) {
		t.Helper()
		if err == nil || errors.Is(err, providers.ErrLost) || errors.Is(err, providers.ErrHeld) {
			t.Fatalf("Renew %s: %v, want a store error", what, err)
		}
		t.Logf("Renew %s: %v", what, err)
	}

	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	err = renew(time.Second)
	storeError("while the store is frozen", err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Renew while the store is frozen: %v, want context.DeadlineExceeded wrapped", err)
	}
	if err := proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := renew(10 * time.Second); err != nil {
		t.Fatalf("Renew after the store thawed: %v", err)
	}

	proc.Stop()
	storeError("after the store died", renew(5*time.Second))
}
