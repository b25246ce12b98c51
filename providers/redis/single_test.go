package redis_test

import (
	"context"
	"errors"
	"github.com/electd/electd/providers"
	"syscall"
	"testing"
	"time"
)

// TestSingleHung: a single server that hangs (SIGSTOP) makes every call
// fail within its per-server timeout, and a call whose ctx is cancelled
// returns at once with the ctx error.
func TestSingleHung(t *testing.T) {
	t.Parallel()
	s, procs, ctx := fresh(t, 1)
	a := client(t, s)
	const ttl = 2 * time.Second
	l, err := a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if err := procs[0].Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = procs[0].Signal(syscall.SIGCONT) })

	start := time.Now()
	_, err = a.Renew(ctx, l)
	wantStoreError(t, "Renew on a hung server", err)
	if d := time.Since(start); d > ttl/2 {
		t.Fatalf("Renew on a hung server took %s, want about ttl/5 = %s", d, ttl/5)
	}

	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	_, err = a.Observe(cctx, "job")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Observe cancelled while the server hangs: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Observe cancelled after 100ms returned after %s", d)
	}
}
