package faults

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	ec "github.com/electd/electd/internal/cluster"
)

var (
	longForm  = flag.Bool("faults.long", os.Getenv("ELECTD_FAULTS_LONG") != "", "run the long form: -faults.n faults per store (also ELECTD_FAULTS_LONG=1)")
	nFaults   = flag.Int("faults.n", 200, "faults injected per store in the long form")
	storeList = flag.String("faults.stores", os.Getenv("ELECTD_FAULTS_STORES"), "comma-separated stores to run (default: all)")
	seed      = flag.Int64("faults.seed", 0, "seed of the long form's fault sequence (0: from the clock; logged)")
	summary   = flag.String("faults.summary", os.Getenv("ELECTD_FAULTS_SUMMARY"), "append a Markdown summary table to this file")
	kindList  = flag.String("faults.kinds", "", "comma-separated fault kinds to inject (default: every kind the store supports)")
	binFlag   = flag.String("faults.bin", os.Getenv("ELECTD_BIN"), "use this electd binary instead of building one")
)

// binary is the electd binary under test; self is this test binary, which
// the agents run as their job's child (see child_test.go).
var binary, self string

func TestMain(m *testing.M) {
	// Re-executed by an agent as a job's command: act as the child.
	if os.Getenv(envChild) != "" {
		os.Exit(childMain(os.Args[1:]))
	}
	flag.Parse()
	// The stores' clusters wait on leases and faults rather than compute:
	// four run at once unless -parallel says otherwise (`make test-faults`
	// says 1, so that the long form's figures are one cluster's).
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "4")
	}
	code := func() int {
		defer ec.Cleanup()
		var err error
		if self, err = os.Executable(); err != nil {
			fmt.Fprintln(os.Stderr, "faults: cannot find the test binary:", err)
			return 1
		}
		binary = *binFlag
		// Under -short only the checker's and the proxy's own tests run:
		// no agent, so no binary to build.
		if binary == "" && !testing.Short() {
			start := time.Now()
			if binary, err = ec.Electd(); err != nil {
				fmt.Fprintln(os.Stderr, "faults:", err)
				return 1
			}
			if testing.Verbose() {
				fmt.Fprintf(os.Stderr, "faults: built electd in %s\n", time.Since(start).Round(time.Millisecond))
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

// wantStore reports whether the -faults.stores selection includes name.
func wantStore(name string) bool { return selected(*storeList, name) }

// selected reports whether a comma-separated list (empty: everything)
// includes name.
func selected(list, name string) bool {
	if list == "" {
		return true
	}
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == name {
			return true
		}
	}
	return false
}
