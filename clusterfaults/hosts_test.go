package clusterfaults

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
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
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	h := &hosts{t: t, prefix: "ecf" + hex.EncodeToString(b), n: n}
	if out, err := exec.Command("ip", "netns", "add", h.sw()).CombinedOutput(); err != nil {
		t.Skipf("the cluster suite needs network namespaces, which this machine refuses: ip netns add: %v: %s", err, out)
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
}

// in is argv run in host i's namespace.
func (h *hosts) in(i int, argv ...string) []string {
	return append([]string{"ip", "netns", "exec", h.ns(i)}, argv...)
}

var _ = time.Second
