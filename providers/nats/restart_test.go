package nats

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
)

// TestServerRestart: a SIGKILLed nats-server started again on its store
// directory has every record: the crashed holder still holds its lease
// until its term ends by the server's clock, tokens go on from where they
// were, and the client reconnects by itself and says so to its watchers.
// While the server is down every operation fails at once, never with a
// lease verdict.
func TestServerRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := teststore.MustFreePort(t)
	proc, err := teststore.StartNATSAt(t, dir, port)
	if err != nil {
		t.Fatal(err)
	}
	s := Settings{Servers: []string{"nats://" + teststore.Addr(port)}, Bucket: "electd"}
	a, b := open(t, s), open(t, s)
	ctx := ctxT(t, 60*time.Second)
	keys := make(chan string, 100)
	if err := b.Notify(ctx, func(k string) { keys <- k }); err != nil {
		t.Fatal(err)
	}
	l1 := mustAcquire(t, a, "job", "a", time.Minute)
	l1.Value = "slot-1"
	if err := a.Release(ctx, l1); err != nil {
		t.Fatal(err)
	}
	l2 := mustAcquire(t, a, "job", "a", 3*time.Second)
	acquired := time.Now()

	proc.Stop() // SIGKILL: a crash, not a clean shutdown
	// Both clients have seen their connection go.
	for deadline := time.Now().Add(10 * time.Second); a.nc.IsConnected() || b.nc.IsConnected(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a client still connected 10s after the server was killed")
		}
	}
	for name, op := range map[string]func() error{
		"Acquire": func() error {
			_, err := b.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: time.Minute})
			return err
		},
		"Renew":   func() error { _, err := a.Renew(ctx, l2); return err },
		"Observe": func() error { _, err := b.Observe(ctx, "job"); return err },
	} {
		start := time.Now()
		err := op()
		if err == nil || errors.Is(err, providers.ErrHeld) || errors.Is(err, providers.ErrLost) {
			t.Fatalf("%s with the server down: %v, want a store error", name, err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s with the server down took %s", name, took)
		}
		t.Logf("%s with the server down: %v", name, err)
	}
	for len(keys) > 0 {
		<-keys
	}

	if _, err := teststore.StartNATSAt(t, dir, port); err != nil {
		t.Fatal(err)
	}
	// The client finds the server again within its reconnect wait.
	var held *providers.HeldError
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = b.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: time.Minute})
		if errors.As(err, &held) || err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if time.Since(acquired) < 3*time.Second {
		if held == nil || held.Holder != "a" || held.Token != l2.Token {
			t.Fatalf("after the restart, within the term: %v, want held by a with token %d", err, l2.Token)
		}
		t.Logf("after the restart: held by %s, %s left", held.Holder, held.Remaining)
	}
	select {
	case k := <-keys:
		if k != "" {
			t.Errorf("first notification after the restart is %q, want \"\" (anything may have changed)", k)
		}
	case <-time.After(5 * time.Second):
		t.Error("no changed(\"\") after the client reconnected")
	}
	time.Sleep(time.Until(acquired.Add(3*time.Second + 100*time.Millisecond))) // the crashed holder's term ends by the server's clock
	l3 := mustAcquire(t, b, "job", "b", time.Minute)
	if l3.Token != l2.Token+1 || l3.Value != "slot-1" {
		t.Fatalf("after the restart: token %d value %q, want %d and the released value", l3.Token, l3.Value, l2.Token+1)
	}
	// The watch still works: the ordered consumer was made again.
	if err := b.Release(ctx, l3); err != nil {
		t.Fatal(err)
	}
	waitKey(t, keys, "job", 15*time.Second)
}

// waitKey waits for a notification of want, skipping others.
func waitKey(t *testing.T, keys <-chan string, want string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case k := <-keys:
			if k == want {
				return
			}
		case <-deadline:
			t.Fatalf("no notification of %q within %s", want, within)
		}
	}
}

// TestServerStall: a server that stops answering (SIGSTOP) makes every
// operation fail by its caller's deadline, and once it goes on, so does
// the client, on the same connection or a new one.
func TestServerStall(t *testing.T) {
	t.Parallel()
	addr, proc := teststore.StartNATS(t)
	p := open(t, Settings{Servers: []string{"nats://" + addr}, Bucket: "electd"})
	l := mustAcquire(t, p, "job", "a", time.Minute)
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, proc.Pid()) // stopped in all its threads
	start := time.Now()
	_, err := p.Renew(ctxT(t, 500*time.Millisecond), l)
	took := time.Since(start)
	if err2 := proc.Signal(syscall.SIGCONT); err2 != nil {
		t.Fatal(err2)
	}
	if err == nil || errors.Is(err, providers.ErrLost) || took > time.Second {
		t.Fatalf("Renew on a stalled server: %v after %s, want a store error by the 500ms deadline", err, took)
	}
	t.Logf("Renew on a stalled server: %v after %s", err, took.Round(time.Millisecond))
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err = p.Renew(ctxT(t, time.Second), l)
		if err == nil || errors.Is(err, providers.ErrLost) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("Renew after the stall: %v", err)
	}
}

// TestNoJetStream: a server without JetStream is named as such.
func TestNoJetStream(t *testing.T) {
	t.Parallel()
	bin, err := teststore.NATSServer()
	if err != nil {
		t.Fatal(err)
	}
	port := teststore.MustFreePort(t)
	proc, err := teststore.Start("nats-nojs", t.TempDir(), bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proc.Stop)
	if err := proc.WaitReady(10*time.Second, teststore.DialReady(teststore.Addr(port))); err != nil {
		t.Fatal(err)
	}
	p := open(t, Settings{Servers: []string{"nats://" + teststore.Addr(port)}, Bucket: "electd"})
	_, err = p.Acquire(ctxT(t, 10*time.Second), providers.AcquireRequest{Key: "job", Holder: "a", TTL: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "JetStream") {
		t.Fatalf("Acquire without JetStream: %v, want an error naming JetStream", err)
	}
	t.Log(err)
}

// waitStopped waits until every thread of process pid is stopped (state T
// in /proc), as a SIGSTOP leaves it.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			t.Fatal(err)
		}
		stopped := len(tasks) > 0
		for _, task := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
			if err != nil {
				stopped = false
				break
			}
			// The state follows the command's closing parenthesis.
			f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
			if len(f) == 0 || f[0] != "T" {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d not stopped in all its threads within 10s of SIGSTOP", pid)
		}
	}
}
