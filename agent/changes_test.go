package agent

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/metrics"
)

// A move of a job is counted by the agent whose term ended, by why, in
// electd_leader_changes_total{job,reason}, and the history's demoted
// record carries the same reason: here a step-down asked for through the
// API ("released"), then the agent stopping ("stopping").
func TestLeaderChangesCountedByReason(t *testing.T) {
	db := sqliteDB(t)
	plain := "job \"j\" {\n" + quickTimings + "}\n"
	m := metrics.New("test", "x")
	a := startAgent(t, loadConfig(t, agentConfig("node-a", db, plain)), func(o *Options) { o.Metrics = m })
	eventually(t, 10*time.Second, "node-a leads", func() bool { return a.job("j").state == "leader" })
	mb := metrics.New("test", "x")
	b := startAgent(t, loadConfig(t, agentConfig("node-b", db, plain)), func(o *Options) { o.Metrics = mb })
	eventually(t, 10*time.Second, "node-b follows node-a", func() bool { return b.job("j").leader == "node-a" })
	if body := scrape(t, m); strings.Contains(body, "electd_leader_changes_total") {
		t.Errorf("a change counted before any:\n%s", grep(body, "electd_leader_changes_total"))
	}

	if err := a.StepDown(t.Context(), "j"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "node-b leads", func() bool { return b.job("j").state == "leader" })
	eventually(t, 10*time.Second, "node-a counts the change", func() bool {
		return strings.Contains(scrape(t, m), `electd_leader_changes_total{job="j",reason="released"} 1`)
	})
	hist, err := a.History("j")
	if err != nil {
		t.Fatal(err)
	}
	var demoted []string
	for _, tr := range hist {
		if tr.Type == "demoted" {
			demoted = append(demoted, tr.Reason)
		}
	}
	if len(demoted) != 1 || demoted[0] != ReasonReleased {
		t.Errorf("node-a's history: demoted with reasons %q, want [released]", demoted)
	}

	b.stop(t)
	if got := grep(scrape(t, mb), "electd_leader_changes_total"); got != `electd_leader_changes_total{job="j",reason="stopping"} 1` {
		t.Errorf("node-b stopped while leading: %q, want one change, stopping", got)
	}
	if got := grep(scrape(t, m), "electd_leader_changes_total"); got != `electd_leader_changes_total{job="j",reason="released"} 1` {
		t.Errorf("node-a: %q, want its one change only", got)
	}
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// grep is the lines of body that begin with name and carry a value.
func grep(body, name string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, name+"{") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
