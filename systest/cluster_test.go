package systest

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/electd/electd/internal/cluster"
)

// binary is the electd binary built once for the whole package.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test here runs the electd binary, most of them against
		// stores: none is part of the fast suite (make test-short).
		fmt.Println("systest: skipped under -short")
		os.Exit(0)
	}
	// Most tests here wait on leases (seconds of ttl) rather than compute,
	// each with its own agents, ports, directories, tables and key
	// prefixes: two run at once unless -parallel says otherwise. More
	// starve the timing tests of the packages that make test runs beside
	// this one on 2 cores (at three, TestRenewalsBatched in agent/ and
	// TestStatusPageInChromium here failed under that load; at four, the
	// Datastore emulator answered a renewal in 2.9 s). The tests that run
	// make in the repository (packages, image, make install) or set the
	// environment the agents inherit (TestRedact) are not parallel: they run
	// first, one at a time.
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "2")
	}
	var err error
	if binary, err = cluster.Electd(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cluster.Cleanup()
	removePackages()
	os.Exit(code)
}

// timings used by every cluster: short, and passing electd check's rule
// (renew_every*2 + stop_timeout < ttl*0.99).
const (
	ttl         = 4 * time.Second
	renewEvery  = 1 * time.Second
	retryEvery  = 500 * time.Millisecond
	stopTimeout = 1 * time.Second
)

var defaultTiming = cluster.Timing{TTL: ttl, Renew: renewEvery, Retry: retryEvery, Stop: stopTimeout}

func alive(pid int) bool { return cluster.Alive(pid) }
