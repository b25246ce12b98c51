package zookeeper

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
)

// TestRestart kills the ZooKeeper server (SIGKILL: only what it synced to
// its transaction log survives) and starts it again on the same port and
// data. While it is down every operation fails with a store error; once it
// is back the same clients reconnect in the same sessions (ZooKeeper
// restores them, with their ephemeral znodes), the held term and its value
// are still there, a Notify subscription made before the restart says
// changed(""), and tokens go on from where they were.
func TestRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := teststore.MustFreePort(t)
	addr, proc := teststore.StartZooKeeperAt(t, dir, port)
	s := Settings{Servers: []string{addr}, Root: randomRoot(t)}
	a, b := open(t, s), open(t, s)
	const ttl = 20 * time.Second

	la := providertest.MustAcquire(t, a, "job", "a", ttl)
	la.Value = "slot-1"
	if err := a.Release(providertest.Context(t), la); err != nil {
		t.Fatal(err)
	}
	lb := providertest.MustAcquire(t, b, "job", "b", ttl)
	if lb.Token != la.Token+1 || lb.Value != "slot-1" {
		t.Fatalf("before the restart: %+v, want token %d value slot-1", lb, la.Token+1)
	}
	hints := make(chan string, 100)
	if err := a.Notify(providertest.Context(t), func(key string) {
		select {
		case hints <- key:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}

	bs, err := b.session(providertest.Context(t), ttl, true)
	if err != nil {
		t.Fatal(err)
	}
	sessionBefore := bs.conn.SessionID()
	proc.Stop()
	for name, call := range map[string]func(context.Context) error{
		"Acquire": func(ctx context.Context) error {
			_, err := a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: ttl})
			return err
		},
		"Renew":   func(ctx context.Context) error { _, err := b.Renew(ctx, lb); return err },
		"Observe": func(ctx context.Context) error { _, err := a.Observe(ctx, "job"); return err },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		start := time.Now()
		err := call(ctx)
		cancel()
		if err == nil || errors.Is(err, providers.ErrHeld) || errors.Is(err, providers.ErrLost) {
			t.Fatalf("%s while ZooKeeper is down: %v, want a store error", name, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("%s while ZooKeeper is down took %s with a 2s deadline", name, d)
		}
	}

	restarted := time.Now()
	teststore.StartZooKeeperAt(t, dir, port)
	t.Logf("ZooKeeper back %s after the restart began", time.Since(restarted).Round(time.Millisecond))
	if got := providertest.MustObserve(t, a, "job"); got.Holder != "b" || got.Token != lb.Token {
		t.Fatalf("after the restart: %+v, want the holder znode of b (token %d) restored with its session", got, lb.Token)
	}
	renewed, err := b.Renew(providertest.Context(t), lb)
	if err != nil {
		t.Fatalf("Renew after the restart: %v (the session and its holder znode should survive)", err)
	}
	if renewed.Token != lb.Token {
		t.Fatalf("token %d after the restart, want %d", renewed.Token, lb.Token)
	}
	if id := bs.conn.SessionID(); id != sessionBefore {
		t.Fatalf("b's session after the restart: %x, want %x restored", id, sessionBefore)
	}
	if _, stat, err := bs.conn.Get(b.holderPath("job")); err != nil || stat.EphemeralOwner != sessionBefore || stat.Version == 0 {
		t.Fatalf("holder znode after the restart and a Renew: %+v, %v; want it rewritten in b's session %x", stat, err, sessionBefore)
	}
	_, err = a.Acquire(providertest.Context(t), providers.AcquireRequest{Key: "job", Holder: "a", TTL: ttl})
	providertest.WantHeld(t, err, "job", "b", lb.Token)
	select {
	case k := <-hints:
		if k != "" && k != "job" {
			t.Fatalf("notified of %q", k)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no changed(\"\") after the subscription's session came back")
	}
	if err := b.Release(providertest.Context(t), renewed); err != nil {
		t.Fatal(err)
	}
	next := providertest.MustAcquire(t, a, "job", "a", ttl)
	if next.Token != lb.Token+1 || next.Value != "slot-1" {
		t.Fatalf("after the restart: %+v, want token %d value slot-1", next, lb.Token+1)
	}
}

// TestPartition cuts a holder off from ZooKeeper (a proxy that resets its
// connections and refuses new ones): its operations fail with store errors,
// it cannot delete its holder znodes, and ZooKeeper ends its session one
// session timeout after it last heard from it. Once the holder is back, in a
// new session, the term another node took answers ErrLost, never a false
// success, and the term nobody took may be renewed (docs/leases.md: holder and
// token still match).
func TestPartition(t *testing.T) {
	t.Parallel()
	addr, _ := teststore.StartZooKeeper(t)
	px := newProxy(t, addr)
	root := randomRoot(t)
	a := open(t, Settings{Servers: []string{px.addr()}, Root: root})
	b := open(t, Settings{Servers: []string{addr}, Root: root})
	const ttl = time.Second
	taken := providertest.MustAcquire(t, a, "taken", "a", ttl)
	kept := providertest.MustAcquire(t, a, "kept", "a", ttl)
	s, err := a.session(providertest.Context(t), ttl, true)
	if err != nil {
		t.Fatal(err)
	}
	before := s.conn.SessionID()

	px.cut()
	cut := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err = a.Renew(ctx, kept)
	cancel()
	if err == nil || errors.Is(err, providers.ErrLost) {
		t.Fatalf("Renew while cut off: %v, want a store error", err)
	}
	for _, key := range []string{"taken", "kept"} {
		for providertest.MustObserve(t, b, key).Holder != "" {
			if time.Since(cut) > ttl+5*time.Second {
				t.Fatalf("%s still held %s after the holder was cut off", key, time.Since(cut))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("holder cut off → its terms ended by ZooKeeper after %s (ttl %s)", time.Since(cut).Round(time.Millisecond), ttl)
	l := providertest.MustAcquire(t, b, "taken", "b", time.Minute)
	if l.Token != taken.Token+1 {
		t.Fatalf("token %d, want %d", l.Token, taken.Token+1)
	}

	px.heal()
	_, err = a.Renew(providertest.Context(t), taken)
	providertest.WantLost(t, "Renew in a new session of a term another node took", err)
	if after := s.conn.SessionID(); after == before {
		t.Fatalf("session %x survived the cut, want a new one", after)
	}
	r, err := a.Renew(providertest.Context(t), kept)
	if err != nil {
		t.Fatalf("Renew in a new session of a term nobody took: %v", err)
	}
	if r.Token != kept.Token {
		t.Fatalf("token %d, want %d", r.Token, kept.Token)
	}
	if got := providertest.MustObserve(t, b, "kept"); got.Holder != "a" || got.Token != kept.Token {
		t.Fatalf("Observe = %+v, want holder a token %d", got, kept.Token)
	}
}

// proxy forwards TCP connections to a server until cut: then it resets
// them and refuses new ones, until healed.
type proxy struct {
	l        net.Listener
	upstream string
	mu       sync.Mutex
	down     bool
	conns    map[net.Conn]struct{}
}

func newProxy(t *testing.T, upstream string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, upstream: upstream, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { l.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[u] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go func() { _, _ = io.Copy(u, c); u.Close(); c.Close() }()
		go func() { _, _ = io.Copy(c, u); u.Close(); c.Close() }()
	}
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, as a partition's firewall gives
		}
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

func (p *proxy) heal() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}
