package sql_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/electd/electd/providers"
	sqlprovider "github.com/electd/electd/providers/sql"
)

// SQLite keeps its renewal statements prepared by size (stmts.go): batches
// of many sizes, more than it keeps, sent at once, over 1000 leases (two
// statements), each renew exactly the leases still held, every time.
func TestSQLiteRenewManySizes(t *testing.T) {
	t.Parallel()
	p := open(t, sqlprovider.Settings{Driver: "sqlite", DSN: filepath.Join(t.TempDir(), "leases.db")})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const n = 1003
	reqs := make([]providers.AcquireRequest, n)
	for i := range reqs {
		reqs[i] = providers.AcquireRequest{Key: fmt.Sprintf("k%04d", i), Holder: "n1", TTL: 30 * time.Second}
	}
	leases, errs := p.(providers.Batcher).AcquireMany(ctx, reqs)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("AcquireMany %s: %v", reqs[i].Key, err)
		}
	}
	// Another holder takes k0500 over: its renewals must come back lost.
	if err := p.Release(ctx, leases[500]); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Acquire(ctx, providers.AcquireRequest{Key: "k0500", Holder: "n2", TTL: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	renewer := p.(providers.Batcher)
	sizes := []int{1, 2, 3, 5, 8, 13, 2, 1, n, n - 1, 1}
	for round := range 2 {
		var wg sync.WaitGroup
		for _, size := range sizes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				batch := leases[n-size:]
				if size == n-1 {
					batch = leases[:size]
				}
				before := time.Now()
				got, errs := renewer.RenewMany(ctx, batch)
				for i, l := range batch {
					if l.Key == "k0500" {
						if !errors.Is(errs[i], providers.ErrLost) {
							t.Errorf("round %d, batch of %d: renewing k0500, taken by n2: %v, want lost", round, size, errs[i])
						}
						continue
					}
					if errs[i] != nil {
						t.Errorf("round %d, batch of %d: renew %s: %v", round, size, l.Key, errs[i])
						continue
					}
					if got[i].Key != l.Key || got[i].Token != l.Token || got[i].Expires.Before(before.Add(29*time.Second)) {
						t.Errorf("round %d, batch of %d: renewed %+v, want %s token %d until 30 s from now", round, size, got[i], l.Key, l.Token)
					}
				}
			}()
		}
		wg.Wait()
	}
	if o, err := p.Observe(ctx, "k0500"); err != nil || o.Holder != "n2" {
		t.Errorf("k0500 after the renewals: %+v, %v; want it still held by n2", o, err)
	}

	// Closed, the provider refuses instead of using its closed statements.
	p.Close()
	if _, errs := renewer.RenewMany(ctx, leases[:3]); errs[0] == nil {
		t.Error("RenewMany after Close succeeded")
	}
}
