package nats

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/teststore"
)

// A server lost silently (its connection frozen: bytes neither delivered
// nor refused, as behind a DROP rule) is left for another server as soon
// as one request runs out of time, not after the client's own pings give
// up (6 s): a renewal sent again, as the agent does, succeeds well within
// a short term's window.
func TestLostServer(t *testing.T) {
	srv := machineServer(t)
	upstream := strings.TrimPrefix(srv, "nats://")
	a, b := teststore.NewFreezer(t, upstream), teststore.NewFreezer(t, upstream)
	p := open(t, Settings{Servers: []string{"nats://" + a.Addr(), "nats://" + b.Addr()}, Bucket: testBucket(t, srv)})
	ctx := context.Background()
	lease, err := p.Acquire(ctxT(t, 5*time.Second), "job", "node-1", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Freeze the proxy the client uses.
	if strings.Contains(p.nc.ConnectedUrl(), a.Addr()) {
		a.Freeze()
	} else {
		b.Freeze()
	}
	start := time.Now()
	var hung int
	for {
		actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err := p.Renew(actx, lease)
		cancel()
		if err == nil {
			break
		}
		hung++
		if time.Since(start) > 3*time.Second {
			t.Fatalf("no renewal within 3s of losing the server (%d attempts): %v", hung, err)
		}
	}
	took := time.Since(start)
	t.Logf("renewed %s after the server was lost, after %d failed attempts", took.Round(time.Millisecond), hung)
	if hung == 0 {
		t.Fatal("the first renewal succeeded on a frozen connection: the test shows nothing")
	}
	if took > 1500*time.Millisecond {
		t.Errorf("renewed %s after the server was lost, want within 1.5s (a request's 300 ms, then the ping check's 500 ms)", took.Round(time.Millisecond))
	}
}
