package teststore

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartEtcdProc starts a single-member etcd server (Debian's etcd-server,
// 3.4) with its data under dir, on loopback clientPort and peerPort (0: a free
// port), and waits until it answers /health. endpoint is "127.0.0.1:PORT", as
// the etcd provider's endpoints take it. Called again with the same arguments
// after the first process was stopped, it restarts the same member on the
// same data: that is how tests restart the store. The caller stops p.
func StartEtcdProc(dir string, clientPort, peerPort int) (endpoint string, p *Proc, err error) {
	bin, err := Tool("etcd", "")
	if err != nil {
		return "", nil, err
	}
	if clientPort, err = portOrFree(clientPort); err != nil {
		return "", nil, err
	}
	if peerPort, err = portOrFree(peerPort); err != nil {
		return "", nil, err
	}
	client := "http://" + Addr(clientPort)
	peer := "http://" + Addr(peerPort)
	p, err = Start("etcd-"+strconv.Itoa(clientPort), dir, bin,
		"--name", "default",
		"--data-dir", filepath.Join(dir, "data"), // created by etcd with the 0700 it insists on
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", "default="+peer,
		"--initial-cluster-state", "new",
		"--logger", "zap",
		"--log-outputs", "stderr",
	)
	if err != nil {
		return "", nil, err
	}
	if err := p.WaitReady(30*time.Second, etcdHealthy(client)); err != nil {
		p.Stop()
		return "", nil, err
	}
	return Addr(clientPort), p, nil
}

// StartEtcd is StartEtcdProc with its data in a fresh t.TempDir(), on free
// ports, stopped when t ends.
func StartEtcd(t testing.TB) (endpoint string, p *Proc) {
	t.Helper()
	SkipShort(t, "etcd")
	return StartEtcdAt(t, t.TempDir(), 0, 0)
}

// StartEtcdAt is StartEtcdProc for tests: it fails t on error and stops
// the server when t ends.
func StartEtcdAt(t testing.TB, dir string, clientPort, peerPort int) (endpoint string, p *Proc) {
	t.Helper()
	SkipShort(t, "etcd")
	endpoint, p, err := StartEtcdProc(dir, clientPort, peerPort)
	started(t, p, err)
	return endpoint, p
}

// etcdHealthy succeeds once /health says true: the member has a leader and
// serves linearizable requests.
func etcdHealthy(base string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
			return fmt.Errorf("etcd /health: %s %s", resp.Status, body)
		}
		return nil
	}
}
