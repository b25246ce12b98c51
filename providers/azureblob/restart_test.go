package azureblob_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/azureblob"
)

// The store goes down under a leader and comes back with its data: while it
// is down every call fails with a store error (never a lease verdict, never
// a false success); afterwards the record, and so the token, is as it was.
func TestStoreRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := teststore.MustFreePort(t)
	cs, proc, err := teststore.StartAzuriteProc(dir, port, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proc.Stop)
	s := azureblob.Settings{ConnectionString: cs, Container: "electd-restart"}
	p, other := newProvider(t, s), newProvider(t, s)
	l := mustAcquire(t, p, "job", "a", ttl)

	// Azurite saves its data on SIGTERM (and only every few seconds
	// otherwise); Azure itself never loses acknowledged writes.
	if err := proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-proc.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("Azurite did not stop on SIGTERM")
	}
	for name, call := range map[string]func(context.Context) error{
		"Renew": func(ctx context.Context) error { _, err := p.Renew(ctx, l); return err },
		"Acquire": func(ctx context.Context) error {
			_, err := other.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: ttl})
			return err
		},
		"Observe": func(ctx context.Context) error { _, err := p.Observe(ctx, "job"); return err },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := call(ctx)
		cancel()
		if err == nil || errors.Is(err, providers.ErrLost) || errors.Is(err, providers.ErrHeld) {
			t.Fatalf("%s while the store is down: %v, want a store error", name, err)
		}
	}

	_, proc2, err := teststore.StartAzuriteProc(dir, port, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proc2.Stop)
	got, err := other.Observe(ctxT(t), "job")
	if err != nil {
		t.Fatalf("Observe after the restart: %v", err)
	}
	// Azurite brings leases back expired after a restart (Azure keeps them);
	// the record, and so the token, survives either way.
	t.Logf("after the restart: %+v", got)
	if got.Token != l.Token || got.TTL != ttl {
		t.Fatalf("Observe after the restart = %+v, want token %d and ttl %s kept", got, l.Token, ttl)
	}
	if _, err := p.Renew(ctxT(t), l); err != nil {
		t.Fatalf("Renew after the restart (holder and token still match, nobody took it): %v", err)
	}
	_, err = other.Acquire(ctxT(t), providers.AcquireRequest{Key: "job", Holder: "b", TTL: ttl})
	wantHeld(t, err, "a", l.Token)
}
