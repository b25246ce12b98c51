package azureblob_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/azureblob"
	"github.com/electd/electd/providers/providertest"
)

// connEnv carries the connection string of the package's Azurite to the
// tests and to Example, which reads it as an operator's program would.
const connEnv = "AZURE_STORAGE_CONNECTION_STRING"

// TestMain starts one Azurite for the package (each test uses containers of
// its own). It always replaces connEnv, so the tests never touch a real
// storage account by accident.
func TestMain(m *testing.M) {
	// The expiry cases sleep out 15 s Azure leases: they wait, they do not
	// compute. Run them side by side unless -parallel was given: the default
	// (GOMAXPROCS, 2 here) would queue them one pair at a time.
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "16")
	}
	providertest.Main(m, "azureblob", "Azurite", connEnv, func(dir string) (string, *teststore.Proc, error) {
		return teststore.StartAzuriteProc(dir, 0, false)
	})
}

// freshContainer names a container no other test uses and deletes it after t.
func freshContainer(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	name := "electd-test-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = deleteContainer(ctx, name)
	})
	return name
}

func newProvider(t *testing.T, s azureblob.Settings) *azureblob.Provider {
	t.Helper()
	p, err := azureblob.New(context.Background(), s, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// onAzurite returns a provider on a fresh container of the package's Azurite.
func onAzurite(t *testing.T) (*azureblob.Provider, azureblob.Settings) {
	t.Helper()
	s := azureblob.Settings{ConnectionString: os.Getenv(connEnv), Container: freshContainer(t)}
	return newProvider(t, s), s
}

func TestConformance(t *testing.T) {
	t.Parallel() // the race case still runs alone among the suite's cases
	cs := os.Getenv(connEnv)
	providertest.Run(t, func(t *testing.T) func(t *testing.T) providers.Provider {
		name := freshContainer(t)
		return func(t *testing.T) providers.Provider {
			return newProvider(t, azureblob.Settings{ConnectionString: cs, Container: name})
		}
	}, providertest.Options{
		Unreachable: func(t *testing.T) providers.Provider {
			cs := teststore.AzuriteConnectionString(teststore.MustFreePort(t))
			return newProvider(t, azureblob.Settings{ConnectionString: cs})
		},
		ShortTTL:    azureblob.MinTTL,
		NoRemaining: "Azure does not tell a blob lease's time left",
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
