package metrics

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/electd/electd/providers"
	sqlprovider "github.com/electd/electd/providers/sql"
)

func sqlite(t *testing.T, dsn string) providers.Provider {
	t.Helper()
	p, err := sqlprovider.New(context.Background(), sqlprovider.Settings{Driver: "sqlite", DSN: dsn}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestInstrumentCountsStoreErrorsOnly(t *testing.T) {
	m := New("test", "abc")
	ctx := context.Background()
	p := m.Instrument("sql.local", sqlite(t, filepath.Join(t.TempDir(), "leases.db")))

	l, err := p.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: time.Minute}); !errors.Is(err, providers.ErrHeld) {
		t.Fatalf("second holder: %v, want held", err)
	}
	stale := l
	stale.Token++
	if _, err := p.Renew(ctx, stale); !errors.Is(err, providers.ErrLost) {
		t.Fatalf("stale renew: %v, want lost", err)
	}
	if got := testutil.ToFloat64(m.LeaseErrors.WithLabelValues("sql.local", "acquire")); got != 0 {
		t.Errorf("a held lease counted as %v errors, want 0", got)
	}
	if got := testutil.ToFloat64(m.LeaseErrors.WithLabelValues("sql.local", "renew")); got != 0 {
		t.Errorf("a lost lease counted as %v errors, want 0", got)
	}
	if n := testutil.CollectAndCount(m.LeaseOp, "electd_lease_op_seconds"); n != 2 {
		t.Errorf("%d op series, want 2 (acquire, renew)", n)
	}

	down := m.Instrument("sql.down", sqlite(t, filepath.Join(t.TempDir(), "no", "such", "dir", "leases.db")))
	if _, err := down.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: time.Minute}); err == nil {
		t.Fatal("acquire on an unreachable store succeeded")
	}
	if got := testutil.ToFloat64(m.LeaseErrors.WithLabelValues("sql.down", "acquire")); got != 1 {
		t.Errorf("store error counted %v times, want 1", got)
	}
}

// capable is a provider with every optional capability, none of which the
// test calls.
type capable struct{ providers.Provider }

func (capable) Notify(context.Context, func(string)) error { return nil }
func (capable) AcquireMany(context.Context, []providers.AcquireRequest) ([]providers.Lease, []error) {
	return nil, nil
}
func (capable) RenewMany(context.Context, []providers.Lease) ([]providers.Lease, []error) {
	return nil, nil
}
func (capable) ReleaseMany(context.Context, []providers.Lease) []error { return nil }

// TestInstrumentKeepsCapabilities: an instrumented provider exposes, through
// Unwrap and providers.As, exactly the optional capabilities of the provider
// beneath.
func TestInstrumentKeepsCapabilities(t *testing.T) {
	m := New("test", "abc")
	has := func(p providers.Provider) []bool {
		_, n := providers.As[providers.Notifier](p)
		_, b := providers.As[providers.Batcher](p)
		return []bool{n, b}
	}
	names := []string{"Notifier", "Batcher"}
	for i, ok := range has(m.Instrument("fake.all", capable{})) {
		if !ok {
			t.Errorf("an instrumented provider with every capability lost %s", names[i])
		}
	}
	type plain struct{ providers.Provider }
	for i, ok := range has(m.Instrument("fake.none", plain{})) {
		if ok {
			t.Errorf("an instrumented provider without capabilities claims %s", names[i])
		}
	}
}

// TestInstrumentKeepsNotifier: instrumenting a real SQL provider neither
// adds nor loses providers.Notifier, and Postgres (LISTEN/NOTIFY) keeps it.
func TestInstrumentKeepsNotifier(t *testing.T) {
	m := New("test", "abc")
	// Whether SQLite notifies is the sql package's choice (a file may, an
	// in-memory database cannot); the instrumented provider must agree.
	for _, dsn := range []string{filepath.Join(t.TempDir(), "l.db"), ":memory:"} {
		p := sqlite(t, dsn)
		_, want := p.(providers.Notifier)
		if _, ok := providers.As[providers.Notifier](m.Instrument("sql.local", p)); ok != want {
			t.Errorf("sqlite %s: instrumented provider is a Notifier: %v, the provider beneath: %v", dsn, ok, want)
		}
	}
	dsn := os.Getenv("ELECTD_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	pg, err := sqlprovider.New(context.Background(), sqlprovider.Settings{Driver: "postgres", DSN: dsn, Table: "electd_metrics_test"}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if _, ok := providers.As[providers.Notifier](m.Instrument("sql.pg", pg)); !ok {
		t.Error("an instrumented postgres provider lost its Notifier capability")
	}
}

func TestHandlerExposesEveryMetric(t *testing.T) {
	m := New("1.2.3", "abc")
	m.CollectJobs(func() []JobSample {
		return []JobSample{{Job: "billing", Leader: true, Elected: 1, TokenRegressions: 2, TermsEnded: map[string]uint64{"balanced": 3}},
			{Job: "report", LastSuccess: time.Unix(1_764_230_461, 500e6), NextRun: time.Unix(1_764_316_800, 0), LastRunKnown: true},
			{Job: "sync", LastRunKnown: true, LastRunSucceeded: true},
			{Job: "fresh"}}
	})
	m.TaskRuns.WithLabelValues("report", "failed").Inc()
	m.TaskDuration.WithLabelValues("report").Observe(61.5)
	m.LeaseOp.WithLabelValues("sql.main", "renew").Observe(0.01)
	m.LeaseErrors.WithLabelValues("sql.main", "renew").Inc()
	m.ActionRuns.WithLabelValues("billing", "elected", "exec", "ok").Inc()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`electd_is_leader{job="billing"} 1`,
		`electd_transitions_total{job="billing",type="elected"} 1`,
		`electd_token_regressions_total{job="billing"} 2`,
		`electd_leader_changes_total{job="billing",reason="balanced"} 3`,
		`electd_lease_op_seconds_count{op="renew",provider="sql.main"} 1`,
		`electd_lease_op_errors_total{op="renew",provider="sql.main"} 1`,
		`electd_action_runs_total{event="elected",job="billing",kind="exec",result="ok"} 1`,
		`electd_build_info{commit="abc",goversion=`,
		`process_resident_memory_bytes`,
		`electd_task_runs_total{job="report",result="failed"} 1`,
		`electd_task_duration_seconds_bucket{job="report",le="120"} 1`,
		`electd_task_last_success_timestamp_seconds{job="report"} 1.7642304615e+09`,
		`electd_task_next_run_timestamp_seconds{job="report"} 1.7643168e+09`,
		`electd_task_last_run_succeeded{job="report"} 0`,
		`electd_task_last_run_succeeded{job="sync"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// No run known to have ended: no series, rather than a 0 that would
	// say it failed.
	if strings.Contains(string(body), `electd_task_last_run_succeeded{job="fresh"}`) {
		t.Error("electd_task_last_run_succeeded for a job with no run that ended")
	}
}
