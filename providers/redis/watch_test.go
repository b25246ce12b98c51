package redis_test

import (
	"testing"
	"time"

	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/redis"
)

// TestWatchResubscribes: after the server is killed and restarted, the
// watcher gets a hint (messages may have been missed) and notifications
// flow again on the new connection.
func TestWatchResubscribes(t *testing.T) {
	t.Parallel()
	addrs, procs := servers(t, 1)
	s := redis.Settings{Addresses: addrs, Prefix: randomPrefix()}
	a, b := open(t, s), open(t, s)
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx := ctxT(t, 30*time.Second)
	ch, err := b.Watch(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	restart(t, procs, addrs, 0)
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no hint within 10s of the server restarting")
	}
	// The client of a reconnects by itself; its first call may meet the
	// connection the restart broke.
	var l providers.Lease
	for deadline := time.Now().Add(10 * time.Second); ; {
		if l, err = a.Acquire(ctx, "job", "a", time.Minute); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Acquire after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Let the watcher resubscribe (its backoff is still well under a
	// second) and drop its hints, so the next hint is the release's.
	time.Sleep(2 * time.Second)
	for len(ch) > 0 {
		<-ch
	}
	if err := a.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatal("no notification after the watcher resubscribed")
	}
}
