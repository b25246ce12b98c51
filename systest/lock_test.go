package systest

import (
	"bytes"
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "modernc.org/sqlite" // to steal a lease from under electd lock

	"github.com/electd/electd/internal/cluster"
	"github.com/electd/electd/internal/syncbuf"
	"github.com/electd/electd/internal/teststore"
)

// `electd lock` is tested as an operator runs it: the built binary, several
// processes on one store, the commands writing what they saw.

// lockScript is the locked command of these tests: `sh -c lockScript sh
// LOG HOLD CODE` appends "start TOKEN PID NODE UNIXNANO" to LOG when it
// starts, and "stop ..." when it ends, after HOLD nanoseconds or at
// SIGTERM; then it exits with CODE (0 after SIGTERM). The lines are
// cluster.ChildLog's.
const lockScript = `log="$1" hold="$2" code="$3"
trap 'echo "stop ${ELECTD_TOKEN:-none} $$ ${ELECTD_NODE:-none} $(date +%s%N)" >> "$log"; exit 0' TERM
echo "start ${ELECTD_TOKEN:-none} $$ ${ELECTD_NODE:-none} $(date +%s%N)" >> "$log"
end=$(( $(date +%s%N) + hold ))
while [ "$(date +%s%N)" -lt "$end" ]; do sleep 0.02; done
echo "stop ${ELECTD_TOKEN:-none} $$ ${ELECTD_NODE:-none} $(date +%s%N)" >> "$log"
exit "$code"
`

// lockCommand is the argv after "--" that runs lockScript.
func lockCommand(log string, hold time.Duration, code int) []string {
	return []string{"sh", "-c", lockScript, "sh", log, fmt.Sprint(hold.Nanoseconds()), fmt.Sprint(code)}
}

// lockProc is one `electd lock` process.
type lockProc struct {
	cmd     *exec.Cmd
	started time.Time
	stdout  bytes.Buffer
	stderr  syncbuf.Buffer
	done    chan struct{}
	code    int // once done
	ended   time.Time
}

// startLock starts `electd lock ARGS...`.
func startLock(t *testing.T, args ...string) *lockProc {
	t.Helper()
	return startLockArgv(t, append([]string{binary, "lock"}, args...)...)
}

// startLockArgv starts argv, an `electd lock` (behind a wrapper such as
// `ip netns exec`).
func startLockArgv(t *testing.T, argv ...string) *lockProc {
	t.Helper()
	p := &lockProc{done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		p.ended = time.Now()
		p.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		} else if err != nil {
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
	return p
}

// wait waits for the process to exit and returns its status.
func (p *lockProc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(within):
		t.Fatalf("electd lock still running after %s; stderr:\n%s", within, p.stderr.String())
		return 0
	}
}

// runLock runs `electd lock ARGS...` to its end.
func runLock(t *testing.T, within time.Duration, args ...string) *lockProc {
	t.Helper()
	p := startLock(t, args...)
	p.wait(t, within)
	return p
}

// lockURL is the -provider URL of a store, with a table, key prefix or file
// of the test's own.
func lockURL(t *testing.T, store string) string {
	t.Helper()
	suffix := cluster.RandomSuffix()
	switch store {
	case "sqlite":
		return "sqlite://" + filepath.Join(t.TempDir(), "leases.db")
	case "postgres":
		return cluster.PostgresDSN() + sep(cluster.PostgresDSN()) + "table=electd_lock_" + suffix
	case "mysql":
		c, err := mysql.ParseDSN(cluster.MySQLDSN())
		if err != nil {
			t.Fatal(err)
		}
		u := url.URL{Scheme: "mysql", Host: c.Addr, Path: "/" + c.DBName, RawQuery: "table=electd_lock_" + suffix}
		if c.Passwd != "" {
			u.User = url.UserPassword(c.User, c.Passwd)
		} else {
			u.User = url.User(c.User)
		}
		return u.String()
	case "redis":
		addr, _ := teststore.StartRedis(t)
		return "redis://" + addr + "?prefix=electd-lock-" + suffix + ":"
	case "etcd":
		ep, _ := teststore.StartEtcd(t)
		return "etcd://" + ep + "?prefix=/electd-lock-" + suffix + "/"
	case "nats":
		addr, _ := teststore.StartNATS(t)
		return "nats://" + addr + "?bucket=electd_lock_" + suffix
	case "zookeeper":
		addr, _ := teststore.StartZooKeeperAt(t, t.TempDir(), 0)
		return "zk://" + addr + "/electd-lock-" + suffix
	}
	t.Fatalf("no URL for store %q", store)
	return ""
}

