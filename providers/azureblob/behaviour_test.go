package azureblob_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/azureblob"
)

const ttl = 30 * time.Second

func mustAcquire(t *testing.T, p providers.Provider, key, holder string, ttl time.Duration) providers.Lease {
	t.Helper()
	l, err := p.Acquire(ctxT(t), providers.AcquireRequest{Key: key, Holder: holder, TTL: ttl})
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", key, holder, err)
	}
	return l
}

func wantHeld(t *testing.T, err error, holder string, token uint64) {
	t.Helper()
	var he *providers.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("error = %v, want a *HeldError", err)
	}
	if he.Holder != holder || he.Token != token {
		t.Fatalf("held by %q token %d, want %q token %d", he.Holder, he.Token, holder, token)
	}
}

// Azure leases last 15 to 60 whole seconds; any other ttl is refused before
// the store is touched, with an error that says so (not a lease verdict).
func TestTTLRange(t *testing.T) {
	t.Parallel()
	p, _ := onAzurite(t)
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		ok   bool
	}{
		{"below", 14 * time.Second, false},
		{"zero", 0, false},
		{"above", 61 * time.Second, false},
		{"fraction", 15500 * time.Millisecond, false},
		{"min", 15 * time.Second, true},
		{"max", 60 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "ttl-" + tc.name
			_, err := p.Acquire(ctxT(t), providers.AcquireRequest{Key: key, Holder: "a", TTL: tc.ttl})
			if tc.ok {
				if err != nil {
					t.Fatalf("Acquire with ttl %s: %v", tc.ttl, err)
				}
				return
			}
			if err == nil || errors.Is(err, providers.ErrHeld) || !strings.Contains(err.Error(), "whole seconds from 15s to 60s") {
				t.Fatalf("Acquire with ttl %s: error %v, want the Azure lease range", tc.ttl, err)
			}
			if got, err := p.Observe(ctxT(t), key); err != nil || got != (providers.Lease{Key: key}) {
				t.Fatalf("after a refused ttl: Observe = %+v, %v; want nothing written", got, err)
			}
		})
	}
}

// A restarted holder proposes the same lease id, so it gets the lease back
// at once (no waiting out the ttl) and starts a new term; the old process's
// lease, fenced by its token, is lost.
func TestReturningHolder(t *testing.T) {
	t.Parallel()
	_, s := onAzurite(t)
	before, after, other := newProvider(t, s), newProvider(t, s), newProvider(t, s)
	old := mustAcquire(t, before, "job", "web-1", ttl)
	start := time.Now()
	cur := mustAcquire(t, after, "job", "web-1", ttl)
	if cur.Token != old.Token+1 {
		t.Fatalf("token of the returning holder = %d, want %d", cur.Token, old.Token+1)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the returning holder waited %s", d)
	}
	_, err := before.Renew(ctxT(t), old)
	if !errors.Is(err, providers.ErrLost) {
		t.Fatalf("Renew of the previous term: %v, want ErrLost", err)
	}
	if err := before.Release(ctxT(t), old); !errors.Is(err, providers.ErrLost) {
		t.Fatalf("Release of the previous term: %v, want ErrLost", err)
	}
	_, err = other.Acquire(ctxT(t), providers.AcquireRequest{Key: "job", Holder: "web-2", TTL: ttl})
	wantHeld(t, err, "web-1", cur.Token)
	if _, err := after.Renew(ctxT(t), cur); err != nil {
		t.Fatalf("Renew of the current term: %v", err)
	}
}

