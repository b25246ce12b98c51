package agent

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/config"
	"github.com/electd/electd/metrics"
)

// syncBuffer is a log output the test reads while commands write to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestOutputRateLimit: a flood logs the burst, then the sustained rate,
// and a summary of what it dropped once per period and at the end; all on
// a fake clock.
func TestOutputRateLimit(t *testing.T) {
	var out syncBuffer
	log := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info})
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	m := metrics.New("test", "test")
	lim := newOutputLimit("flood", m, func() time.Time { return now })
	l := &lineLogger{log: log, stream: "stdout", level: hclog.Info, limit: lim}
	write := func(n int) {
		for i := 0; i < n; i++ {
			fmt.Fprintf(l, "line %d\n", i)
		}
	}
	count := func() (lines, summaries int) {
		for _, s := range strings.Split(out.String(), "\n") {
			switch {
			case strings.Contains(s, "line "):
				lines++
			case strings.Contains(s, "lines dropped from the log"):
				summaries++
			}
		}
		return
	}

	write(10000) // all at once
	if lines, sums := count(); lines != outputBurst || sums != 0 {
		t.Fatalf("at once: %d lines and %d summaries logged, want the burst %d and no summary yet", lines, sums, outputBurst)
	}
	now = now.Add(time.Second)
	write(10000)
	if lines, _ := count(); lines != outputBurst+outputLinesPerSecond {
		t.Fatalf("a second later: %d lines logged, want %d", lines, outputBurst+outputLinesPerSecond)
	}
	now = now.Add(outputSummaryEvery)
	write(1)
	if _, sums := count(); sums != 1 || !strings.Contains(out.String(), fmt.Sprintf("dropped=%d", 20000-outputBurst-outputLinesPerSecond)) {
		t.Fatalf("after %s: want one summary of %d lines dropped:\n%s", outputSummaryEvery, 20000-outputBurst-outputLinesPerSecond, tailOf(out.String()))
	}
	// The burst is back after the pause; the end of a command says what
	// the last flood dropped.
	write(outputBurst + 5) // one token went to the line above
	lim.summary(log)
	if _, sums := count(); sums != 2 || !strings.Contains(out.String(), "dropped=6 ") {
		t.Fatalf("at the end: want a second summary of 6 lines:\n%s", tailOf(out.String()))
	}
	if got := counterValue(t, m, "electd_output_lines_dropped_total"); got != 20000-outputBurst-outputLinesPerSecond+6 {
		t.Errorf("electd_output_lines_dropped_total = %v", got)
	}

	// Lines below the log's level take no tokens.
	dbg := &lineLogger{log: log, stream: "stdout", level: hclog.Debug, limit: newOutputLimit("quiet", nil, func() time.Time { return now })}
	for i := 0; i < 3*outputBurst; i++ {
		fmt.Fprintf(dbg, "debug %d\n", i)
	}
	if dbg.limit.dropped != 0 {
		t.Errorf("debug lines below the level took tokens: %d dropped", dbg.limit.dropped)
	}
}

func tailOf(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

func counterValue(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, c := range mf.GetMetric() {
				sum += c.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestOutputFloodFromACommand: a real command writing as fast as it can
// puts at most the burst and the sustained rate into the log, and says how
// many lines it dropped.
func TestOutputFloodFromACommand(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	r := &runner{job: "flood", log: hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info}), shim: self}
	began := time.Now()
	s, err := r.start("run", config.Command{Argv: config.ListOf("sh", "-c", "yes flood | head -n 200000")}, config.Event{Type: "elected"})
	if err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	r.reap(s, false)
	took := time.Since(began)
	lines := strings.Count(out.String(), "flood: stream=stdout")
	if max := outputBurst + int(took.Seconds()*outputLinesPerSecond) + 1; lines > max || lines < outputBurst {
		t.Errorf("%d lines of output logged in %s, want between %d and %d", lines, took, outputBurst, max)
	}
	if !strings.Contains(out.String(), "lines dropped from the log") {
		t.Errorf("no summary of the dropped lines:\n%s", tailOf(out.String()))
	}
}
