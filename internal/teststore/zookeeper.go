package teststore

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ZooKeeperJar is the server jar of Debian's zookeeper package (3.8), which
// scripts/services.sh installs. Its manifest's Class-Path names the jars it
// needs under /usr/share/java (netty, jute, slf4j-api, ...).
const ZooKeeperJar = "/usr/share/java/zookeeper.jar"

// zooKeeperLogJars bind slf4j to its simple logger, so the server's log
// lands in the Proc's log file; without them slf4j says nothing at all.
var zooKeeperLogJars = []string{"/usr/share/java/slf4j-simple.jar"}

// ZooKeeperTick is the tickTime of the test servers. ZooKeeper checks
// session expiry once a tick, and a ttl becomes a session timeout, so a
// short tick keeps the expiry of a 1 s ttl close to 1 s.
const ZooKeeperTick = 100 * time.Millisecond

// StartZooKeeperProc starts a standalone ZooKeeper server (Debian's 3.8) on
// loopback port (0: a free port) with its data under dir, and waits until it
// answers "ruok". The server is configured by a zoo.cfg written into dir
// rather than by ZooKeeperServerMain's positional PORT DATADIR TICKTIME
// arguments, which bind every interface and keep the defaults that do not
// suit tests: sessions of 2 to 20 ticks (here 200 ms to 60 s, so that ttls
// from 1 s to the conformance suite's 30 s are honoured), 60 connections per
// address (here unlimited: a suite opens more), and the admin HTTP server on
// port 8080 (off). Called again with the same dir and port after the first
// process was stopped, it restarts the same server on the same data: its
// znodes and open sessions survive, as they do in production. The caller
// stops p.
func StartZooKeeperProc(dir string, port int) (addr string, p *Proc, err error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return "", nil, fmt.Errorf("teststore: java is not installed: run scripts/services.sh (make test does)")
	}
	if _, err := os.Stat(ZooKeeperJar); err != nil {
		return "", nil, fmt.Errorf("teststore: ZooKeeper is not installed (%s): run scripts/services.sh (make test does)", ZooKeeperJar)
	}
	if port, err = portOrFree(port); err != nil {
		return "", nil, err
	}
	addr = Addr(port)
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return "", nil, err
	}
	tick := ZooKeeperTick.Milliseconds()
	cfg := strings.Join([]string{
		"tickTime=" + strconv.FormatInt(tick, 10),
		"minSessionTimeout=" + strconv.FormatInt(2*tick, 10),
		"maxSessionTimeout=60000",
		"dataDir=" + data,
		"clientPort=" + strconv.Itoa(port),
		"clientPortAddress=127.0.0.1",
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=ruok,srvr",
		// Each transaction is fsynced before it is acknowledged (the
		// default, written down): a SIGKILL loses no token.
		"forceSync=yes",
		"",
	}, "\n")
	cfgPath := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return "", nil, err
	}
	cp := strings.Join(append([]string{ZooKeeperJar}, zooKeeperLogJars...), ":")
	// A small heap and no JIT tiers beyond C1 start the JVM faster on the
	// two shared cores; the server keeps a few thousand znodes at most.
	p, err = Start("zookeeper-"+strconv.Itoa(port), dir, java, "-Xmx256m", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain", cfgPath)
	if err != nil {
		return "", nil, err
	}
	if err := p.WaitReady(60*time.Second, ZooKeeperReady(addr)); err != nil {
		p.Stop()
		return "", nil, err
	}
	return addr, p, nil
}

// StartZooKeeper is StartZooKeeperProc with its data in a fresh t.TempDir(),
// on a free port, stopped when t ends.
func StartZooKeeper(t testing.TB) (addr string, p *Proc) {
	t.Helper()
	SkipShort(t, "ZooKeeper")
	return StartZooKeeperAt(t, t.TempDir(), 0)
}

// StartZooKeeperAt is StartZooKeeperProc for tests: it fails t on error and
// stops the server when t ends.
func StartZooKeeperAt(t testing.TB, dir string, port int) (addr string, p *Proc) {
	t.Helper()
	SkipShort(t, "ZooKeeper")
	addr, p, err := StartZooKeeperProc(dir, port)
	started(t, p, err)
	return addr, p
}

// ZooKeeperReady is a ready check that succeeds once the server at addr
// answers the four-letter word "ruok" with "imok" (it serves requests).
func ZooKeeperReady(addr string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		return talkTo(ctx, addr, func(c net.Conn) error {
			if _, err := io.WriteString(c, "ruok"); err != nil {
				return err
			}
			b, err := io.ReadAll(io.LimitReader(c, 16))
			if err != nil {
				return err
			}
			if string(b) != "imok" {
				return fmt.Errorf("zookeeper at %s answered %q to ruok", addr, b)
			}
			return nil
		})
	}
}
