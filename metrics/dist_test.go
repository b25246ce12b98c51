package metrics

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// exposedNames scrapes an agent's registry with a series in every vector
// and returns the metric names in it (a histogram's _bucket, _sum, _count).
func exposedNames(t *testing.T) map[string]bool {
	t.Helper()
	m := New("1.2.3", "abc")
	m.CollectJobs(func() []JobSample {
		return []JobSample{{Job: "billing", Leader: true, Elected: 1, Demoted: 1, LeaderChanges: 1, Eligible: true, HasHealth: true, Healthy: true,
			TokenRegressions: 1, LastSuccess: time.Unix(1_764_230_461, 0), NextRun: time.Unix(1_764_316_800, 0),
			LastRunKnown: true, LastRunSucceeded: true}}
	})
	m.LeaseOp.WithLabelValues("sql.main", "renew").Observe(0.01)
	m.LeaseErrors.WithLabelValues("sql.main", "renew").Inc()
	m.ActionRuns.WithLabelValues("billing", "elected", "task", "ok").Inc()
	m.GivenAway.WithLabelValues("billing", "failing").Inc()
	m.TaskRuns.WithLabelValues("billing", "succeeded").Inc()
	m.TaskDuration.WithLabelValues("billing").Observe(1)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	names := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if f := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]`).FindStringSubmatch(line); f != nil {
			names[f[1]] = true
		}
	}
	return names
}

// electdNames are the electd_ metric names a query or rule text uses, with
// every character a metric name may have (electd_is_Leader or
// electd_is_leader:rate is a name the agent does not expose, not a shorter
// one it does).
func electdNames(text string) []string {
	return regexp.MustCompile(`\belectd_[a-zA-Z0-9_:]+`).FindAllString(text, -1)
}

// checkNames fails for every name that the agent does not expose.
func checkNames(t *testing.T, what string, used []string, exposed map[string]bool) {
	t.Helper()
	for _, name := range used {
		if !exposed[name] {
			t.Errorf("%s uses %s, which the agent does not expose", what, name)
		}
	}
}

// The Grafana dashboard's every query (panels and the job variable) names
// only metrics an agent exposes.
func TestDashboardUsesRealMetrics(t *testing.T) {
	src, err := os.ReadFile("../dist/grafana/electd.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query struct {
					Query string `json:"query"`
				} `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(src, &dash); err != nil {
		t.Fatalf("dist/grafana/electd.json: %v", err)
	}
	exposed := exposedNames(t)
	used := map[string]bool{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 && p.Type != "row" {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			names := electdNames(q.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q: the query %q names no electd metric", p.Title, q.Expr)
			}
			checkNames(t, "panel "+p.Title, names, exposed)
			for _, n := range names {
				used[n] = true
			}
		}
	}
	for _, v := range dash.Templating.List {
		checkNames(t, "variable "+v.Name, electdNames(v.Query.Query), exposed)
	}
	// Anywhere else in the file too: the panels of a collapsed row, an
	// annotation's query, a description that tells the reader what to query.
	checkNames(t, "dist/grafana/electd.json", electdNames(string(src)), exposed)
	// What the dashboard is for: leaders, moves, renewal latency, tasks.
	for _, want := range []string{"electd_is_leader", "electd_transitions_total", "electd_lease_op_seconds_bucket", "electd_action_runs_total"} {
		if !used[want] {
			t.Errorf("no panel uses %s", want)
		}
	}
	var names []string
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("%d panels use %v", len(dash.Panels), names)
}

// The alert rules pass promtool's check and their unit tests
// (electd-alerts_test.yml), and name only metrics an agent exposes.
func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		// make test installs it (scripts/services.sh) and fails without it;
		// make test-short is for a contributor's machine as it is.
		if testing.Short() {
			t.Skip("promtool is not installed (-short): the alert rules are not checked; `scripts/services.sh promtool` installs it")
		}
		t.Fatal("promtool is not installed: `scripts/services.sh promtool` (run by make test) installs it")
	}
	for _, args := range [][]string{{"check", "rules", "electd-alerts.yml"}, {"test", "rules", "electd-alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "../dist/prometheus"
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	rules, err := os.ReadFile("../dist/prometheus/electd-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "electd-alerts.yml", electdNames(string(rules)), exposedNames(t))
	for _, alert := range []string{"ElectdJobWithoutLeader", "ElectdJobFlapping", "ElectdRenewalsFailing",
		"ElectdTaskNotSucceeded", "ElectdStoreUnreachable", "ElectdTokenRegression"} {
		if !strings.Contains(string(rules), "alert: "+alert+"\n") {
			t.Errorf("electd-alerts.yml has no %s", alert)
		}
	}
}
