package teststore

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// DatastoreJar is the Datastore emulator of the Google Cloud SDK, which the
// machine image provides (scripts/services.sh checks for it).
const DatastoreJar = "/usr/lib/google-cloud-sdk/platform/cloud-datastore-emulator/CloudDatastore.jar"

// StartDatastore starts the official Datastore emulator (in memory) on a free
// loopback port and returns its host:port, the value for
// DATASTORE_EMULATOR_HOST. It runs java directly: the gcloud wrapper would
// leave the JVM orphaned when stopped. The emulator is stopped with t.
func StartDatastore(t testing.TB) (host string, p *Proc) {
	t.Helper()
	SkipShort(t, "the Datastore emulator")
	host, p, err := StartDatastoreProc(t.TempDir())
	started(t, p, err)
	return host, p
}

// StartDatastoreProc is StartDatastore for callers without a testing.TB (a
// TestMain): the caller stops p. dir receives the log.
func StartDatastoreProc(dir string) (host string, p *Proc, err error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return "", nil, fmt.Errorf("teststore: java is not installed: run scripts/services.sh (make test does)")
	}
	if _, err := os.Stat(DatastoreJar); err != nil {
		return "", nil, fmt.Errorf("teststore: the Datastore emulator is missing (%s): run scripts/services.sh (make test does)", DatastoreJar)
	}
	port, err := FreePort()
	if err != nil {
		return "", nil, err
	}
	host = Addr(port)
	// A small heap and no JIT tiers beyond C1 start the JVM faster on the
	// two shared cores; the emulator keeps a handful of entities.
	p, err = Start("datastore-emulator", dir, java, "-Xmx256m", "-XX:TieredStopAtLevel=1",
		"-cp", DatastoreJar, "com.google.cloud.datastore.emulator.CloudDatastore",
		"start", "--testing", "--host=127.0.0.1", fmt.Sprintf("--port=%d", port))
	if err != nil {
		return "", nil, err
	}
	if err := p.WaitReady(60*time.Second, datastoreReady(host)); err != nil {
		p.Stop()
		return "", nil, err
	}
	return host, p, nil
}

// datastoreReady checks the emulator's health endpoint, which answers "Ok".
func datastoreReady(host string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
		if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "Ok" {
			return fmt.Errorf("health check: %s %q", resp.Status, body)
		}
		return nil
	}
}
