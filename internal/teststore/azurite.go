package teststore

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// AzuriteAccount and AzuriteKey are Azurite's development account and its
// published key (the same on every Azurite; not a secret).
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// AzuriteConnectionString is the connection string of the development
// account on an Azurite blob service listening on 127.0.0.1:port.
func AzuriteConnectionString(port int) string {
	return fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;BlobEndpoint=http://%s/%s;",
		AzuriteAccount, AzuriteKey, Addr(port), AzuriteAccount)
}

// StartAzurite starts Azurite's blob service, in memory, on a free loopback
// port and returns the connection string of its development account. It is
// stopped with t.
func StartAzurite(t testing.TB) (connectionString string, p *Proc) {
	t.Helper()
	SkipShort(t, "Azurite")
	cs, p, err := StartAzuriteProc(t.TempDir(), 0, false)
	started(t, p, err)
	return cs, p
}

var azuriteListening = regexp.MustCompile(`listens on http://127\.0\.0\.1:(\d+)`)

// StartAzuriteProc is StartAzurite for callers without a testing.TB (a
// TestMain, or a test that restarts the store): the caller stops p. dir gets
// the log and, when persist is set, the data, so a second start on the same
// dir and port is the same store restarted. Port 0 lets Azurite pick a free
// port.
func StartAzuriteProc(dir string, port int, persist bool) (connectionString string, p *Proc, err error) {
	bin, err := Tool("azurite-blob", "azurite/node_modules/.bin/azurite-blob")
	if err != nil {
		return "", nil, err
	}
	// --skipApiVersionCheck: the azblob SDK sends an API version newer than
	// Azurite 3.35 knows. Azurite 3.36+ would need Node 21+.
	args := []string{bin, "--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(port),
		"--skipApiVersionCheck", "--disableTelemetry", "--silent"}
	if persist {
		args = append(args, "--location", dir)
	} else {
		args = append(args, "--inMemoryPersistence")
	}
	p, err = Start("azurite", dir, args...)
	if err != nil {
		return "", nil, err
	}
	// Azurite prints the port it listens on once it is ready.
	err = p.WaitReady(60*time.Second, func(ctx context.Context) error {
		b, err := os.ReadFile(p.LogPath)
		if err != nil {
			return err
		}
		m := azuriteListening.FindSubmatch(b)
		if m == nil {
			return fmt.Errorf("not listening yet")
		}
		port, err = strconv.Atoi(string(m[1]))
		if err != nil {
			return err
		}
		return DialReady(Addr(port))(ctx)
	})
	if err != nil {
		p.Stop()
		return "", nil, err
	}
	return AzuriteConnectionString(port), p, nil
}
