package providertest

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/electd/electd/internal/teststore"
)

// Main runs a store package's tests on one store process started for them
// all (a store that takes seconds to start): start starts it in a
// temporary directory and returns its address, which Main sets in the
// environment variable env for the tests. Under -short no test runs, since
// every one needs the store. name is the package's, need what it needs
// ("the Datastore emulator").
func Main(m *testing.M, name, need, env string, start func(dir string) (string, *teststore.Proc, error)) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() {
		fmt.Printf("%s: skipped under -short\n", name)
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "electd-"+name)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	addr, proc, err := start(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s tests need %s: %v\n", name, need, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	os.Setenv(env, addr)
	code := m.Run()
	proc.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}
