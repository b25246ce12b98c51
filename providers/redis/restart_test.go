package redis_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/redis"
)

// restart kills server i and starts it again, empty, on the same port.
func restart(t *testing.T, procs []*teststore.Proc, addrs []string, i int, extra ...string) {
	t.Helper()
	procs[i].Stop()
	port, err := strconv.Atoi(addrs[i][strings.LastIndexByte(addrs[i], ':')+1:])
	if err != nil {
		t.Fatal(err)
	}
	p, err := teststore.StartRedisAt(t, port, t.TempDir(), extra...)
	if err != nil {
		t.Fatal(err)
	}
	procs[i] = p
}

// TestServerRestart: a single server keeps tokens across a crash only with
// an append-only file synced on every write. Without persistence the lease
// hash is gone and tokens start again at 1: the store cannot give more, and
// the docs say so.
func TestServerRestart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		args    []string
		durable bool
	}{
		{"no persistence", nil, false},
		{"appendfsync always", []string{"--appendonly", "yes", "--appendfsync", "always"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			port := teststore.MustFreePort(t)
			proc, err := teststore.StartRedisAt(t, port, dir, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			s := redis.Settings{Addresses: []string{teststore.Addr(port)}, Prefix: "electd:"}
			a := open(t, s)
			t.Cleanup(func() { a.Close() })
			ctx := ctxT(t, 30*time.Second)
			var l1 = mustAcquire(t, a, "job", "a")
			l1.Value = "slot-1"
			if err := a.Release(ctx, l1); err != nil {
				t.Fatal(err)
			}
			l2 := mustAcquire(t, a, "job", "a")

			proc.Stop() // SIGKILL: a crash, not a clean shutdown
			if _, err := teststore.StartRedisAt(t, port, dir, c.args...); err != nil {
				t.Fatal(err)
			}
			// The client reconnects by itself; the first call may meet the
			// connection the crash broke.
			var l3 = l2
			deadline := time.Now().Add(5 * time.Second)
			for {
				l3, err = a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: time.Minute})
				if err == nil || errors.Is(err, providers.ErrHeld) || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if c.durable {
				// The crashed holder's live key survived too: b must wait.
				if err == nil {
					t.Fatalf("Acquire by b after restart = %+v, want held by a (token %d)", l3, l2.Token)
				}
				got, err := a.Observe(ctx, "job")
				if err != nil || got.Holder != "a" || got.Token != l2.Token || got.Value != "slot-1" {
					t.Fatalf("Observe after restart = %+v, %v; want the term from before the crash", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l3.Token != 1 || l3.Value != "" {
				t.Fatalf("after a restart without persistence: token %d value %q; this test documents that they start again (1, \"\")", l3.Token, l3.Value)
			}
			t.Logf("without persistence the token went from %d back to %d across a restart", l2.Token, l3.Token)
		})
	}
}
