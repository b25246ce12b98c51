package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
)

// A candidate whose watch saw the release writes its term with one
// transaction and no read; a release it saw that is no longer the key's
// state (another took the key, or took and released it) fails the guard and
// is read, so the answer is the one a read gives: held by the other, or the
// next token.
//
//	go test -count=1 -v -run TestAcquireAfterSeenRelease ./providers/etcd/
func TestAcquireAfterSeenRelease(t *testing.T) {
	t.Parallel()
	endpoint, s := ownServer(t) // its own: the request counts are the test's
	a, b := open(t, s), open(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	heard := make(chan string, 100)
	if err := b.Notify(ctx, func(key string) { heard <- key }); err != nil {
		t.Fatal(err)
	}
	// hear waits until b's watch has reported a change of job (and has
	// recorded what it saw: it does before it reports).
	hear := func() {
		t.Helper()
		for {
			select {
			case k := <-heard:
				if k == "job" || k == "" {
					return
				}
			case <-ctx.Done():
				t.Fatal("b's watch reported no change of job")
			}
		}
	}
	acquireB := func() (providers.Lease, error) {
		t.Helper()
		ls, errs := b.AcquireMany(ctx, []providers.AcquireRequest{{Key: "job", Holder: "b", TTL: 10 * time.Second}})
		return ls[0], errs[0]
	}
	seen := func() (freedKey, bool) {
		b.fmu.Lock()
		defer b.fmu.Unlock()
		f, ok := b.freed["job"]
		return f, ok
	}

	la, err := a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	hear()
	if _, err := acquireB(); !errors.Is(err, providers.ErrHeld) {
		t.Fatalf("b's AcquireMany while a holds: %v, want held", err)
	}
	// b is a refused candidate: its session is granted in the background.
	for b.liveSessions() == 0 {
		if ctx.Err() != nil {
			t.Fatal("b's session was never made ready")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// 1. The release heard: one transaction, no read, no grant.
	la.Value = "carried"
	if err := a.Release(ctx, la); err != nil {
		t.Fatal(err)
	}
	hear()
	f, ok := seen()
	if !ok || f.st.rec.Token != la.Token || f.st.rec.Holder != "" {
		t.Fatalf("b's watch recorded %+v, %v after a's release of token %d", f, ok, la.Token)
	}
	before := scrape(t, endpoint)
	lb, err := acquireB()
	d := scrape(t, endpoint).sub(before)
	t.Logf("AcquireMany after a release it heard: requests %s", d)
	if err != nil || lb.Token != la.Token+1 || lb.Value != "carried" || lb.Holder != "b" {
		t.Fatalf("b's AcquireMany after the release: %+v, %v; want token %d and the value", lb, err, la.Token+1)
	}
	if d.started["Txn"] != 1 || d.started["Range"] != 0 || d.started["LeaseGrant"] != 0 {
		t.Errorf("b's AcquireMany sent %s, want one transaction and no read or grant", d)
	}
	hear() // b's own term
	if _, ok := seen(); ok {
		t.Error("the release b heard is still recorded after b used it")
	}
	if o, err := a.Observe(ctx, "job"); err != nil || o.Holder != "b" || o.Token != lb.Token {
		t.Fatalf("Observe after b's term: %+v, %v", o, err)
	}

	// 2. A release heard, then the key taken by a before b asks: held.
	if err := b.Release(ctx, lb); err != nil {
		t.Fatal(err)
	}
	hear()
	stale, ok := seen()
	if !ok {
		t.Fatal("b's watch recorded nothing of its own release")
	}
	la2, err := a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	hear()
	if _, ok := seen(); ok {
		t.Fatal("the release b heard is still recorded after a took the key")
	}
	restore := func() {
		stale.seen = time.Now()
		b.fmu.Lock()
		b.freed["job"] = stale
		b.fmu.Unlock()
	}
	restore() // as if a's acquire were still on its way to b's watch
	_, err = acquireB()
	var h *providers.HeldError
	if !errors.As(err, &h) || h.Holder != "a" || h.Token != la2.Token {
		t.Fatalf("b's AcquireMany with a stale release: %v, want held by a, token %d", err, la2.Token)
	}

	// 3. Taken and released again since the release heard: the next token.
	if err := a.Release(ctx, la2); err != nil {
		t.Fatal(err)
	}
	hear()
	restore()
	lb2, err := acquireB()
	if err != nil || lb2.Token != la2.Token+1 {
		t.Fatalf("b's AcquireMany with a stale release: %+v, %v; want token %d", lb2, err, la2.Token+1)
	}
	if _, err := b.Renew(ctx, lb2); err != nil {
		t.Fatalf("Renew of the term written on a release heard: %v", err)
	}
}

// liveSessions counts the provider's sessions etcd should still know.
func (p *Provider) liveSessions() int {
	p.smu.Lock()
	defer p.smu.Unlock()
	n := 0
	for _, s := range p.sessions {
		if time.Now().Before(s.expires()) {
			n++
		}
	}
	return n
}

// BenchmarkAcquireAfterRelease times a notified candidate's AcquireMany
// after the holder's release: "seen" writes on the release its watch saw,
// "read" reads the keys first (the release forgotten), as before.
//
//	go test -count=1 -run '^$' -bench AcquireAfterRelease ./providers/etcd/
func BenchmarkAcquireAfterRelease(b *testing.B) {
	endpoint, _ := teststore.StartEtcd(b)
	for _, seen := range []bool{true, false} {
		name := map[bool]string{true: "seen", false: "read"}[seen]
		b.Run(name, func(bb *testing.B) {
			s := Settings{Endpoints: []string{endpoint}, Prefix: "/electd-bench/" + name + "/"}
			holder, cand := openB(bb, s), openB(bb, s)
			ctx := context.Background()
			heard := make(chan string, 16)
			if err := cand.Notify(ctx, func(k string) { heard <- k }); err != nil {
				bb.Fatal(err)
			}
			req := []providers.AcquireRequest{{Key: "job", Holder: "cand", TTL: 10 * time.Second}}
			bb.StopTimer()
			for range bb.N {
				l, err := holder.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "holder", TTL: 10 * time.Second})
				if err != nil {
					bb.Fatal(err)
				}
				<-heard
				cand.AcquireMany(ctx, req) // refused: its session is made ready
				for cand.liveSessions() == 0 {
					time.Sleep(time.Millisecond)
				}
				if err := holder.Release(ctx, l); err != nil {
					bb.Fatal(err)
				}
				<-heard
				if !seen {
					cand.forgetFreed()
				}
				bb.StartTimer()
				ls, errs := cand.AcquireMany(ctx, req)
				bb.StopTimer()
				if errs[0] != nil {
					bb.Fatal(errs[0])
				}
				<-heard // the candidate's term
				if err := cand.Release(ctx, ls[0]); err != nil {
					bb.Fatal(err)
				}
				<-heard
			}
		})
	}
}

func openB(b *testing.B, s Settings) *Provider {
	p, err := New(context.Background(), s, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	return p
}
