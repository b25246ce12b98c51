package teststore

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// StartRedis starts a redis-server on a free loopback port, with no
// persistence, stopped with the test. It runs in the foreground (not
// --daemonize) so that it stays in its own process group and dies with the
// test binary.
func StartRedis(t testing.TB) (addr string, p *Proc) {
	t.Helper()
	dir := t.TempDir()
	// The port was free a moment ago; another process may take it first.
	var err error
	for range 3 {
		port := MustFreePort(t)
		addr = Addr(port)
		if p, err = StartRedisAt(t, port, dir); err == nil {
			return addr, p
		}
	}
	t.Fatal(err)
	return "", nil
}

// StartRedisAt starts a redis-server on port with its files in dir and
// extra arguments after the defaults (no persistence: "--appendonly yes"
// in extra turns the append-only file on), and waits until it answers PING.
// A test restarts a server by stopping it and starting it again on the same
// port and dir.
func StartRedisAt(t testing.TB, port int, dir string, extra ...string) (*Proc, error) {
	t.Helper()
	bin, err := Tool("redis-server", "")
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{bin,
		"--port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
	}, extra...)
	p, err := Start(fmt.Sprintf("redis-%d", port), dir, argv...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(p.Stop)
	if err := p.WaitReady(10*time.Second, RedisReady(Addr(port))); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// RedisReady is a ready check that succeeds once the server at addr
// answers PING with PONG (a server still loading its data answers LOADING).
func RedisReady(addr string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		if dl, ok := ctx.Deadline(); ok {
			_ = c.SetDeadline(dl)
		}
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err
		}
		if strings.TrimSpace(line) != "+PONG" {
			return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
		}
		return nil
	}
}