func sep(u string) string {
	if strings.Contains(u, "?") {
		return "&"
	}
	return "?"
}

// lockTTL is the -ttl of these tests: short, so that a lost lease shows
// within seconds, and long enough for etcd's whole-second leases.
const lockTTL = 3 * time.Second

// intervals pairs the start and stop records of each command (by pid), in
// the order they started.
func intervals(t *testing.T, recs []cluster.Record) [][2]cluster.Record {
	t.Helper()
	starts := map[int]cluster.Record{}
	var out [][2]cluster.Record
	for _, r := range recs {
		switch r.Kind {
		case "start":
			starts[r.PID] = r
		case "stop":
			s, ok := starts[r.PID]
			if !ok {
				t.Fatalf("a stop without a start: %s", r)
			}
			out = append(out, [2]cluster.Record{s, r})
			delete(starts, r.PID)
		}
	}
	for _, s := range starts {
		t.Errorf("command %d started and never stopped: %s", s.PID, s)
	}
	sort.Slice(out, func(i, k int) bool { return out[i][0].At.Before(out[k][0].At) })
	return out
}

// TestLockMutualExclusion: several `electd lock` on one NAME, started
// together, run their commands one at a time, each with a fencing token
// greater than the one before, and each exits with its command's status.
func TestLockMutualExclusion(t *testing.T) {
	t.Parallel()
	const n = 4
	for _, store := range []string{"sqlite", "postgres", "mysql", "redis", "etcd", "nats", "zookeeper"} {
		t.Run(store, func(t *testing.T) {
			u := lockURL(t, store)
			log := filepath.Join(t.TempDir(), "children.log")
			var ps []*lockProc
			for i := range n {
				ps = append(ps, startLock(t, append([]string{"-provider", u, "-ttl", lockTTL.String(), "nightly", "--"},
					lockCommand(log, 300*time.Millisecond, i)...)...))
			}
			for i, p := range ps {
				if code := p.wait(t, 60*time.Second); code != i {
					t.Errorf("lock %d exited %d, want its command's %d; stderr:\n%s", i, code, i, p.stderr.String())
				}
			}
			recs, err := cluster.NewChildLog(log).Records()
			if err != nil {
				t.Fatal(err)
			}
			iv := intervals(t, recs)
			if len(iv) != n {
				t.Fatalf("%d commands ran, want %d:\n%v", len(iv), n, recs)
			}
			var prev uint64
			for i, in := range iv {
				start, stop := in[0], in[1]
				t.Logf("%s → %s", start, stop.At.Format("15:04:05.000"))
				if start.TokenNum() <= prev {
					t.Errorf("command %d ran with ELECTD_TOKEN %q after token %d: want a number that grows", i, start.Token, prev)
				}
				prev = start.TokenNum()
				if i > 0 && !start.At.After(iv[i-1][1].At) {
					t.Errorf("overlap: %s began before the previous command stopped at %s", start, iv[i-1][1].At.Format("15:04:05.000000"))
				}
				if i > 0 {
					t.Logf("handover %s", start.At.Sub(iv[i-1][1].At).Round(time.Millisecond))
				}
			}
		})
	}
}

