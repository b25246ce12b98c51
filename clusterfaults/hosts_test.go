package clusterfaults

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// subnet is the hosts' network: its addresses exist only inside the
// namespaces a test makes, behind a bridge in a namespace of its own, so
// two runs at once do not meet and the machine's routes are not touched.
const subnet = "10.77.0"

// hosts are n network namespaces, each with one address on a bridge.
type hosts struct {
	t      *testing.T
	prefix string // of every namespace's name, unique to the run
	n      int
}

// Host i (1-based) is namespace prefix-hI at subnet.I.
func (h *hosts) ns(i int) string   { return fmt.Sprintf("%s-h%d", h.prefix, i) }
func (h *hosts) addr(i int) string { return fmt.Sprintf("%s.%d", subnet, i) }
func (h *hosts) sw() string        { return h.prefix + "-sw" }

// newHosts makes n hosts, or skips t when this machine cannot (not root,
// no network namespaces, no iptables).
func newHosts(t *testing.T, n int) *hosts {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the cluster suite needs root (network namespaces and iptables); run it as root, or `make test-clusters` under sudo")
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the cluster suite needs %s (scripts/services.sh netns installs it): %v", tool, err)
		}
	}
	removeStale(t)
	h := &hosts{t: t, prefix: "ecf" + randomHex(), n: n}
	if out, err := exec.Command("ip", "netns", "add", h.sw()).CombinedOutput(); err != nil {
		t.Skipf("the cluster suite needs network namespaces, which this machine refuses: ip netns add: %v: %s", err, out)
	}
	// The run's owner, so that a later run can clean up after this one if
	// it is killed before its cleanups.
	if err := os.MkdirAll(ownersDir, 0o755); err == nil {
		_ = os.WriteFile(filepath.Join(ownersDir, h.prefix), []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
	t.Cleanup(h.remove)
	h.run("", "ip", "-n", h.sw(), "link", "add", "br0", "type", "bridge")
	h.run("", "ip", "-n", h.sw(), "link", "set", "br0", "up")
	for i := 1; i <= n; i++ {
		h.run("", "ip", "netns", "add", h.ns(i))
		h.run("", "ip", "-n", h.ns(i), "link", "set", "lo", "up")
		// Both ends are made inside the namespaces: nothing appears in
		// the machine's own.
		h.run("", "ip", "-n", h.ns(i), "link", "add", "eth0", "type", "veth", "peer", "name", fmt.Sprintf("p%d", i), "netns", h.sw())
		h.run("", "ip", "-n", h.ns(i), "addr", "add", h.addr(i)+"/24", "dev", "eth0")
		h.run("", "ip", "-n", h.ns(i), "link", "set", "eth0", "up")
		h.run("", "ip", "-n", h.sw(), "link", "set", fmt.Sprintf("p%d", i), "master", "br0")
		h.run("", "ip", "-n", h.sw(), "link", "set", fmt.Sprintf("p%d", i), "up")
	}
	return h
}

// run runs argv, in host ns when ns is not "", and fails the test on error.
func (h *hosts) run(ns string, argv ...string) string {
	h.t.Helper()
	out, err := h.try(ns, argv...)
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

func (h *hosts) try(ns string, argv ...string) (string, error) {
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, out)
	}
	return string(out), nil
}

// isolate cuts host i off: every packet in or out is dropped, silently, as
// in a real partition; the host still reaches itself (loopback and its own
// address).
func (h *hosts) isolate(i int) {
	h.t.Helper()
	for _, rule := range [][]string{
		{"-A", "INPUT", "-i", "lo", "-j", "ACCEPT"},
		{"-A", "INPUT", "-j", "DROP"},
		{"-A", "OUTPUT", "-o", "lo", "-j", "ACCEPT"},
		{"-A", "OUTPUT", "-j", "DROP"},
	} {
		h.run(h.ns(i), append([]string{"iptables", "-w"}, rule...)...)
	}
}

