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

// StartRedisProc starts a redis-server on loopback port with its files in
// dir and extra arguments after the defaults (no persistence: "--appendonly
// yes" in extra turns the append-only file on), and waits until it answers
// PING. Port 0 picks a free port (three tries: another process may take it
// first). It runs in the foreground (not --daemonize) so that it stays in its
// own process group and dies with its parent. A test restarts a server by
// stopping it and starting it again on the same port and dir. The caller
// stops p.
func StartRedisProc(dir string, port int, extra ...string) (addr string, p *Proc, err error) {
	if port != 0 {
		p, err = startRedis(dir, port, extra)
		return Addr(port), p, err
	}
	for range 3 {
		if port, err = FreePort(); err != nil {
			return "", nil, err
		}
		if p, err = startRedis(dir, port, extra); err == nil {
			return Addr(port), p, nil
		}
	}
	return "", nil, err
}

func startRedis(dir string, port int, extra []string) (*Proc, error) {
	bin, err := Tool("redis-server", "")
	if err != nil {
		return nil, err
	}
	argv := append([]string{bin,
		"--port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
	}, extra...)
	p, err := Start(fmt.Sprintf("redis-%d", port), dir, argv...)
	if err != nil {
		return nil, err
	}
	if err := p.WaitReady(10*time.Second, RedisReady(Addr(port))); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// StartRedis is StartRedisProc on a free port with no persistence and its
// files in a fresh t.TempDir(), stopped when t ends.
func StartRedis(t testing.TB) (addr string, p *Proc) {
	t.Helper()
	SkipShort(t, "redis-server")
	addr, p, err := StartRedisProc(t.TempDir(), 0)
	started(t, p, err)
	return addr, p
}

// StartRedisAt is StartRedisProc stopped when t ends. It returns its error
// rather than failing t, so a test may restart a server from a goroutine.
func StartRedisAt(t testing.TB, port int, dir string, extra ...string) (*Proc, error) {
	t.Helper()
	SkipShort(t, "redis-server")
	_, p, err := StartRedisProc(dir, port, extra...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(p.Stop)
	return p, nil
}

// RedisReady is a ready check that succeeds once the server at addr
// answers PING with PONG (a server still loading its data answers LOADING).
func RedisReady(addr string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		return talkTo(ctx, addr, func(c net.Conn) error {
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
		})
	}
}
