package clusterfaults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ec "github.com/electd/electd/internal/cluster"
	"github.com/electd/electd/internal/teststore"
)

// ZooKeeper's timing in the suite: sessions as short as 400 ms may be
// negotiated (a ttl of 3 s is one); a follower that has not heard from the
// leader for syncLimit × tickTime (1 s) is dropped.
const (
	zkTick      = 200 * time.Millisecond
	zkSyncLimit = 5
	zkInitLimit = 25
)

// zkCluster is a ZooKeeper 3.8 ensemble, one server per host.
type zkCluster struct {
	t    *testing.T
	h    *hosts
	dir  string
	java string
	*members
}

func newZooKeeper(t *testing.T, h *hosts) store {
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skipf("java is not installed (scripts/services.sh zookeeper): %v", err)
	}
	if _, err := os.Stat(teststore.ZooKeeperJar); err != nil {
		t.Skipf("ZooKeeper is not installed (scripts/services.sh zookeeper): %v", err)
	}
	z := &zkCluster{t: t, h: h, dir: t.TempDir(), java: java, members: newMembers(t, h, "zookeeper")}
	for i := 1; i <= h.n; i++ {
		z.start(i)
	}
	if !ec.Until(90*time.Second, 300*time.Millisecond, func() bool { return z.healthy(1) }) {
		t.Fatalf("ZooKeeper ensemble not serving within 90s:\n%s", z.logs())
	}
	return z
}

func (z *zkCluster) name() string { return "zookeeper" }

func (z *zkCluster) block() string {
	var servers []string
	for i := 1; i <= z.h.n; i++ {
		servers = append(servers, z.h.addr(i)+":2181")
	}
	return ec.ZooKeeperBlock("/electd-clusters", servers)
}

func (z *zkCluster) start(i int) {
	z.t.Helper()
	dir := filepath.Join(z.dir, fmt.Sprintf("h%d", i))
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		z.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprintf("%d\n", i)), 0o644); err != nil {
		z.t.Fatal(err)
	}
	cfg := []string{
		fmt.Sprintf("tickTime=%d", zkTick.Milliseconds()),
		fmt.Sprintf("initLimit=%d", zkInitLimit),
		fmt.Sprintf("syncLimit=%d", zkSyncLimit),
		fmt.Sprintf("minSessionTimeout=%d", 2*zkTick.Milliseconds()),
		"maxSessionTimeout=60000",
		"dataDir=" + data,
		"clientPort=2181",
		"clientPortAddress=" + z.h.addr(i),
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=ruok,srvr",
		"forceSync=yes",
	}
	for k := 1; k <= z.h.n; k++ {
		cfg = append(cfg, fmt.Sprintf("server.%d=%s:2888:3888", k, z.h.addr(k)))
	}
	path := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(path, []byte(strings.Join(cfg, "\n")+"\n"), 0o644); err != nil {
		z.t.Fatal(err)
	}
	argv := z.h.in(i, z.java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", teststore.ZooKeeperJar+":/usr/share/java/slf4j-simple.jar",
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", path)
	z.run(i, dir, argv...)
}

// srvr is the answer of host i's server to the srvr command, asked from
// host from.
func (z *zkCluster) srvr(from, i int) string {
	script := fmt.Sprintf("exec 3<>/dev/tcp/%s/2181 && echo srvr >&3 && timeout 1 cat <&3", z.h.addr(i))
	argv := z.h.in(from, "timeout", "2", "bash", "-c", script)
	out, _ := exec.Command(argv[0], argv[1:]...).Output()
	return string(out)
}

func (z *zkCluster) healthy(from int) bool {
	for i := 1; i <= z.h.n; i++ {
		if !strings.Contains(z.srvr(from, i), "Mode: ") {
			return false
		}
	}
	return true
}

func (z *zkCluster) leader(from int) (int, error) {
	for i := 1; i <= z.h.n; i++ {
		if strings.Contains(z.srvr(from, i), "Mode: leader") {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no ZooKeeper server says it leads")
}

func (z *zkCluster) restart(i int) {
	z.t.Helper()
	z.start(i)
	if !ec.Until(90*time.Second, 300*time.Millisecond, func() bool { return z.healthy(i) }) {
		z.t.Fatalf("ZooKeeper not serving within 90s of restarting h%d:\n%s", i, z.logs())
	}
}

// electionTime is how much later than ttl a lease can end when the
// ensemble loses its leader: the followers notice after syncLimit × tickTime
// and elect a new leader, which then waits for a quorum to sync; sessions
// are restarted by the new leader.
func (z *zkCluster) electionTime() time.Duration { return 4 * time.Second }
