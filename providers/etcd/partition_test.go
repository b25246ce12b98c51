package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
)

// A member lost silently (its connection frozen: bytes neither delivered
// nor refused, as behind a DROP rule) costs a request its attempt's
// deadline and no more. An attempt sent again at once, as the agent does
// (agent/term.go), reaches another member; and the keep-alive closes the
// frozen connection, so requests stop going there.
func TestLostMember(t *testing.T) {
	endpoint, _ := teststore.StartEtcd(t)
	var eps []string
	var frozen *teststore.Freezer
	for i := range 3 {
		f := teststore.NewFreezer(t, endpoint)
		if i == 1 {
			frozen = f
		}
		eps = append(eps, f.Addr())
	}
	p := open(t, Settings{Endpoints: eps, Prefix: randomPrefix(t)})
	ctx := context.Background()
	lease, err := p.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "node-1", TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for range 6 { // every member's connection is up
		if lease, err = p.Renew(ctx, lease); err != nil {
			t.Fatal(err)
		}
	}
	frozen.Freeze()
	start := time.Now()
	var hung int
	var lastHang time.Duration
	for time.Since(start) < keepAliveTime+keepAliveTimeout+4*time.Second {
		renewed := false
		for attempt := 0; attempt < 3 && !renewed; attempt++ {
			actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			_, err := p.Renew(actx, lease)
			cancel()
			switch {
			case err == nil:
				renewed = true
			case errors.Is(err, context.DeadlineExceeded):
				hung++
				lastHang = time.Since(start)
			default:
				// The keep-alive closing the connection fails the
				// request on it ("keepalive ping failed to receive
				// ACK"): the agent retries that too.
				t.Logf("renew: %v", err)
			}
		}
		if !renewed {
			t.Fatalf("three attempts in a row hung %s after one of three members was lost", time.Since(start).Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if hung == 0 {
		t.Fatal("no request went to the lost member: the test shows nothing")
	}
	t.Logf("%d attempts hung; the last %s after the member was lost", hung, lastHang.Round(time.Millisecond))
	if limit := keepAliveTime + keepAliveTimeout + time.Second; lastHang > limit {
		t.Errorf("a request still went to the lost member %s after it was lost, want none after the keep-alive's %s",
			lastHang.Round(time.Millisecond), limit)
	}
}
