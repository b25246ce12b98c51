package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
	redisprovider "github.com/electd/electd/providers/redis"
)

func randomPrefix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "electd-test-" + hex.EncodeToString(b) + ":"
}

func open(t testing.TB, s redisprovider.Settings) *redisprovider.Provider {
	t.Helper()
	p, err := redisprovider.New(context.Background(), s, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("New(%v): %v", s.Addresses, err)
	}
	return p
}

// servers starts n redis-servers for the test.
func servers(t testing.TB, n int) (addrs []string, procs []*teststore.Proc) {
	t.Helper()
	for range n {
		a, p := teststore.StartRedis(t)
		addrs = append(addrs, a)
		procs = append(procs, p)
	}
	return addrs, procs
}

// closedAddrs are loopback addresses nothing listens on.
func closedAddrs(t testing.TB, n int) []string {
	var addrs []string
	for range n {
		addrs = append(addrs, teststore.Addr(teststore.MustFreePort(t)))
	}
	return addrs
}

func conformance(t *testing.T, n int) {
	addrs, _ := servers(t, n)
	providertest.Run(t, func(t *testing.T) func(*testing.T) providers.Provider {
		s := redisprovider.Settings{Addresses: addrs, Prefix: randomPrefix()}
		return func(t *testing.T) providers.Provider { return open(t, s) }
	}, providertest.Options{
		Unreachable: func(t *testing.T) providers.Provider {
			return open(t, redisprovider.Settings{Addresses: closedAddrs(t, n), Prefix: "electd:"})
		},
		Notifier:         true,
		BatchSize:        1200, // more than two pipelines of 512
		TermsMayBeRaised: map[bool]string{true: "Redlock keeps a quorum's token only when no server reported a higher counter; racing candidates raise each other's counters, and the winner's term is raised to one above them"}[n >= 3],
	})
}

// TestSingle: one server, every operation one atomic script.
func TestSingle(t *testing.T) {
	t.Parallel()
	conformance(t, 1)
}

// TestRedlock: three servers, every operation on a quorum of two.
func TestRedlock(t *testing.T) {
	t.Parallel()
	conformance(t, 3)
}

func mustAcquire(t *testing.T, p providers.Provider, key, holder string) providers.Lease {
	t.Helper()
	l, err := p.Acquire(context.Background(), providers.AcquireRequest{Key: key, Holder: holder, TTL: time.Minute})
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", key, holder, err)
	}
	return l
}