// heal lifts host i's partition.
func (h *hosts) heal(i int) {
	h.t.Helper()
	h.run(h.ns(i), "iptables", "-w", "-F", "INPUT")
	h.run(h.ns(i), "iptables", "-w", "-F", "OUTPUT")
}

// remove deletes the namespaces (their links go with them). The processes
// in them are the test's own and are stopped by their own cleanups, which
// run first (registered later).
func (h *hosts) remove() {
	for i := 1; i <= h.n; i++ {
		_, _ = h.try("", "ip", "netns", "del", h.ns(i))
	}
	_, _ = h.try("", "ip", "netns", "del", h.sw())
	_ = os.Remove(filepath.Join(ownersDir, h.prefix))
}

// ownersDir holds a file per run of the suite, named by its namespaces'
// prefix and holding the test process's pid.
const ownersDir = "/run/electd-clusterfaults"

// removeStale cleans up after runs that were killed before their cleanups
// ran (a SIGKILL, a timeout's panic): their namespaces, and the store
// members and agents still running in them. A run whose process lives is
// left alone: two runs at once do not meet.
func removeStale(t *testing.T) {
	entries, _ := os.ReadDir(ownersDir)
	namespaces, _ := exec.Command("ip", "netns", "list").Output()
	for _, e := range entries {
		prefix := e.Name()
		b, _ := os.ReadFile(filepath.Join(ownersDir, prefix))
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && syscall.Kill(pid, 0) == nil {
			continue // its run goes on (or a process now has its pid: left for later)
		}
		for _, line := range strings.Split(string(namespaces), "\n") {
			ns, _, _ := strings.Cut(strings.TrimSpace(line), " ")
			if !strings.HasPrefix(ns, prefix+"-") {
				continue
			}
			if pids, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
				for _, f := range strings.Fields(string(pids)) {
					if pid, err := strconv.Atoi(f); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			_ = exec.Command("ip", "netns", "del", ns).Run()
			t.Logf("removed namespace %s, left by a run that was killed", ns)
		}
		_ = os.Remove(filepath.Join(ownersDir, prefix))
	}
}

// in is argv run in host i's namespace.
func (h *hosts) in(i int, argv ...string) []string {
	return append([]string{"ip", "netns", "exec", h.ns(i)}, argv...)
}

var _ = time.Second

// A run killed before its cleanups leaves its namespaces and the processes
// in them; the next run removes them, and leaves a live run's alone.
func TestRemoveStale(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	if err := os.MkdirAll(ownersDir, 0o755); err != nil {
		t.Fatal(err)
	}
	dead, live := "ecfdead"+randomHex(), "ecflive"+randomHex()
	// A pid that is not running: a child that has exited and been reaped.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	for prefix, pid := range map[string]int{dead: gone.Process.Pid, live: os.Getpid()} {
		if out, err := exec.Command("ip", "netns", "add", prefix+"-h1").CombinedOutput(); err != nil {
			t.Skipf("no network namespaces: %v: %s", err, out)
		}
		t.Cleanup(func() { exec.Command("ip", "netns", "del", prefix+"-h1").Run() })
		if err := os.WriteFile(filepath.Join(ownersDir, prefix), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(filepath.Join(ownersDir, prefix)) })
	}
	sleeper := exec.Command("ip", "netns", "exec", dead+"-h1", "sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- sleeper.Wait() }()

	removeStale(t)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		sleeper.Process.Kill()
		t.Fatal("the process in the killed run's namespace still runs")
	}
	list, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(list), dead+"-h1") {
		t.Errorf("the killed run's namespace is still there:\n%s", list)
	}
	if !strings.Contains(string(list), live+"-h1") {
		t.Errorf("the live run's namespace was removed:\n%s", list)
	}
	if _, err := os.Stat(filepath.Join(ownersDir, dead)); !os.IsNotExist(err) {
		t.Errorf("the killed run's owner file is still there: %v", err)
	}
}

// randomHex is 6 random hex digits.
func randomHex() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