// TestLockTimeout: while another holds the lease, -timeout gives up with
// status 75 and names the holder; -timeout 0 tries once.
func TestLockTimeout(t *testing.T) {
	t.Parallel()
	u := lockURL(t, "sqlite")
	log := filepath.Join(t.TempDir(), "children.log")
	holder := startLock(t, append([]string{"-provider", u, "-ttl", lockTTL.String(), "report", "--"}, lockCommand(log, 30*time.Second, 0)...)...)
	waitRecords(t, log, 1)

	for _, tc := range []struct {
		timeout  string
		min, max time.Duration
	}{{"700ms", 700 * time.Millisecond, 3 * time.Second}, {"0", 0, 2 * time.Second}} {
		p := runLock(t, 10*time.Second, "-provider", u, "-timeout", tc.timeout, "report", "--", "touch", filepath.Join(t.TempDir(), "ran"))
		took := p.ended.Sub(p.started)
		t.Logf("-timeout %s: exit %d after %s: %s", tc.timeout, p.code, took.Round(time.Millisecond), strings.TrimSpace(p.stderr.String()))
		if p.code != 75 {
			t.Errorf("-timeout %s: exit %d, want 75; stderr:\n%s", tc.timeout, p.code, p.stderr.String())
		}
		if took < tc.min || took > tc.max {
			t.Errorf("-timeout %s: gave up after %s, want %s to %s", tc.timeout, took, tc.min, tc.max)
		}
		if want := fmt.Sprintf("held by %s-%d", hostname(t), holder.cmd.Process.Pid); !strings.Contains(p.stderr.String(), want) {
			t.Errorf("-timeout %s: stderr does not say %q:\n%s", tc.timeout, want, p.stderr.String())
		}
	}
	if recs, _ := cluster.NewChildLog(log).Records(); len(recs) != 1 {
		t.Errorf("a command ran while the lease was held: %v", recs)
	}
}

func hostname(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// waitRecords waits until the child log holds n records.
func waitRecords(t *testing.T, log string, n int) []cluster.Record {
	t.Helper()
	cl := cluster.NewChildLog(log)
	var recs []cluster.Record
	if !cluster.Until(20*time.Second, 10*time.Millisecond, func() bool {
		recs, _ = cl.Records()
		return len(recs) >= n
	}) {
		t.Fatalf("the child log has %d records, want %d: %v", len(recs), n, recs)
	}
	return recs
}

// TestLockExitStatus: electd lock exits with its command's status, its
// death by a signal (128+N) included, and with the shell's 127 and 126
// when the command is missing or cannot run. ELECTD_TOKEN and the other
// variables of a run command reach the command; its output is electd
// lock's.
func TestLockExitStatus(t *testing.T) {
	t.Parallel()
	u := lockURL(t, "sqlite")
	notExec := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		command []string
		code    int
		stdout  string // a prefix of stdout
		stderr  string // all of stderr when the command ran; else a part of it
	}{
		{"success", []string{"true"}, 0, "", ""},
		{"failure", []string{"sh", "-c", "exit 7"}, 7, "", ""},
		{"killed by a signal", []string{"sh", "-c", "kill -KILL $$"}, 128 + 9, "", ""},
		{"environment", []string{"sh", "-c", `echo "$ELECTD_EVENT $ELECTD_JOB $ELECTD_TOKEN"; echo to-stderr >&2`}, 0, "elected env-job ", "to-stderr\n"},
		{"argv, no shell", []string{"echo", "$HOME", "a;b"}, 0, "$HOME a;b\n", ""},
		{"not found", []string{"/nonexistent/electd-test-command"}, 127, "", `cannot start the command "/nonexistent/electd-test-command": no such file or directory`},
		{"not executable", []string{notExec}, 126, "", "permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := runLock(t, 20*time.Second, append([]string{"-provider", u, "env-job", "--"}, tc.command...)...)
			if p.code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", p.code, tc.code, p.stderr.String())
			}
			if !strings.HasPrefix(p.stdout.String(), tc.stdout) {
				t.Errorf("stdout %q does not start with %q", p.stdout.String(), tc.stdout)
			}
			ran := tc.code < 126
			if ran && p.stderr.String() != tc.stderr {
				// A command that ran to its end speaks for itself: electd
				// lock adds nothing, not even a line for a failure.
				t.Errorf("stderr %q, want the command's own %q", p.stderr.String(), tc.stderr)
			}
			if !ran && !strings.Contains(p.stderr.String(), tc.stderr) {
				t.Errorf("stderr %q does not contain %q", p.stderr.String(), tc.stderr)
			}
			if !ran && regexp.MustCompile(`\b(proc|agent|exec|fork/exec):`).MatchString(p.stderr.String()) {
				t.Errorf("stderr %q names electd's or Go's internals", p.stderr.String())
			}
		})
	}
}