// The blob lease decides, never the record: a lease taken by someone who
// wrote no record (a node that died between taking the lease and writing)
// refuses other candidates although the record says free, and a lease broken
// by an operator ends the term although the record names a holder.
func TestLeaseIsTheTruth(t *testing.T) {
	t.Parallel()
	p, s := onAzurite(t)
	b := newProvider(t, s)
	raw := mustRawContainer(t, s.Container).NewBlockBlobClient("job")

	a := mustAcquire(t, p, "job", "a", ttl)
	if err := p.Release(ctxT(t), a); err != nil {
		t.Fatal(err)
	}
	ghost, err := lease.NewBlobClient(raw, &lease.BlobClientOptions{LeaseID: to.Ptr("00000000-0000-4000-8000-00000000dead")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ghost.AcquireLease(ctxT(t), 60, nil); err != nil {
		t.Fatal(err)
	}
	_, err = b.Acquire(ctxT(t), providers.AcquireRequest{Key: "job", Holder: "b", TTL: ttl})
	wantHeld(t, err, "", a.Token) // the record names nobody: the holder is unknown
	if _, err := ghost.ReleaseLease(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	bl := mustAcquire(t, b, "job", "b", ttl)
	if bl.Token != a.Token+1 {
		t.Fatalf("token = %d, want %d", bl.Token, a.Token+1)
	}

	// An operator breaks b's lease: b's term is over.
	if _, err := ghost.BreakLease(ctxT(t), &lease.BlobBreakOptions{BreakPeriod: to.Ptr[int32](0)}); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Observe(ctxT(t), "job"); err != nil || got.Holder != "" || got.Token != bl.Token {
		t.Fatalf("Observe after a broken lease = %+v, %v; want no holder, token %d", got, err, bl.Token)
	}
	if _, err := b.Renew(ctxT(t), bl); !errors.Is(err, providers.ErrLost) {
		t.Fatalf("Renew of a broken lease: %v, want ErrLost", err)
	}
	if c := mustAcquire(t, p, "job", "c", ttl); c.Token != bl.Token+1 {
		t.Fatalf("token after a broken lease = %d, want %d", c.Token, bl.Token+1)
	}
}

// Azure renews a lease for the duration it was taken with; a Renew with a
// longer TTL must really extend it.
func TestRenewChangesTTL(t *testing.T) {
	t.Parallel()
	_, s := onAzurite(t)
	a, b := newProvider(t, s), newProvider(t, s)
	start := time.Now()
	l := mustAcquire(t, a, "job", "a", azureblob.MinTTL)
	l.TTL = 40 * time.Second
	if _, err := a.Renew(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(start.Add(azureblob.MinTTL + 5*time.Second)))
	_, err := b.Acquire(ctxT(t), providers.AcquireRequest{Key: "job", Holder: "b", TTL: ttl})
	wantHeld(t, err, "a", l.Token)
}

// Keys map to blob names one to one, including the names Azure would alter
// (a trailing dot) or treat as directories (a slash).
func TestKeysAreDistinctBlobs(t *testing.T) {
	t.Parallel()
	p, _ := onAzurite(t)
	keys := []string{"job", "job.", "a/b", "a%2Fb", "a b", "a+b", "ünïcode"}
	for _, k := range keys {
		if l := mustAcquire(t, p, k, "a", ttl); l.Token != 1 {
			t.Fatalf("key %q: first token %d, want 1 (it shares a blob with another key)", k, l.Token)
		}
	}
	for _, k := range keys {
		if got, err := p.Observe(ctxT(t), k); err != nil || got.Holder != "a" || got.Token != 1 {
			t.Fatalf("Observe(%q) = %+v, %v", k, got, err)
		}
	}
}

// Settings are checked by New, without I/O, and errors never quote secrets.
func TestNewSettings(t *testing.T) {
	t.Parallel()
	const secret = "c2VjcmV0LWtleS1kby1ub3QtbG9n"
	for _, tc := range []struct {
		name string
		s    azureblob.Settings
		want string
	}{
		{"neither", azureblob.Settings{}, "needs connection_string, or account_url"},
		{"both", azureblob.Settings{ConnectionString: "AccountName=x;AccountKey=" + secret, AccountURL: "https://x.blob.core.windows.net"}, "not both"},
		{"bad connection string", azureblob.Settings{ConnectionString: "nonsense " + secret}, "not an Azure Storage connection string"},
		{"bad url", azureblob.Settings{AccountURL: "x.blob.core.windows.net", SASToken: secret}, "must be an http(s) URL"},
		{"sas twice", azureblob.Settings{AccountURL: "https://x.blob.core.windows.net/?sig=" + secret, SASToken: "sig=" + secret}, "already carries a query"},
		{"bad container", azureblob.Settings{ConnectionString: "UseDevelopmentStorage=true", Container: "Leases_1"}, "container name is 3 to 63"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := azureblob.New(context.Background(), tc.s, hclog.NewNullLogger())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error quotes a secret: %v", err)
			}
		})
	}
	s := &azureblob.Settings{AccountURL: "https://x.blob.core.windows.net/", SASToken: "?sv=2024&sig=" + secret}
	p, err := s.Open(context.Background(), nil)
	if err != nil {
		t.Fatalf("Open with account_url and sas_token: %v", err)
	}
	_ = p.Close()
}
