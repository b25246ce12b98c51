package nats

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
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
	lease, err := p.Acquire(ctxT(t, 5*time.Second), providers.AcquireRequest{Key: "job", Holder: "node-1", TTL: 10 * time.Second})
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

// A reading of the server's clock in flight when the server is lost
// silently never gets its answer. The caller that gives up on it has the
// connection checked at once, as for any request that runs out of time, so
// the candidate's next Acquire gets its verdict on another server; not
// first a read that hangs for a whole attempt before the check (the cluster
// suite's takeover after the leading agent's host is isolated: an attempt
// there is the term's window, 1.87 s).
func TestLostServerProbe(t *testing.T) {
	srv := machineServer(t)
	upstream := strings.TrimPrefix(srv, "nats://")
	bucket := testBucket(t, srv)
	holder := open(t, Settings{Servers: []string{srv}, Bucket: bucket})
	mustAcquire(t, holder, "job", "node-1", time.Minute)
	a, b := teststore.NewFreezer(t, upstream), teststore.NewFreezer(t, upstream)
	p := open(t, Settings{Servers: []string{"nats://" + a.Addr(), "nats://" + b.Addr()}, Bucket: bucket})
	var held *providers.HeldError
	if _, err := p.Acquire(ctxT(t, 5*time.Second), providers.AcquireRequest{Key: "job", Holder: "node-2", TTL: time.Minute}); !errors.As(err, &held) {
		t.Fatalf("Acquire of a held lease: %v, want a HeldError", err)
	}
	kv, err := p.store(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(p.nc.ConnectedUrl(), a.Addr()) {
		a.Freeze()
	} else {
		b.Freeze()
	}
	time.Sleep(probeReuse) // the Acquire's reading is no longer reused
	const attempt = 1500 * time.Millisecond
	start := time.Now()
	if _, err := p.now(ctxT(t, time.Second), kv); err == nil {
		t.Fatal("a clock probe on a frozen connection was answered: the test shows nothing")
	}
	var hung int
	for {
		_, err := p.Acquire(ctxT(t, attempt), providers.AcquireRequest{Key: "job", Holder: "node-2", TTL: time.Minute})
		if errors.As(err, &held) {
			break
		}
		hung++
		if time.Since(start) > 6*time.Second {
			t.Fatalf("no verdict within 6s of losing the server during a clock probe (%d attempts): %v", hung, err)
		}
	}
	took := time.Since(start)
	t.Logf("verdict %s after the server was lost during a clock probe, after %d failed attempts", took.Round(time.Millisecond), hung)
	if took > 2300*time.Millisecond {
		t.Errorf("verdict %s after the server was lost, want within 2.3s (the probe's caller's 1 s, the ping check's 500 ms), not after another attempt of %s hung first", took.Round(time.Millisecond), attempt)
	}
}

// An answer older than this client's own acknowledged write of the term is
// no verdict: a stream leader deposed while it was cut off answers from its
// old state until it learns of the new leader (the cluster suite: a leader
// told "lost" by such an answer stepped down for nothing). Here the store's
// last message for the key is deleted by hand, so that the key's last
// record is the one before this client's write: a released record of
// another holder. Renew fails, and is not ErrLost; once the key is as this
// client wrote it again, the next Renew succeeds on the same revision.
func TestStaleAnswer(t *testing.T) {
	srv := machineServer(t)
	bucket := testBucket(t, srv)
	nc, err := nats.Connect(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	// The bucket's stream made by hand, as the client makes a bucket's,
	// but with a history of 2 (the record before the last stays) and
	// deletes allowed.
	if _, err := js.CreateStream(ctxT(t, 5*time.Second), jetstream.StreamConfig{
		Name: "KV_" + bucket, Subjects: []string{"$KV." + bucket + ".>"}, MaxMsgsPerSubject: 2,
		Discard: jetstream.DiscardNew, AllowRollup: true, AllowDirect: true, Storage: jetstream.FileStorage,
	}); err != nil {
		t.Fatal(err)
	}
	p := open(t, Settings{Servers: []string{srv}, Bucket: bucket})
	other := open(t, Settings{Servers: []string{srv}, Bucket: bucket})
	b := mustAcquire(t, other, "job", "b", time.Minute)
	if err := other.Release(ctxT(t, 5*time.Second), b); err != nil {
		t.Fatal(err)
	}
	a := mustAcquire(t, p, "job", "a", time.Minute)
	rev, ok := p.lastWrite(a)
	if !ok {
		t.Fatal("no last write remembered for the term just acquired")
	}
	stream, err := js.Stream(ctxT(t, 5*time.Second), "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetMsg(ctxT(t, 5*time.Second), rev)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(ctxT(t, 5*time.Second), rev); err != nil {
		t.Fatal(err)
	}
	_, err = p.Renew(ctxT(t, 5*time.Second), a)
	if err == nil || errors.Is(err, providers.ErrLost) || !errors.Is(err, errStale) {
		t.Fatalf("Renew answered from a record older than its own write: %v, want a store failure naming it (not ErrLost)", err)
	}
	t.Log(err)
	// The key as this client wrote it, at a new revision: the record
	// matches, so the Renew after the failed compare-and-set writes again.
	if _, err := js.Publish(ctxT(t, 5*time.Second), msg.Subject, msg.Data); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Renew(ctxT(t, 5*time.Second), a); err != nil {
		t.Fatalf("Renew once the record is this term's again: %v", err)
	}
}
