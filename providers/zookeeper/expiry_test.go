package zookeeper

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
)

const envHolder = "ELECTD_ZK_TEST_HOLDER"

// TestHolderProcess is not a test: testCrashedHolder runs the test binary
// as a separate holder process with envHolder set ("servers root ttl"). It
// acquires "job", prints when it sent the Acquire, and waits to be killed.
func TestHolderProcess(t *testing.T) {
	arg := os.Getenv(envHolder)
	if arg == "" {
		t.Skip("run by testCrashedHolder as a child process")
	}
	f := strings.Fields(arg)
	ttl, _ := time.ParseDuration(f[2])
	p, err := New(context.Background(), Settings{Servers: []string{f[0]}, Root: f[1]}, hclog.NewNullLogger())
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	sent := time.Now()
	l, err := p.Acquire(context.Background(), providers.AcquireRequest{Key: "job", Holder: "crashed", TTL: ttl})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Printf("held %d %d\n", l.Token, sent.UnixNano())
	time.Sleep(time.Hour)
}

// testCrashedHolder: a holder process killed with SIGKILL pings no more and
// cannot delete its holder znode; ZooKeeper ends the term when the session
// expires. That is never before the Acquire's sent time + ttl (the agent's
// step-down deadline is earlier), and no later than the kill + the session
// timeout + a tick and some slack. A subscriber hears of it, and the next
// Acquire gets the next token.
func testCrashedHolder(t *testing.T, addr string) {
	root := randomRoot(t)
	const ttl = 2 * time.Second
	s := Settings{Servers: []string{addr}, Root: root}
	q := open(t, s)
	keys := notified(t, q)

	cmd := exec.Command(os.Args[0], "-test.run=^TestHolderProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envHolder+"="+addr+" "+root+" "+ttl.String())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("holder process: %v", err)
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "held" {
		t.Fatalf("holder process said %q", line)
	}
	token, _ := strconv.ParseUint(f[1], 10, 64)
	nanos, _ := strconv.ParseInt(f[2], 10, 64)
	sent := time.Unix(0, nanos)
	for len(keys) > 0 {
		<-keys // the holder's own Acquire
	}
	_, err = q.Acquire(providertest.Context(t), providers.AcquireRequest{Key: "job", Holder: "next", TTL: time.Minute})
	providertest.WantHeld(t, err, "job", "crashed", token)

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var ended time.Time
	for ended.IsZero() {
		select {
		case k := <-keys:
			if k != "job" && k != "" {
				t.Fatalf("notified of %q", k)
			}
			if got := providertest.MustObserve(t, q, "job"); got.Holder == "" {
				ended = time.Now()
			}
		case <-time.After(ttl + 5*time.Second):
			t.Fatal("no notification that the crashed holder's term ended")
		}
	}
	if ended.Before(sent.Add(ttl)) {
		t.Fatalf("the crashed holder's term ended %s after its Acquire was sent, before its ttl %s", ended.Sub(sent), ttl)
	}
	bound := ttl + teststore.ZooKeeperTick + 500*time.Millisecond
	if d := ended.Sub(killed); d > bound {
		t.Errorf("the crashed holder's term ended %s after SIGKILL, want within %s", d, bound)
	}
	t.Logf("SIGKILL of the holder → term ended by ZooKeeper: %s (sent + ttl was %s after the kill)",
		ended.Sub(killed).Round(time.Millisecond), sent.Add(ttl).Sub(killed).Round(time.Millisecond))
	l := providertest.MustAcquire(t, q, "job", "next", time.Minute)
	if l.Token != token+1 {
		t.Fatalf("token after the crash %d, want %d", l.Token, token+1)
	}
}

// testDigest: with username and password the provider authenticates and
// creates its znodes for that user only. A client without credentials, or
// with a wrong password, gets store errors that say to check them, never a
// lease verdict, and never the password.
func testDigest(t *testing.T, addr string) {
	root := "/electd-digest-" + strings.TrimPrefix(randomRoot(t), "/electd-test/")
	good := Settings{Servers: []string{addr}, Root: root, Username: "electd", Password: "zk-pass-1"}
	p := open(t, good)
	l := providertest.MustAcquire(t, p, "job", "a", 5*time.Second)
	l.Value = "v"
	if _, err := p.Renew(providertest.Context(t), l); err != nil {
		t.Fatal(err)
	}
	if got := providertest.MustObserve(t, p, "job"); got.Holder != "a" || got.Value != "v" {
		t.Fatalf("Observe = %+v", got)
	}
	wrong := good
	wrong.Password = "zk-pass-2"
	none := good
	none.Username, none.Password = "", ""
	for name, s := range map[string]Settings{"wrong password": wrong, "no credentials": none} {
		q := open(t, s)
		_, err := q.Observe(providertest.Context(t), "job")
		if err == nil || !strings.Contains(err.Error(), "username and password") {
			t.Errorf("%s: Observe: %v, want an error saying to check username and password", name, err)
		}
		_, err = q.Acquire(providertest.Context(t), providers.AcquireRequest{Key: "job", Holder: "b", TTL: 5 * time.Second})
		if err == nil || errors.Is(err, providers.ErrHeld) || errors.Is(err, providers.ErrLost) {
			t.Errorf("%s: Acquire: %v, want a store error", name, err)
		}
		err = q.Release(providertest.Context(t), l)
		if err == nil || errors.Is(err, providers.ErrLost) {
			t.Errorf("%s: Release: %v, want a store error", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "zk-pass") {
			t.Errorf("%s: the error shows a password: %v", name, err)
		}
	}
	if got := providertest.MustObserve(t, p, "job"); got.Holder != "a" || got.Token != l.Token {
		t.Fatalf("after the refused clients: %+v", got)
	}
}
