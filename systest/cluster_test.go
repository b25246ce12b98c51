package systest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/electd/electd/internal/cluster"
)

// binary is the electd binary built once for the whole package.
var binary string

func TestMain(m *testing.M) {
	var err error
	if binary, err = cluster.Electd(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cluster.Cleanup()
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