// TestLockReleasedOnExit: the lease is released when the command exits,
// and when electd lock is stopped by SIGINT or SIGTERM (which stop the
// command first): a second lock with -timeout 0 (one try) gets it at once,
// with a greater token.
func TestLockReleasedOnExit(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			u := lockURL(t, store)
			tokenOf := func(p *lockProc) uint64 {
				n, _ := strconv.ParseUint(strings.TrimSpace(p.stdout.String()), 10, 64)
				return n
			}
			first := runLock(t, 20*time.Second, "-provider", u, "-ttl", "60s", "job", "--", "sh", "-c", "echo $ELECTD_TOKEN")
			second := runLock(t, 20*time.Second, "-provider", u, "-ttl", "60s", "-timeout", "0", "job", "--", "sh", "-c", "echo $ELECTD_TOKEN")
			if first.code != 0 || second.code != 0 {
				t.Fatalf("exits %d and %d, want 0 and 0 (a 60s lease left behind would make the second 75):\n%s\n%s", first.code, second.code, first.stderr.String(), second.stderr.String())
			}
			t.Logf("tokens %d then %d; the second lock took %s", tokenOf(first), tokenOf(second), second.ended.Sub(second.started).Round(time.Millisecond))
			if tokenOf(first) == 0 || tokenOf(second) <= tokenOf(first) {
				t.Errorf("tokens %d then %d: want a token that grows", tokenOf(first), tokenOf(second))
			}

			for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
				log := filepath.Join(t.TempDir(), "children.log")
				p := startLock(t, append([]string{"-provider", u, "-ttl", "60s", "job", "--"}, lockCommand(log, time.Minute, 0)...)...)
				waitRecords(t, log, 1)
				p.cmd.Process.Signal(sig)
				code := p.wait(t, 20*time.Second)
				if code != 128+int(sig) {
					t.Errorf("%s: exit %d, want %d; stderr:\n%s", sig, code, 128+int(sig), p.stderr.String())
				}
				recs := waitRecords(t, log, 2)
				if recs[1].Kind != "stop" {
					t.Errorf("%s: the command was not stopped by SIGTERM: %v", sig, recs)
				}
				next := runLock(t, 20*time.Second, "-provider", u, "-timeout", "0", "job", "--", "true")
				if next.code != 0 {
					t.Errorf("after %s: the next lock exited %d, want 0 (the lease was not released); stderr:\n%s", sig, next.code, next.stderr.String())
				}
			}
		})
	}
}

