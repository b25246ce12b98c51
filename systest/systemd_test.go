package systest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/cluster"
	"github.com/electd/electd/internal/teststore"
)

// notifySocket is a fake systemd: a unix datagram socket collecting what the
// agent sends to NOTIFY_SOCKET.
type notifySocket struct {
	path string
	msgs chan string
}

func newNotifySocket(t *testing.T) *notifySocket {
	t.Helper()
	// Socket paths are limited to 108 bytes: t.TempDir() can be longer.
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	n := &notifySocket{path: filepath.Join(dir, "notify"), msgs: make(chan string, 1000)}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				close(n.msgs)
				return
			}
			n.msgs <- string(buf[:k])
		}
	}()
	return n
}

// expect waits for a message starting with want, skipping WATCHDOG pings
// (and counting them) unless WATCHDOG=1 is what is wanted.
func (n *notifySocket) expect(t *testing.T, want string, within time.Duration) (pings int) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case m, ok := <-n.msgs:
			if !ok {
				t.Fatalf("notify socket closed while waiting for %s", want)
			}
			if strings.HasPrefix(m, want) {
				return pings
			}
			if m == "WATCHDOG=1" {
				pings++
				continue
			}
			t.Fatalf("systemd got %q while waiting for %q", m, want)
		case <-deadline:
			t.Fatalf("no %s within %s", want, within)
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// readPidToken waits for the child to write "PID TOKEN" to path.
func readPidToken(t *testing.T, path string) (int, string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(path)
		f := strings.Fields(string(b))
		if err == nil && len(f) == 2 {
			if pid, _ := strconv.Atoi(f[0]); pid > 0 && alive(pid) {
				return pid, f[1]
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no running child wrote %s", path)
	return 0, ""
}

// Type=notify: READY once started, RELOADING then READY around each reload
// (SIGHUP and POST /v1/reload), WATCHDOG pings while healthy, STOPPING on
// SIGTERM. A reload keeps an unchanged job's child and token; a changed job
// restarts; a broken configuration is rejected and the old one keeps running.
func TestSystemdNotifyAndReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sd := newNotifySocket(t)
	port := freePort(t)
	cfgPath := filepath.Join(dir, "electd.hcl")
	write := func(changedEnv string) {
		cfg := fmt.Sprintf(`
agent {
  node_id = "node-1"
  listen  = "127.0.0.1:%d"
}
provider "sql" "s" {
  driver = "sqlite"
  dsn    = %q
}
job "steady" {
  ttl         = "4s"
  renew_every = "1s"
  run {
    command      = ["sh", "-c", "echo \"$$ $ELECTD_TOKEN\" > %s/steady.pid; exec sleep 600"]
    stop_timeout = "1s"
  }
}
job "edited" {
  ttl         = "4s"
  renew_every = "1s"
  run {
    command      = ["sh", "-c", "echo \"$$ $ELECTD_TOKEN\" > %s/edited.pid; exec sleep 600"]
    env          = { VERSION = %q }
    stop_timeout = "1s"
  }
}
`, port, filepath.Join(dir, "leases.db"), dir, dir, changedEnv)
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("1")
	a, err := cluster.StartProcess(cluster.Spec{Name: "node-1", Argv: []string{binary, "run", "-config", cfgPath}, Dir: dir,
		Env: []string{"NOTIFY_SOCKET=" + sd.path, "WATCHDOG_USEC=400000"}, LogPath: filepath.Join(dir, "agent.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		a.Kill()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "agent.log"))
			t.Logf("agent log:\n%s", b)
		}
	}()

	sd.expect(t, "READY=1", 15*time.Second)
	steadyPid, steadyTok := readPidToken(t, dir+"/steady.pid")
	editedPid, _ := readPidToken(t, dir+"/edited.pid")
	if pings := sd.expect(t, "WATCHDOG=1", 5*time.Second); pings != 0 {
		t.Fatal("unreachable")
	}

	// 1. SIGHUP with nothing changed: everything stays.
	a.Signal(syscall.SIGHUP)
	sd.expect(t, "RELOADING=1", 10*time.Second)
	sd.expect(t, "READY=1", 10*time.Second)
	if pid, tok := readPidToken(t, dir+"/steady.pid"); pid != steadyPid || tok != steadyTok {
		t.Errorf("unchanged job after SIGHUP: child %d token %s, want %d %s", pid, tok, steadyPid, steadyTok)
	}

	// 2. One job edited, reloaded through the API: only it restarts.
	write("2")
	st := postReload(t, port, http.StatusOK)
	if strings.Join(st.Restarted, ",") != "edited" || strings.Join(st.Kept, ",") != "steady" {
		t.Errorf("reload result %+v, want steady kept and edited restarted", st)
	}
	sd.expect(t, "RELOADING=1", 10*time.Second)
	sd.expect(t, "READY=1", 10*time.Second)
	if pid, tok := readPidToken(t, dir+"/steady.pid"); pid != steadyPid || tok != steadyTok {
		t.Errorf("unchanged job after an edit of another: child %d token %s, want %d %s", pid, tok, steadyPid, steadyTok)
	}
	if alive(editedPid) {
		t.Errorf("the edited job's old child %d still runs", editedPid)
	}
	if _, tok := readPidToken(t, dir+"/edited.pid"); tok != "2" {
		t.Errorf("edited job token %s after restart, want 2", tok)
	}

	// 3. A configuration that fails check: rejected, nothing changes.
	if err := os.WriteFile(cfgPath, []byte(`job "broken" { ttl = "nope" }`), 0o644); err != nil {
		t.Fatal(err)
	}
	st = postReload(t, port, http.StatusUnprocessableEntity)
	sd.expect(t, "RELOADING=1", 10*time.Second)
	sd.expect(t, "READY=1", 10*time.Second) // still serving the old configuration
	if st.OK || !strings.Contains(st.Error, "electd.hcl:1") {
		t.Errorf("rejected reload shows %+v, want the error with its place", st)
	}
	var last struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/v1/reload", port), &last)
	if last.OK || last.Error == "" {
		t.Errorf("GET /v1/reload after a rejected reload: %+v", last)
	}
	if pid, _ := readPidToken(t, dir+"/steady.pid"); pid != steadyPid {
		t.Errorf("a rejected reload restarted the steady job")
	}

	// 4. SIGTERM: STOPPING, children stopped, exit 0.
	a.Signal(syscall.SIGTERM)
	sd.expect(t, "STOPPING=1", 10*time.Second)
	select {
	case <-a.Done():
		if err := a.Err(); err != nil {
			t.Errorf("agent exit: %v, want 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("agent did not exit after SIGTERM")
	}
	if alive(steadyPid) {
		t.Errorf("child %d survived the agent's clean stop", steadyPid)
	}
}

type reloadStatus struct {
	OK        bool     `json:"ok"`
	Error     string   `json:"error"`
	Kept      []string `json:"kept"`
	Restarted []string `json:"restarted"`
}

func postReload(t *testing.T, port, wantStatus int) reloadStatus {
	t.Helper()
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/reload", port), "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st reloadStatus
	json.NewDecoder(resp.Body).Decode(&st)
	if resp.StatusCode != wantStatus {
		t.Fatalf("POST /v1/reload: %s (%+v), want %d", resp.Status, st, wantStatus)
	}
	return st
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

// The unit file passes systemd's own checks where systemd-analyze exists.
func TestUnitFileVerifies(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze is not installed here: only the unit's required settings are checked")
	}
	unit, err := os.ReadFile("../dist/systemd/electd.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Type=notify", "ExecReload=/bin/kill -HUP $MAINPID", "KillMode=mixed",
		"TimeoutStopSec=", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes",
		"PrivateTmp=yes", "StateDirectory=electd", "Restart=on-failure", "User=electd", "WatchdogSec="} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("the unit lacks %q", want)
		}
	}
	if sa == "" {
		return
	}
	// verify resolves ExecStart: point it at the binary under test.
	dir := t.TempDir()
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/electd", binary)
	path := filepath.Join(dir, "electd.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// --man=no: the man page of Documentation= is not installed on this
	// host; TestMakeInstall and TestDebianPackage verify the unit with it.
	out, err := exec.Command(sa, "verify", "--man=no", path).CombinedOutput()
	// Lines about the host (no running systemd in a container, other units)
	// are not the unit's fault; anything naming our unit is.
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "electd.service") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
	if err != nil {
		t.Logf("systemd-analyze verify exited with %v:\n%s", err, out)
	}
}

// A store that stops answering does not wedge the agent: its loops go on
// turning (each attempt ends in a timeout), so the systemd watchdog pings
// go on for the whole outage, far past the ttl, and systemd never restarts
// the agent for it (a restart would not bring the store back).
func TestWatchdogGoesOnWhenTheStoreHangs(t *testing.T) {
	t.Parallel()
	redisAddr, redis := teststore.StartRedis(t)
	t.Cleanup(func() { redis.Signal(syscall.SIGCONT) })
	dir := t.TempDir()
	sd := newNotifySocket(t)
	cfgPath := filepath.Join(dir, "electd.hcl")
	cfg := fmt.Sprintf(`
agent {
  node_id = "node-1"
  listen  = ""
}
provider "redis" "r" {
  addresses = [%q]
}
job "w" {
  ttl         = "2s"
  renew_every = "500ms"
  retry_every = "250ms"
}
`, redisAddr)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := cluster.StartProcess(cluster.Spec{Name: "node-1", Argv: []string{binary, "run", "-config", cfgPath}, Dir: dir,
		Env: []string{"NOTIFY_SOCKET=" + sd.path, "WATCHDOG_USEC=400000"}, LogPath: filepath.Join(dir, "agent.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop(30 * time.Second)
	sd.expect(t, "READY=1", 15*time.Second)
	sd.expect(t, "WATCHDOG=1", 5*time.Second)

	redis.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	// WATCHDOG_USEC=400ms: pings every 200ms. Over 4 ttls (8s) without an
	// answer from the store, no gap between pings may reach WatchdogSec.
	last := stopped
	deadline := time.NewTimer(8 * time.Second)
	defer deadline.Stop()
	pings := 0
	for done := false; !done; {
		gap := time.NewTimer(400 * time.Millisecond)
		select {
		case m := <-sd.msgs:
			if m == "WATCHDOG=1" {
				last = time.Now()
				pings++
			}
		case <-gap.C:
			t.Fatalf("no watchdog ping for 400ms (WatchdogSec), %s after the store stopped answering: systemd would restart the agent", time.Since(stopped).Round(time.Millisecond))
		case <-deadline.C:
			done = true
		}
		gap.Stop()
	}
	t.Logf("store stopped for 8s (ttl 2s): %d watchdog pings, the last %s ago", pings, time.Since(last).Round(time.Millisecond))

	redis.Signal(syscall.SIGCONT)
	sd.expect(t, "WATCHDOG=1", 10*time.Second)
}
