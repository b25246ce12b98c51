package clusterfaults

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	ec "github.com/electd/electd/internal/cluster"
)

var (
	longForm  = flag.Bool("clusters.long", os.Getenv("ELECTD_CLUSTERS_LONG") != "", "run the long form: -clusters.rounds rounds of faults on every store")
	rounds    = flag.Int("clusters.rounds", 5, "rounds of faults per store in the long form")
	storeList = flag.String("clusters.stores", os.Getenv("ELECTD_CLUSTERS_STORES"), "comma-separated stores to run (default: etcd in the short form, all in the long form)")
	binFlag   = flag.String("clusters.bin", os.Getenv("ELECTD_BIN"), "use this electd binary instead of building one")
)

// binary is the electd binary under test, built on first use.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	ec.Cleanup()
	os.Exit(code)
}

// electd returns the binary under test.
func electd(t *testing.T) string {
	t.Helper()
	if binary == "" {
		binary = *binFlag
	}
	if binary == "" {
		var err error
		if binary, err = ec.Electd(); err != nil {
			t.Fatal(err)
		}
	}
	return binary
}

// wantStore reports whether this run covers store: the short form covers
// etcd unless -clusters.stores says otherwise.
func wantStore(name string) bool {
	list := *storeList
	if list == "" {
		return *longForm || name == "etcd"
	}
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == name {
			return true
		}
	}
	return false
}

func faultRounds() int {
	if *longForm {
		return *rounds
	}
	return 1
}

var _ = fmt.Sprint
