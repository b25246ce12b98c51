package repeats

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/internal/syncbuf"
)

var storeKind = Kind{First: "cannot reach the store", Still: "store still unreachable", Recovered: "store reachable again", Key: "provider"}

type fake struct{ now time.Time }

func (f *fake) Now() time.Time          { return f.now }
func (f *fake) advance(d time.Duration) { f.now = f.now.Add(d) }

func newLog(kind Kind) (*Log, *fake, *syncbuf.Buffer) {
	buf := &syncbuf.Buffer{}
	clock := &fake{now: time.Date(2026, 11, 27, 20, 1, 2, 0, time.UTC)}
	log := hclog.New(&hclog.LoggerOptions{Output: buf, Level: hclog.Trace, DisableTime: true})
	return New(log, clock.Now, kind), clock, buf
}

func lines(buf *syncbuf.Buffer) []string {
	s := strings.TrimSpace(buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// An outage of ten minutes with a failure a second is a first line, a
// summary after 10s, 20s, 40s ... (growing), and one line when it ends.
func TestOutageIsLoggedOnceThenSummarised(t *testing.T) {
	l, clock, buf := newLog(storeKind)
	refused := errors.New("dial tcp 127.0.0.1:5432: connection refused")
	for range 600 {
		l.Failed("postgres.main", refused, "job", "billing")
		clock.advance(time.Second)
	}
	got := lines(buf)
	if len(got) == 0 || !strings.Contains(got[0], "[WARN]  cannot reach the store: provider=postgres.main job=billing") ||
		!strings.Contains(got[0], "connection refused") {
		t.Fatalf("first line: %q", got)
	}
	// Summaries at 10s, 30s, 70s, 150s, 310s after the first line (each
	// interval twice the last), then the next would be at 630s.
	want := []string{"11 failures", "31 failures", "71 failures", "151 failures", "311 failures"}
	if len(got) != 1+len(want) {
		t.Fatalf("%d lines for 600 failures, want %d:\n%s", len(got), 1+len(want), buf)
	}
	for i, w := range want {
		line := got[1+i]
		if !strings.Contains(line, "[WARN]  store still unreachable: "+w+" since 20:01:02") || !strings.Contains(line, "connection refused") {
			t.Errorf("summary %d: %q, want %q since 20:01:02 with the last error", i, line, w)
		}
	}
	if since, n := l.Since("postgres.main"); n != 600 || !since.Equal(time.Date(2026, 11, 27, 20, 1, 2, 0, time.UTC)) {
		t.Errorf("Since: %s %d, want 20:01:02 600", since, n)
	}

	l.Succeeded("postgres.main")
	l.Succeeded("postgres.main") // once
	got = lines(buf)
	if len(got) != 7 || !strings.Contains(got[6], "[INFO]  store reachable again after 600 failures since 20:01:02") ||
		!strings.Contains(got[6], "for=10m0s") {
		t.Fatalf("recovery: %q", got[len(got)-1])
	}
	if _, n := l.Since("postgres.main"); n != 0 {
		t.Errorf("Since after recovery: %d failures, want 0", n)
	}
}

// Many jobs failing on one store share its lines: a hundred jobs failing
// every second for a minute log as one store.
func TestJobsOfOneStoreShareTheLines(t *testing.T) {
	l, clock, buf := newLog(storeKind)
	for range 60 {
		for j := range 100 {
			l.Failed("redis.r", errors.New("i/o timeout"), "job", j)
		}
		clock.advance(time.Second)
	}
	got := lines(buf)
	// First, then 10s, 30s.
	if len(got) != 3 || !strings.Contains(got[1], "1001 failures") || !strings.Contains(got[2], "3001 failures") {
		t.Errorf("100 jobs for a minute:\n%s", buf)
	}
	// Another store is another key.
	l.Failed("sqlite.local", errors.New("disk I/O error"))
	if got := lines(buf); len(got) != 4 || !strings.Contains(got[3], "provider=sqlite.local") {
		t.Errorf("a second store's first failure: %q", got[len(got)-1])
	}
}

// A store that flaps (fails, answers, fails ...) does not log a first line
// and a recovery per flap: runs of failures that begin soon after the last
// line go into the summaries, at growing intervals.
func TestFlappingIsSummarised(t *testing.T) {
	l, clock, buf := newLog(storeKind)
	for range 300 {
		l.Failed("etcd.e", errors.New("context deadline exceeded"))
		clock.advance(time.Second)
		l.Succeeded("etcd.e")
		clock.advance(time.Second)
	}
	got := lines(buf)
	// 10 minutes of flapping: lines at 0s, 1s (recovered), then one
	// first/recovered pair per interval (20s, 40s, 80s, 160s, 320s after
	// the last), never more than a pair per 10s.
	if len(got) > 14 {
		t.Errorf("%d lines for 300 flaps in 10 minutes:\n%s", len(got), buf)
	}
	if len(got) < 4 {
		t.Errorf("flapping hidden: %d lines\n%s", len(got), buf)
	}
	// The flaps between lines are counted on the next first line.
	if last := got[len(got)-2]; !strings.Contains(last, "cannot reach the store") || !strings.Contains(last, "earlier_failures=") {
		t.Errorf("the last first line does not count the flaps before it: %q", last)
	}
}

// A quiet Kind logs its failures at its own level (electd lock logs the
// store's failures at Info: it says the outcome itself).
func TestLevel(t *testing.T) {
	kind := storeKind
	kind.Level = hclog.Debug
	l, _, buf := newLog(kind)
	l.Failed("k", errors.New("x"))
	l.Succeeded("k")
	got := lines(buf)
	if len(got) != 2 || !strings.HasPrefix(got[0], "[DEBUG]") || !strings.HasPrefix(got[1], "[DEBUG]") {
		t.Errorf("at Debug: %q", got)
	}
}

// A success with no failure before it logs nothing.
func TestNoFailureNoLine(t *testing.T) {
	l, _, buf := newLog(storeKind)
	l.Succeeded("k")
	if buf.String() != "" {
		t.Errorf("logged %q", buf)
	}
}
