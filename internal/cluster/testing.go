package cluster

import (
	"testing"
	"time"

	"github.com/electd/electd/internal/teststore"
)

// The testing.TB wrappers: each fails the test where its counterpart
// returns an error, and stops what it started when the test ends.

// MustElectd is Electd for tests.
func MustElectd(t testing.TB) string {
	t.Helper()
	teststore.SkipShort(t, "the electd binary")
	bin, err := Electd()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// MustProvider starts what the named provider needs, for t alone (its
// stores are stopped when t ends), and returns its block.
func MustProvider(t testing.TB, name string) Provider {
	t.Helper()
	teststore.SkipShort(t, name)
	s := NewStores(t.TempDir())
	t.Cleanup(s.Close)
	p, err := s.Provider(name, RandomSuffix())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Start is a cluster of n electd agents (node-1 … node-n) in a t.TempDir().
// o.Binary defaults to MustElectd. When t ends the agents are stopped, and
// when it failed their logs and the child log are logged.
func Start(t testing.TB, n int, o Options) *Cluster {
	t.Helper()
	teststore.SkipShort(t, "electd agents")
	if o.Binary == "" {
		o.Binary = MustElectd(t)
	}
	c, err := New(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.StopAll(15 * time.Second)
		if t.Failed() {
			t.Logf("cluster logs:\n%s", c.Logs())
		}
	})
	for range n {
		if _, err := c.StartNew(); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// MustStarts is c.Children.Starts for tests.
func MustStarts(t testing.TB, c *Cluster) []Record {
	t.Helper()
	s, err := c.Children.Starts()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// MustWaitStarts is c.Children.WaitStarts for tests.
func MustWaitStarts(t testing.TB, c *Cluster, n int, within time.Duration) []Record {
	t.Helper()
	s, err := c.Children.WaitStarts(n, within)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// MustLeader is c.Leader for tests.
func MustLeader(t testing.TB, c *Cluster) (*Agent, Record) {
	t.Helper()
	a, r, err := c.Leader()
	if err != nil {
		t.Fatal(err)
	}
	return a, r
}

// MustExactlyOneFor is c.ExactlyOneFor for tests.
func MustExactlyOneFor(t testing.TB, c *Cluster, d time.Duration) {
	t.Helper()
	if err := c.ExactlyOneFor(d); err != nil {
		t.Fatal(err)
	}
}

// CheckHistory reports every problem c.Children.CheckHistory finds as an
// error of t.
func CheckHistory(t testing.TB, c *Cluster, ends map[int]time.Time) {
	t.Helper()
	bad, err := c.Children.CheckHistory(ends)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// MustWaitGone is WaitGone for tests.
func MustWaitGone(t testing.TB, pid int, within time.Duration) time.Time {
	t.Helper()
	at, err := WaitGone(pid, within)
	if err != nil {
		t.Fatal(err)
	}
	return at
}
