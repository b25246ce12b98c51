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

// StartEtcd starts a single-member etcd server (Debian's etcd-server, 3.4)
// with its data in a fresh t.TempDir(), on free loopback client and peer
// ports, waits until it answers /health, and stops it when t ends. endpoint
// is "127.0.0.1:PORT", as the etcd provider's endpoints take it.
func StartEtcd(t testing.TB) (endpoint string, p *Proc) {
	t.Helper()
	return StartEtcdAt(t, t.TempDir(), MustFreePort(t), MustFreePort(t))
}

// StartEtcdAt starts etcd on the given ports with its data under dir. Called
// again with the same arguments after the first process was stopped, it
// restarts the same member on the same data: that is how tests restart the
// store.
func StartEtcdAt(t testing.TB, dir string, clientPort, peerPort int) (endpoint string, p *Proc) {
	t.Helper()
	bin, err := Tool("etcd", "")
	if err != nil {
		t.Fatal(err)
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
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	if err := p.WaitReady(30*time.Second, etcdHealthy(client)); err != nil {
		p.Stop()
		t.Fatal(err)
	}
	return Addr(clientPort), p
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
