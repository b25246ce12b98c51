package systest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A load balancer's health checks against real agents, as HAProxy sends
// them (GET, no token, though the agents have one): /v1/jobs/{job}/leader
// answers 200 on the one agent that leads the job and 503 on the other,
// /follower the converse, and both follow the lease when the leader stops
// and another takes over. The body names nothing but the job and the state.
func TestLeaderCheckFollowsTheLease(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "leases.db")
	body := fmt.Sprintf("provider \"sql\" \"s\" {\n  driver = \"sqlite\"\n  dsn = %q\n}\n%s", db, apiJobs("sql.s"))
	addrA, addrB := freeLoopback(t), freeLoopback(t)
	a := startNode(t, "node-a", writeNodeConfig(t, dir, "node-a", addrA, apiToken, body), addrA)
	a.waitStatus("/readyz", http.StatusOK, 20*time.Second)
	a.waitJob("billing", "node-a leads billing", 20*time.Second, func(j jobStatus) bool { return j.State == "leader" })
	b := startNode(t, "node-b", writeNodeConfig(t, dir, "node-b", addrB, apiToken, body), addrB)
	b.waitStatus("/readyz", http.StatusOK, 20*time.Second)
	b.waitJob("billing", "node-b follows node-a", 20*time.Second, func(j jobStatus) bool { return j.Leader == "node-a" })

	check := func(n *apiNode, role string, want int, state string) {
		t.Helper()
		code, got := n.call(http.MethodGet, "/v1/jobs/billing/"+role, "")
		if code != want {
			t.Errorf("%s GET /v1/jobs/billing/%s without a token: %d %s, want %d", n.node, role, code, got, want)
			return
		}
		var m map[string]string
		if err := json.Unmarshal([]byte(got), &m); err != nil || len(m) != 2 || m["job"] != "billing" || m["state"] != state {
			t.Errorf("%s GET /v1/jobs/billing/%s: body %s, want only {\"job\":\"billing\",\"state\":%q}", n.node, role, got, state)
		}
		for _, secret := range []string{apiToken, db, "sqlite"} {
			if strings.Contains(got, secret) {
				t.Errorf("%s GET /v1/jobs/billing/%s: the body %s shows %q", n.node, role, got, secret)
			}
		}
	}
	check(a, "leader", http.StatusOK, "leader")
	check(a, "follower", http.StatusServiceUnavailable, "leader")
	check(b, "leader", http.StatusServiceUnavailable, "follower")
	check(b, "follower", http.StatusOK, "follower")
	if code, got := a.call(http.MethodGet, "/v1/jobs/nope/leader", ""); code != http.StatusNotFound {
		t.Errorf("GET /v1/jobs/nope/leader: %d %s, want 404", code, got)
	}

	// node-a stops (released its lease): node-b takes the job, and the
	// load balancer's check moves with it.
	if !a.stop() {
		t.Fatalf("node-a did not stop cleanly")
	}
	b.waitStatus("/v1/jobs/billing/leader", http.StatusOK, retryEvery*12/10+5*time.Second)
	check(b, "leader", http.StatusOK, "leader")
	check(b, "follower", http.StatusServiceUnavailable, "leader")
}
