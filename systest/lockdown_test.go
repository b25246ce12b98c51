package systest

import (
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/cluster"
)

// downURLs are -provider URLs of every networked store at host:port, where
// no store answers.
func downURLs(hostport string) map[string]string {
	return map[string]string{
		"postgres":  "postgres://u:p@" + hostport + "/db",
		"mysql":     "mysql://u:p@" + hostport + "/db",
		"redis":     "redis://" + hostport,
		"etcd":      "etcd://" + hostport,
		"nats":      "nats://" + hostport,
		"zookeeper": "zk://" + hostport + "/electd",
	}
}

// TestLockBoundedWhenTheStoreIsDown: every wait of electd lock is bounded
// by what the operator asked, on every store, whether the store refuses
// connections (a port with nothing listening) or drops them (an iptables
// DROP rule in a network namespace: connects hang): -timeout 2s gives up
// within 4s, -timeout 0 within 3s, and with no -timeout, -store-timeout 3s
// within 6s; each with status 69 and one message.
func TestLockBoundedWhenTheStoreIsDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	l.Close()

	// A namespace of its own, whose loopback drops every packet to one
	// port.
	ns := "electd-lockdown-" + cluster.RandomSuffix()
	var wrap []string
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Logf("no network namespace (%v: %s): the dropped-connection cases are skipped", err, out)
	} else {
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		for _, argv := range [][]string{
			{"ip", "-n", ns, "link", "set", "lo", "up"},
			{"ip", "netns", "exec", ns, "iptables", "-A", "INPUT", "-p", "tcp", "--dport", "5999", "-j", "DROP"},
		} {
			if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
			}
		}
		wrap = []string{"ip", "netns", "exec", ns}
	}

	type way struct {
		name string
		urls map[string]string
		wrap []string
	}
	ways := []way{{"refused", downURLs(refused), nil}}
	if wrap != nil {
		ways = append(ways, way{"dropped", downURLs("127.0.0.1:5999"), wrap})
	}
	cases := []struct {
		name   string
		flags  []string
		within time.Duration
		says   string
	}{
		{"timeout 2s", []string{"-timeout", "2s"}, 4 * time.Second, "gave up waiting for the lease after 2s"},
		{"timeout 0", []string{"-timeout", "0"}, 3 * time.Second, "gave up waiting for the lease after 0s"},
		{"store-timeout 3s", []string{"-store-timeout", "3s"}, 6 * time.Second, "the store does not answer"},
	}
	// The six stores' runs of a case start together and are then judged one
	// by one: each only waits for its store's timeout, and one after
	// another they took over a minute. (All 18 of a way at once made the
	// process starts themselves late by 0.1 s on a loaded machine.)
	stores := []string{"postgres", "mysql", "redis", "etcd", "nats", "zookeeper"}
	for _, w := range ways {
		for _, tc := range cases {
			t.Run(w.name+"/"+tc.name, func(t *testing.T) {
				type run struct {
					name string
					p    *lockProc
					ran  string
				}
				var runs []run
				for _, store := range stores {
					ran := filepath.Join(t.TempDir(), "ran")
					argv := append(append([]string{}, w.wrap...), binary, "lock", "-provider", w.urls[store])
					argv = append(append(argv, tc.flags...), "nightly", "--", "touch", ran)
					runs = append(runs, run{store, startLockArgv(t, argv...), ran})
				}
				for _, r := range runs {
					t.Run(r.name, func(t *testing.T) {
						p := r.p
						p.wait(t, 30*time.Second)
						took := p.ended.Sub(p.started)
						stderr := p.stderr.String()
						t.Logf("exit %d after %s: %s", p.code, took.Round(time.Millisecond), strings.TrimSpace(stderr))
						if p.code != 69 {
							t.Errorf("exit %d, want 69", p.code)
						}
						if took > tc.within {
							t.Errorf("gave up after %s, want within %s", took.Round(time.Millisecond), tc.within)
						}
						// One message: electd lock's, not the store client's
						// warnings or a line per attempt.
						if n := strings.Count(stderr, "electd lock: "); n != 1 || strings.Contains(stderr, "[WARN]") || strings.Contains(stderr, "[INFO]") {
							t.Errorf("want one message on stderr, got %d:\n%s", n, stderr)
						}
						if !strings.Contains(stderr, tc.says) && !strings.Contains(stderr, "the store did not answer within") {
							t.Errorf("stderr does not say %q:\n%s", tc.says, stderr)
						}
						if exists(r.ran) {
							t.Error("the command ran")
						}
					})
				}
			})
		}
	}
}

// TestLockQuietInCron: with -timeout 0 -quiet, the electd lock that finds
// the lease held exits 75 and prints nothing, as flock -n does; the one
// that gets it prints only its command's output.
func TestLockQuietInCron(t *testing.T) {
	u := lockURL(t, "sqlite")
	log := filepath.Join(t.TempDir(), "children.log")
	startLock(t, append([]string{"-provider", u, "-ttl", lockTTL.String(), "nightly", "--"}, lockCommand(log, 30*time.Second, 0)...)...)
	waitRecords(t, log, 1)

	p := runLock(t, 10*time.Second, "-provider", u, "-timeout", "0", "-quiet", "nightly", "--", "echo", "ran")
	if p.code != 75 || p.stderr.String() != "" || p.stdout.String() != "" {
		t.Errorf("held elsewhere, -quiet: exit %d, stdout %q, stderr %q; want 75 and nothing", p.code, p.stdout.String(), p.stderr.String())
	}
	p = runLock(t, 10*time.Second, "-provider", u, "-timeout", "0", "nightly", "--", "echo", "ran")
	if p.code != 75 || !strings.Contains(p.stderr.String(), "is held by") {
		t.Errorf("held elsewhere, not quiet: exit %d, stderr %q; want 75 and who holds it", p.code, p.stderr.String())
	}
	p = runLock(t, 10*time.Second, "-provider", u, "-timeout", "0", "-quiet", "other", "--", "sh", "-c", "echo out; echo err >&2")
	if p.code != 0 || p.stdout.String() != "out\n" || p.stderr.String() != "err\n" {
		t.Errorf("free lease, -quiet: exit %d, stdout %q, stderr %q; want 0, the command's own output only", p.code, p.stdout.String(), p.stderr.String())
	}
}

func exists(path string) bool {
	_, err := exec.Command("test", "-e", path).CombinedOutput()
	return err == nil
}