// TestLockLostLease: when the lease is lost, the command is stopped before
// the lease could expire and electd lock exits 69 saying so. Two ways to
// lose it: another holder takes it in the store (a renewal answers "lost"),
// and the store goes away (renewals fail until the step-down point).
func TestLockLostLease(t *testing.T) {
	t.Parallel()
	t.Run("stolen", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "leases.db")
		log := filepath.Join(t.TempDir(), "children.log")
		p := startLock(t, append([]string{"-provider", "sqlite://" + db, "-ttl", lockTTL.String(), "billing", "--"}, lockCommand(log, time.Minute, 0)...)...)
		waitRecords(t, log, 1)
		conn, err := dbsql.Open("sqlite", db+"?_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		stolen := time.Now()
		res, err := conn.ExecContext(context.Background(),
			`UPDATE electd_leases SET holder = 'thief', token = token + 1, expires_at = expires_at + 600000 WHERE "key" = 'billing'`)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("stole %d leases, want 1", n)
		}
		code := p.wait(t, 20*time.Second)
		t.Logf("exit %d %s after the theft: %s", code, p.ended.Sub(stolen).Round(time.Millisecond), strings.TrimSpace(p.stderr.String()))
		if code != 69 || !strings.Contains(p.stderr.String(), "lost the lease billing") {
			t.Errorf("exit %d, want 69 with \"lost the lease billing\"; stderr:\n%s", code, p.stderr.String())
		}
		recs := waitRecords(t, log, 2)
		if recs[1].Kind != "stop" {
			t.Errorf("the command was not stopped with SIGTERM: %v", recs)
		}
		// The thief keeps the lease: electd lock released nothing of his.
		var holder string
		if err := conn.QueryRow(`SELECT holder FROM electd_leases WHERE "key" = 'billing'`).Scan(&holder); err != nil || holder != "thief" {
			t.Errorf("holder %q (%v) after electd lock exited, want the thief's", holder, err)
		}
	})

	t.Run("store gone", func(t *testing.T) {
		addr, redis := teststore.StartRedis(t)
		log := filepath.Join(t.TempDir(), "children.log")
		p := startLock(t, append([]string{"-provider", "redis://" + addr, "-ttl", lockTTL.String(), "-stop-timeout", "500ms", "billing", "--"}, lockCommand(log, time.Minute, 0)...)...)
		waitRecords(t, log, 1)
		// The last renewal went out before the store went away, so the
		// lease ends at the latest one ttl after this.
		gone := time.Now()
		redis.Stop()
		code := p.wait(t, 20*time.Second)
		recs := waitRecords(t, log, 2)
		t.Logf("exit %d; the command stopped %s after the store went away (ttl %s): %s",
			code, recs[1].At.Sub(gone).Round(time.Millisecond), lockTTL, strings.TrimSpace(p.stderr.String()))
		if code != 69 || !strings.Contains(p.stderr.String(), "lost the lease billing") {
			t.Errorf("exit %d, want 69 with \"lost the lease billing\"; stderr:\n%s", code, p.stderr.String())
		}
		if recs[1].Kind != "stop" {
			t.Fatalf("the command was not stopped with SIGTERM: %v", recs)
		}
		if limit := gone.Add(lockTTL * 99 / 100); !recs[1].At.Before(limit) {
			t.Errorf("the command stopped at %s, after the lease could have expired (%s)", recs[1].At.Format("15:04:05.000"), limit.Format("15:04:05.000"))
		}
	})
}

// TestLockSecrets: a password in the URL is never printed, whether the
// store cannot be reached or the URL is refused.
func TestLockSecrets(t *testing.T) {
	t.Parallel()
	const pw = "s3cret-Pa55word"
	for _, tc := range []struct {
		name, url string
		code      int
	}{
		{"unreachable", "postgres://electd:" + pw + "@127.0.0.1:1/test?sslmode=disable", 69},
		{"refused", "mysql://electd:" + pw + "@127.0.0.1:3306/", 2},
		{"unreachable redis", "redis://default:" + pw + "@127.0.0.1:1", 69},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := runLock(t, 20*time.Second, "-provider", tc.url, "-timeout", "1s", "-log-level", "debug", "job", "--", "true")
			if p.code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", p.code, tc.code, p.stderr.String())
			}
			if strings.Contains(p.stderr.String(), pw) || strings.Contains(p.stdout.String(), pw) {
				t.Errorf("the password was printed:\n%s", p.stderr.String())
			}
			if !strings.Contains(p.stderr.String(), "electd lock: ") {
				t.Errorf("no message from electd lock on stderr:\n%s", p.stderr.String())
			}
		})
	}
}
