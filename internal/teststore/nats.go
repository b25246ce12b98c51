package teststore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NATSAddr is the machine's nats-server (NATSServer's, JetStream on), which
// scripts/services.sh starts when it is down. Tests that need a server of
// their own (to stop, restart or configure it) use StartNATSProc.
const NATSAddr = "127.0.0.1:4222"

// StartNATSProc starts a nats-server with JetStream on loopback port (0: a
// free port, three tries) with its JetStream store under dir/jetstream and
// extra arguments after the defaults (--user U --pass P, --auth TOKEN), and
// waits until it greets clients with JetStream on. Called again with the
// same dir and port after the first process was stopped, it restarts the
// same server on the same data: that is how tests restart the store. The
// caller stops p.
func StartNATSProc(dir string, port int, extra ...string) (addr string, p *Proc, err error) {
	if port != 0 {
		p, err = startNATS(dir, port, extra)
		return Addr(port), p, err
	}
	for range 3 {
		if port, err = FreePort(); err != nil {
			return "", nil, err
		}
		if p, err = startNATS(dir, port, extra); err == nil {
			return Addr(port), p, nil
		}
	}
	return "", nil, err
}

// NATSServer is the nats-server binary the tests run: the one
// scripts/services.sh builds into .cache/bin from the Go module proxy
// (v2.15.2), else one on PATH (Debian's 2.9.10, which granted a term twice
// across a stream-leader change in the cluster suite: docs/providers/nats.md).
func NATSServer() (string, error) {
	if root, err := RepoRoot(); err == nil {
		p := filepath.Join(root, ".cache", "bin", "nats-server")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return Tool("nats-server", "")
}

func startNATS(dir string, port int, extra []string) (*Proc, error) {
	bin, err := NATSServer()
	if err != nil {
		return nil, err
	}
	argv := append([]string{bin,
		"-a", "127.0.0.1", "-p", strconv.Itoa(port),
		"-js", "-sd", filepath.Join(dir, "jetstream"),
		"--server_name", "electd-test-" + strconv.Itoa(port),
	}, extra...)
	p, err := Start("nats-"+strconv.Itoa(port), dir, argv...)
	if err != nil {
		return nil, err
	}
	if err := p.WaitReady(15*time.Second, NATSReady(Addr(port))); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// StartNATS is StartNATSProc on a free port with its data in a fresh
// t.TempDir(), stopped when t ends.
func StartNATS(t testing.TB, extra ...string) (addr string, p *Proc) {
	t.Helper()
	SkipShort(t, "nats-server")
	addr, p, err := StartNATSProc(t.TempDir(), 0, extra...)
	started(t, p, err)
	return addr, p
}

// StartNATSAt is StartNATSProc stopped when t ends. It returns its error
// rather than failing t, so a test may restart a server from a goroutine.
func StartNATSAt(t testing.TB, dir string, port int, extra ...string) (*Proc, error) {
	t.Helper()
	SkipShort(t, "nats-server")
	_, p, err := StartNATSProc(dir, port, extra...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(p.Stop)
	return p, nil
}

// NATSReady is a ready check that succeeds once the server at addr sends
// its INFO greeting saying JetStream is on. The server enables JetStream
// (and recovers its streams) before it accepts clients.
func NATSReady(addr string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		return talkTo(ctx, addr, func(c net.Conn) error {
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				return err
			}
			info, ok := strings.CutPrefix(strings.TrimSpace(line), "INFO ")
			if !ok {
				return fmt.Errorf("greeting %q is not INFO", strings.TrimSpace(line))
			}
			var v struct {
				JetStream bool `json:"jetstream"`
			}
			if err := json.Unmarshal([]byte(info), &v); err != nil {
				return err
			}
			if !v.JetStream {
				return errors.New("JetStream is not enabled")
			}
			return nil
		})
	}
}
