package zookeeper

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/internal/timing"
	"github.com/electd/electd/providers"
)

// TestLostServer freezes the connection of a leader's session (bytes
// neither delivered nor refused, as behind a DROP rule) while the leader
// renews as the agent does: every renewal_every, each attempt waiting
// timing.AttemptTimeout and a hung one sent again at once. A hung attempt
// moves the session to another server (moveOff), so every renewal lands
// within the leader's renewal window, in the same session. Without moveOff
// the client waits two thirds of the ttl on the frozen server, longer than
// the window (1.87 s at ttl 3 s, stop_timeout 1 s), and the test fails.
func TestLostServer(t *testing.T) {
	t.Parallel()
	addr, _ := teststore.StartZooKeeper(t)
	var servers []string
	freezers := map[string]*teststore.Freezer{}
	for range 3 { // three "servers", all the same one behind a proxy each
		f := teststore.NewFreezer(t, addr)
		servers = append(servers, f.Addr())
		freezers[f.Addr()] = f
	}
	p := open(t, Settings{Servers: servers, Root: randomRoot(t)})
	const (
		ttl         = 3 * time.Second
		stopTimeout = time.Second
		renewEvery  = 500 * time.Millisecond
	)
	window := time.Duration(float64(ttl)*0.99) - stopTimeout - timing.KillMargin
	ctx := context.Background()
	lease, err := p.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "node-1", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.session(ctx, ttl, true)
	if err != nil {
		t.Fatal(err)
	}
	session := s.conn.SessionID()
	on := s.conn.Server()
	f := freezers[on]
	if f == nil {
		t.Fatalf("the session is on %q, none of %v", on, servers)
	}
	f.Freeze()
	frozen := time.Now()
	lastSent := frozen // the term's last renewal was sent no later than now
	var hung int
	var lastHang, worst time.Duration
	for time.Since(frozen) < 2*ttl {
		stopBy := lastSent.Add(window)
		sent := time.Now()
		for {
			now := time.Now()
			if !now.Before(stopBy) {
				t.Fatalf("no renewal within the window %s after the server was frozen %s before (%d attempts hung)",
					window, time.Since(frozen).Round(time.Millisecond), hung)
			}
			actx, cancel := context.WithTimeout(ctx, timing.AttemptTimeout(lastSent, stopBy, now))
			renewed, err := p.Renew(actx, lease)
			cancel()
			if err == nil {
				lease = renewed
				break
			}
			if errors.Is(err, providers.ErrLost) {
				t.Fatalf("Renew: %v, the term was lost", err)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				hung++
				lastHang = time.Since(frozen)
			}
			t.Logf("renew at +%s: %v", time.Since(frozen).Round(time.Millisecond), err)
		}
		worst = max(worst, time.Since(lastSent))
		lastSent = sent
		time.Sleep(renewEvery)
	}
	if hung == 0 {
		t.Fatal("no renewal hung on the frozen server: the test shows nothing")
	}
	if id := s.conn.SessionID(); id != session {
		t.Fatalf("session %x after the move, want %x kept", id, session)
	}
	if now := s.conn.Server(); now == on {
		t.Fatalf("the session is still on the frozen server %s", on)
	}
	t.Logf("%d attempts hung, the last %s after the freeze; the longest from a renewal's send to the next success: %s (window %s)",
		hung, lastHang.Round(time.Millisecond), worst.Round(time.Millisecond), window)
	if lastHang > window {
		t.Errorf("a renewal still hung %s after the freeze, want none after the window %s", lastHang.Round(time.Millisecond), window)
	}
}
